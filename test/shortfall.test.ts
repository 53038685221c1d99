/**
 * The shortfall (src/cluster/shortfall.ts): the pure sum with hand-worked
 * numbers, then a real ClusterCore fed peers' gossip, where alive, agreeing,
 * announced and unannounced peers each count as the header says.
 */
import test from 'ava'
import { ClusterCore } from '../src/cluster/cluster-core.js'
import type { Gossip, GossipKey } from '../src/cluster/messages.js'
import { CLUSTER_VERSION } from '../src/cluster/messages.js'
import { custody, keyShortfall, ownCustody, shortfall, type CustodyLine, type PeerCustody } from '../src/cluster/shortfall.js'
import { homeNode } from '../src/core/share.js'
import { limits, rule } from './helpers/rules.js'

const line = (held: number, outstanding = 0, deferred = 0, inTransitOut = 0, owed = 0): CustodyLine => ({ held, outstanding, deferred, inTransitOut, owed })
const peer = (p: Partial<PeerCustody>): PeerCustody => ({ alive: true, agrees: true, line: undefined, share: 0, ...p })

test('custody: held + outstanding + deferred + in transit, less a burn owed', t => {
  t.is(custody(line(20, 10, 5, 3)), 38)
  t.is(custody(line(20, 10, 5, 3, 8)), 30)
})

test('shortfall: the stock less own custody and every alive agreeing peer', t => {
  // 100 = own 30 + b 40 (20 + 10 + 5 + 5) + c, which never announced the key: its share 20. 10 are short.
  const b = peer({ line: line(20, 10, 5, 5) })
  const c = peer({ share: 20 })
  t.is(shortfall(100, 30, [b, c]), 10)
  // c dead: its 20 are short too; c on another rule version: likewise (its tokens are not shared with us).
  t.is(shortfall(100, 30, [b, { ...c, alive: false }]), 30)
  t.is(shortfall(100, 30, [b, { ...c, agrees: false }]), 30)
  // A dead peer's line counts for nothing, however much it said it had.
  t.is(shortfall(100, 30, [{ ...b, alive: false }, c]), 50)
  // Nobody short: everything accounted for (and more, for a moment, during a transfer): 0, never negative.
  t.is(shortfall(100, 30, [peer({ line: line(50) }), c]), 0)
  t.is(shortfall(100, 60, [peer({ line: line(50) }), c]), 0)
  // Alone, holding nothing of it: all of it is short, never more.
  t.is(shortfall(100, 0, []), 100)
})

test('shortfall: a peer\'s figures are bounded by the stock; a burn owed is not custody', t => {
  // A line that claims far more than the stock counts for one stock at most; one far below for minus one.
  t.is(shortfall(100, 0, [peer({ line: line(1e12) })]), 0)
  t.is(shortfall(100, 50, [peer({ line: line(0, 0, 0, 0, 1e12) })]), 100)
  // A rule lowered the stock to 60: b holds 40 but owes a burn of 10; a holds 20. 60 - 20 - 30 = 10 short.
  t.is(shortfall(60, 20, [peer({ line: line(40, 0, 0, 0, 10) })]), 10)
})

// ---- on a real core ------------------------------------------------------

const STOCK = 90
const T = 1_000_000

function core (): ClusterCore {
  const c = new ClusterCore({
    node: 'a',
    epoch: 'ea',
    seeds: ['a', 'b', 'c'],
    listed: new Map([['a', 'id:a'], ['b', 'id:b'], ['c', 'id:c']]),
    rules: [rule({ name: 'day', limit: STOCK, perMs: 86_400_000 }), rule({ name: 'sig', match: 'sig:*', limit: 12, perMs: 86_400_000 })],
    limits: limits(),
    allocate: true,
    // Leases off: these cores never hear a seed's echo, and what is tested here (written before leases) is not about them.
    tuning: { leases: false },
    wallMs: 1_800_000_000_000,
    monoMs: T
  })
  c.init(T)
  return c
}

let seq = 0
function gossip (c: ClusterCore, node: string, keys: GossipKey[], rules?: Record<string, string>): Gossip {
  return {
    v: CLUSTER_VERSION, t: 'gossip', node, epoch: `e${node}`, inc: 1, seq: ++seq, now: 0, pending: [], carries: [], cfg: c.clusterHash,
    rules: rules ?? Object.fromEntries(c.limiter.rules.map(r => [r.name, r.hash])), keys, acks: []
  }
}

test('on a core: own custody, announced lines, an unannounced key at the peer\'s share, a dead peer, a rule that differs', t => {
  const c = core()
  const day = c.limiter.existing('day')
  if (day === undefined) return t.fail('no day key')
  // Each seed's share is 30; a spends 5 (they stay in its custody, outstanding).
  t.is(ownCustody(c, day, T), 30)
  for (let i = 0; i < 5; i++) t.true(c.acquire('day', 1, T).allowed)
  t.is(ownCustody(c, day, T), 30)
  // Heard of nobody yet: b's and c's 60 are not accounted for.
  t.is(keyShortfall(c, day, T), 60)
  // b: 12 held, 8 spent, 4 deferred, 6 in grants not yet acked = 30. c: has not announced `day`, so its share, 30.
  c.onGossip(gossip(c, 'b', [['day', 12, 8, 0, 0, 0, 4, 6]]), 'id:b', T)
  c.onGossip(gossip(c, 'c', []), 'id:c', T)
  t.is(keyShortfall(c, day, T), 0)
  // b announces it gave 6 more away than its grants show (a crash-like loss of 6): 6 short.
  c.onGossip(gossip(c, 'b', [['day', 12, 8, 0, 0, 0, 4, 0]]), 'id:b', T + 10)
  t.is(keyShortfall(c, day, T + 10), 6)
  // c moves to another version of `day`: its share is no longer shared with a, so it shows as short.
  const other = { day: 'other', sig: c.limiter.rules[1].hash }
  c.onGossip(gossip(c, 'c', [], other), 'id:c', T + 20)
  t.is(keyShortfall(c, day, T + 20), 36)
  // b falls silent past the alive timeout (c keeps talking): b's 24 are short as well.
  const later = T + 20 + c.tuning.aliveTimeoutMs + 1
  c.onGossip(gossip(c, 'c', [], other), 'id:c', later)
  t.is(keyShortfall(c, day, later), 60)
  // b is heard again: it counts again.
  c.onGossip(gossip(c, 'b', [['day', 12, 8, 0, 0, 0, 4, 0]]), 'id:b', later)
  t.is(keyShortfall(c, day, later), 36)
  // c comes back to a's version: nothing is short but b's lost 6.
  c.onGossip(gossip(c, 'c', []), 'id:c', later)
  t.is(keyShortfall(c, day, later), 6)
})

test('on a core: a glob key a peer never announced counts its whole stock at its home only', t => {
  const c = core()
  c.onGossip(gossip(c, 'b', []), 'id:b', T)
  c.onGossip(gossip(c, 'c', []), 'id:c', T)
  // Keys of `sig:*` whose home is a, b and c: the home holds the whole stock until it says otherwise.
  for (const home of ['a', 'b', 'c']) {
    let key = ''
    for (let i = 0; key === ''; i++) if (homeNode(`sig:${i}`, c.seeds) === home) key = `sig:${i}`
    const ks = c.limiter.keyState(key, 1, T)
    t.is(ownCustody(c, ks, T), home === 'a' ? 12 : 0)
    t.is(keyShortfall(c, ks, T), 0, `home ${home}`)
    // Every peer falls silent: the whole stock is short, unless its home is this node.
    const dead = T + c.tuning.aliveTimeoutMs + 1
    t.is(keyShortfall(c, ks, dead), home === 'a' ? 0 : 12, `home ${home}, peers silent`)
  }
})
