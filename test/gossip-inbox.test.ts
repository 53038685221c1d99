/** GossipInbox (gossip-inbox.ts): incoming gossip applied in order, in slices that yield to the event loop, bounded. */
import test from 'ava'
import { setImmediate as tick } from 'node:timers/promises'
import { GossipInbox } from '../src/cluster/gossip-inbox.js'

const bytes = (n: number): Uint8Array => Uint8Array.of(n)

async function settle (inbox: GossipInbox): Promise<void> {
  while (inbox.depth > 0) await tick()
}

test('applies every gossip once, in order, after the callback that queued it returns', async t => {
  const seen: string[] = []
  const inbox = new GossipInbox({ apply: (from, data) => { seen.push(`${from}:${data[0]}`) } })
  for (let i = 0; i < 50; i++) inbox.push(i % 2 === 0 ? 'p' : 'q', bytes(i))
  // Nothing runs inside the transport's callback: the socket is polled first.
  t.deepEqual(seen, [])
  await settle(inbox)
  t.deepEqual(seen, Array.from({ length: 50 }, (_, i) => `${i % 2 === 0 ? 'p' : 'q'}:${i}`))
  t.is(inbox.dropped, 0)
})

test('a slice yields to the event loop: a slow apply spreads the queue over several turns', async t => {
  const seen: number[] = []
  // sliceMs 0: one message per slice whatever the clock says.
  const inbox = new GossipInbox({ apply: (_f, data) => { seen.push(data[0]) }, sliceMs: 0 })
  for (let i = 0; i < 5; i++) inbox.push('p', bytes(i))
  await tick()
  t.deepEqual(seen, [0])
  await settle(inbox)
  t.deepEqual(seen, [0, 1, 2, 3, 4])
  t.is(inbox.slices, 5)
})

test('a full queue drops its oldest and counts it; close drops the rest', async t => {
  const seen: number[] = []
  const inbox = new GossipInbox({ apply: (_f, data) => { seen.push(data[0]) }, maxQueued: 3 })
  for (let i = 0; i < 5; i++) inbox.push('p', bytes(i))
  t.is(inbox.dropped, 2)
  await settle(inbox)
  t.deepEqual(seen, [2, 3, 4])
  inbox.push('p', bytes(9))
  inbox.close()
  inbox.push('p', bytes(10))
  await tick()
  t.deepEqual(seen, [2, 3, 4])
  t.like(inbox.stats(), { waiting: 0, dropped: 2, maxWaiting: 3 })
})
