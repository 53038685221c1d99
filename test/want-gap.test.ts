/**
 * The gap after a round of wants that got nothing (rebalance.ts `wantGap`),
 * through the daemon's own rebalance step on the simulator's virtual
 * cluster: a node that expects under one request of a key within its
 * horizon asks again only after the horizon; a busier one after
 * `wantGapMs`; a round that got tokens lets the next go at once.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ClusterCore, Outbound } from '../src/cluster/cluster-core.js'
import { ext } from '../src/cluster/key-ext.js'
import { rebalance, wantGap } from '../src/cluster/rebalance.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const NODES = ['n0', 'n1', 'n2', 'n3']

function shortNode (rate: number): { c: ClusterCore, step: (at: number) => number } {
  // A long window, so the horizon is the tuning's (1 s) and not the time left in a window. The cluster is
  // formed and then left still, so its peers must count as alive for the whole test without gossip.
  const vc = new VirtualCluster({ nodes: NODES, rules: [rule({ name: 'day', limit: 4000, perMs: 86_400_000 })], limits: limits(), seed: 3, startMs: T0, tuning: { aliveTimeoutMs: 60_000 } })
  vc.runUntil(T0 + 3000)
  const c = vc.cores.get('n0') as ClusterCore
  const ks = c.limiter.keyState('day', 1, vc.now)
  ks.bucket.advance(vc.now)
  ks.bucket.debit(ks.bucket.held)
  const x = ext(ks)
  x.rate = rate
  x.fastRate = rate
  x.lastDemandAt = vc.now
  // Every want this step sends; its answers are taken to have come (nothing in flight), none with tokens.
  const step = (at: number): number => {
    const out: Outbound[] = []
    rebalance(c, ks, x, at)
    c.batch.flush(c, out, at)
    x.wantsOut = 0
    return out.filter(o => o.kind !== 'gossip' && o.msg.t === 'want').length
  }
  return { c, step }
}

test('the gap: the horizon for a key expected under once per horizon, wantGapMs otherwise, and always for a burn', t => {
  t.is(wantGap(100, 1000, 0.5, 0), 1000)
  t.is(wantGap(100, 1000, 0.99, 0), 1000)
  t.is(wantGap(100, 1000, 1, 0), 100)
  t.is(wantGap(100, 1000, 40, 0), 100)
  t.is(wantGap(100, 1000, 0.5, 2), 100, 'a burn owed is asked for as before')
  t.is(wantGap(100, 50, 0.5, 0), 100, 'never under wantGapMs')
})

test('a rare key\'s fruitless round: the next waits the horizon; a busy key\'s waits wantGapMs', t => {
  const rare = shortNode(0.5)
  const t0 = T0 + 3000
  t.true(rare.step(t0) >= 1, 'short and the peers hold plenty: it asks')
  t.is(rare.step(t0 + rare.c.tuning.wantGapMs + 50), 0, 'not again after wantGapMs')
  t.is(rare.step(t0 + rare.c.tuning.horizonMs - 10), 0, 'nor just before the horizon')
  t.true(rare.step(t0 + rare.c.tuning.horizonMs) >= 1, 'again after the horizon')

  const busy = shortNode(5)
  t.true(busy.step(t0) >= 1)
  t.is(busy.step(t0 + busy.c.tuning.wantGapMs - 10), 0, 'not within wantGapMs')
  t.true(busy.step(t0 + busy.c.tuning.wantGapMs) >= 1, 'again after wantGapMs')
})
