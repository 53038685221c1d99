/**
 * What a gossip's `acks` carry (gossip-schedule.ts `acks`), and the cluster
 * codec's floats (wire.ts). Pure: two cores driven by hand, no network.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import type { Gossip } from '../src/cluster/messages.js'
import { wire } from '../src/cluster/wire.js'
import { handCore, WALL } from './helpers/hand-core.js'
import { rule } from './helpers/rules.js'

const KEY = 'api'

function core (node: 'a' | 'b'): ClusterCore {
  return handCore(node, [rule({ name: KEY, limit: 100, perMs: 1000 })], { fullSyncEvery: 1000 })
}

const ackOf = (g: Gossip, giver: string): number | undefined => g.acks.find(e => e[0] === giver)?.[2]

test("a gossip carries an ack for the two gossips after its mark moved, every one on a full sync's first, and the giver's view never goes back", t => {
  const a = core('a')
  const b = core('b')
  a.onGossip(b.gossip.now(10), 'id:b', 10)
  b.onGossip(a.gossip.now(10), 'id:a', 10)
  const ks = a.limiter.existing(KEY) ?? a.limiter.keyState(KEY, 1, 20)
  const p = a.peers.get('b')
  if (p === undefined) throw new Error('setup')
  const g = a.transfers.give(ks, ks.ext as never, p, 3, 20)
  if (g === undefined) throw new Error('nothing given')
  t.is(b.onGrant(g, 'id:a', 30).applied, 1)
  const said = [40, 50, 60, 70].map(now => b.gossip.now(now))
  t.deepEqual(said.map(m => ackOf(m, 'a')), [1, 1, undefined, undefined], 'sent twice after it moved, then left out')
  // A giver reading a gossip without its ack keeps the mark it had.
  for (const m of said) a.onGossip(m, 'id:b', m.now - WALL)
  t.is(a.peers.get('b')?.appliedFromMe, 1)
  t.is(a.ledger.unackedTotal(), 0)
  b.gossip.requestFullSync()
  const sync = b.gossip.due(1000)
  t.is(sync === null ? undefined : ackOf(sync, 'a'), 1, "a full sync's first gossip carries every ack")
  t.is(ackOf(b.gossip.now(1100), 'a'), undefined)
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
