/**
 * What the gossip says of a key's custody (gossip-builder.ts,
 * gossip-schedule.ts): a key is announced again when its custody moved,
 * even when nothing else did (an ack ends a grant's transit and changes no
 * holding), and not again while it stays put. On a real ClusterCore.
 */
import test from 'ava'
import { ClusterCore } from '../src/cluster/cluster-core.js'
import { CLUSTER_VERSION, type Gossip, type GossipKey, type Grant } from '../src/cluster/messages.js'
import { limits, rule } from './helpers/rules.js'

const T = 1_000_000

function setup (): ClusterCore {
  const c = new ClusterCore({
    node: 'a',
    epoch: 'ea',
    seeds: ['a', 'b'],
    listed: new Map([['a', 'id:a'], ['b', 'id:b']]),
    rules: [rule({ name: 'day', limit: 100, perMs: 86_400_000 })],
    limits: limits(),
    allocate: true,
    wallMs: 1_800_000_000_000,
    monoMs: T
  })
  c.init(T)
  const b: Gossip = {
    v: CLUSTER_VERSION, t: 'gossip', node: 'b', epoch: 'eb', inc: 1, seq: 1, now: 0, pending: [], carries: [], cfg: c.clusterHash,
    rules: Object.fromEntries(c.limiter.rules.map(r => [r.name, r.hash])), keys: [['day', 50, 0, 0, 0, 0, 0, 0]], acks: []
  }
  c.onGossip(b, 'id:b', T)
  return c
}

const dayLine = (g: Gossip): GossipKey | undefined => g.keys.find(k => k[0] === 'day')

test('a grant\'s tokens are custody until acked; the ack alone re-announces the key; then it stays quiet', t => {
  const c = setup()
  // The first gossip announces every key: a holds its share, 50, nothing in transit.
  t.deepEqual(dayLine(c.gossip.now(T)), ['day', 50, 0, 0, 0, 0, 0, 0])
  // b asks for 20: a debits them into a grant. Held falls by 20, transit rises by 20: custody is unchanged.
  const g = c.onWant({ v: CLUSTER_VERSION, t: 'want', node: 'b', epoch: 'eb', inc: 1, key: 'day', want: 20 }, 'id:b', T + 10)
  t.is(g.t, 'grant')
  const n = (g as Grant).items[0][1]
  t.true(n >= 1)
  t.is(c.ledger.inTransitOf('day'), n)
  t.deepEqual(dayLine(c.gossip.now(T + 300)), ['day', 50 - n, 0, 0, 0, 0, 0, n])
  // Announced and idle: the key leaves the active set on the next tick (no gossip due yet).
  c.tick(T + 350)
  t.false([...c.active].some(ks => ks.key === 'day'), 'day is quiet')
  // b's gossip acks the grant: only transit moves (held stays 50 - n), and the quiet key goes out again, at once.
  c.onGossip({
    v: CLUSTER_VERSION, t: 'gossip', node: 'b', epoch: 'eb', inc: 1, seq: 2, now: 0, pending: [], carries: [], cfg: c.clusterHash,
    rules: Object.fromEntries(c.limiter.rules.map(r => [r.name, r.hash])), keys: [['day', 50 + n, 0, 0, 0, 0, 0, 0]], acks: [['a', 'ea', 1]]
  }, 'id:b', T + 400)
  t.is(c.ledger.inTransitOf('day'), 0)
  t.deepEqual(dayLine(c.gossip.now(T + 600)), ['day', 50 - n, 0, 0, 0, 0, 0, 0])
  // Nothing moved since: the key is not sent again (traffic follows change, not time).
  t.is(dayLine(c.gossip.now(T + 900)), undefined)
})
