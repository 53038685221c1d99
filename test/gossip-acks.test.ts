/**
 * Where applied marks go (gossip-schedule.ts `acks`, `directAcks`): to
 * their giver alone, and in a full sync's first gossip; and the cluster
 * codec's floats (wire.ts). Pure: two cores driven by hand, no network.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import type { Ack, Gossip } from '../src/cluster/messages.js'
import { wire } from '../src/cluster/wire.js'
import { handCore } from './helpers/hand-core.js'
import { rule } from './helpers/rules.js'

const KEY = 'api'

function core (node: 'a' | 'b'): ClusterCore {
  return handCore(node, [rule({ name: KEY, limit: 100, perMs: 1000 })], { fullSyncEvery: 1000 })
}

const ackOf = (g: Gossip, giver: string): number | undefined => g.acks.find(e => e[0] === giver)?.[2]

/** The acks `c` sends as requests of their own at its tick at `nowMs`. */
function directAcks (c: ClusterCore, nowMs: number): Ack[] {
  return c.tick(nowMs).flatMap(o => o.kind === 'request' && o.msg.t === 'ack' ? [o.msg] : [])
}

/** Seeds a and b that heard each other; a gave b 3 tokens at 20, and b applied them at 30 (its mark for a: 1). */
function gaveThree (): { a: ClusterCore, b: ClusterCore } {
  const a = core('a')
  const b = core('b')
  a.onGossip(b.gossip.now(10), 'id:b', 10)
  b.onGossip(a.gossip.now(10), 'id:a', 10)
  const ks = a.limiter.existing(KEY) ?? a.limiter.keyState(KEY, 1, 20)
  const p = a.peers.get('b')
  if (p === undefined) throw new Error('setup')
  const g = a.transfers.give(ks, ks.ext as never, p, 3, 20)
  if (g === undefined) throw new Error('nothing given')
  if (b.onGrant(g, 'id:a', 30).applied !== 1) throw new Error('not applied')
  return { a, b }
}

test("a moved mark is acked to its giver alone, in the two gossip intervals after it moved; a gossip carries marks only on a full sync's first", t => {
  const { a, b } = gaveThree()
  // Gossip intervals (250 ms) from 30: a tick makes the gossip, and with it the direct acks.
  const acks = [300, 550, 800, 1050].map(now => directAcks(b, now))
  t.deepEqual(acks.map(l => l.map(x => [x.node, x.toEpoch, x.applied])), [[['b', 'a.1', 1]], [['b', 'a.1', 1]], [], []], 'sent twice after it moved, then left out')
  const said = [1100, 1200].map(now => b.gossip.now(now))
  t.deepEqual(said.map(m => ackOf(m, 'a')), [undefined, undefined], 'gossips carry none')
  t.is(a.ledger.unackedTotal(), 3, 'the 3 tokens wait for their ack')
  // The giver takes it: the grant leaves its ledger, and its view of the mark never goes back.
  t.is(a.onAck(acks[0][0], 'id:b', 1300).t, 'none')
  t.is(a.ledger.unackedTotal(), 0)
  t.is(a.peers.get('b')?.appliedFromMe, 1)
  a.onAck({ ...acks[0][0], applied: 0 }, 'id:b', 1310)
  t.is(a.peers.get('b')?.appliedFromMe, 1)
  b.gossip.requestFullSync()
  const sync = b.gossip.due(5000)
  t.is(sync === null ? undefined : ackOf(sync, 'a'), 1, "a full sync's first gossip carries every ack")
  t.is(ackOf(b.gossip.now(5300), 'a'), undefined)
})

test('a direct ack is taken only from the peer id bound to its name, and only for the epoch it names', t => {
  const { a, b } = gaveThree()
  const [ack] = directAcks(b, 300)
  a.onAck(ack, 'id:mallory', 310)
  a.onAck({ ...ack, toEpoch: 'a.0' }, 'id:b', 320)
  t.is(a.ledger.unackedTotal(), 3, 'neither an impostor nor an ack of another epoch of the giver drops the grant')
  a.onAck(ack, 'id:b', 330)
  t.is(a.ledger.unackedTotal(), 0)
})

test('the cluster codec sends one-decimal fractions in 5 bytes and reads back the decimal sent', t => {
  for (const v of [0.1, 0.7, 2.4, 7.9, 123.4]) {
    const bytes = wire.pack(v)
    t.is(bytes.length, 5)
    t.is(wire.unpack(bytes), v)
  }
  // More digits than a float32 holds: a float64, exact.
  const exact = 1 / 3
  t.is(wire.pack(exact).length, 9)
  t.is(wire.unpack(wire.pack(exact)), exact)
  t.is(wire.pack(1_700_000_000_123).length, 9, 'whole numbers stay integers')
})
