/**
 * How a short node plans and whom it asks (ClusterView.scarcity and
 * chooseDonors), on the simulator's virtual cluster with the daemon's state
 * machine. At 200 nodes every short node saw the same, gossip-old view: with
 * one order for all, they asked the same few donors and most wants were
 * answered `none`; and each asked for twice its need even when the cluster
 * had less than everyone's need, so the first to ask hoarded.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import type { KeyExt } from '../src/cluster/key-ext.js'
import { CLUSTER_VERSION, type Gossip } from '../src/cluster/messages.js'
import type { Peer } from '../src/cluster/peers.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const NODES = Array.from({ length: 12 }, (_, i) => `n${String(i).padStart(2, '0')}`)

function formed (): { vc: VirtualCluster, core: (n: string) => ClusterCore } {
  const vc = new VirtualCluster({ nodes: NODES, rules: [rule({ name: 'api', limit: 1200, perMs: 1000 })], limits: limits(), seed: 5, startMs: T0 })
  vc.runUntil(T0 + 4000)
  const core = (n: string): ClusterCore => {
    const c = vc.cores.get(n)
    if (c === undefined) throw new Error(`no ${n}`)
    return c
  }
  return { vc, core }
}

test('scarcity: 1 while the cluster holds what every node expects to need; else what it holds over that need', t => {
  const { vc, core } = formed()
  const c = core('n00')
  const ks = c.limiter.keyState('api', 1, vc.now)
  const remaining = c.view.clusterRemaining(ks, vc.now)
  t.true(remaining > 1000, `the stock is nearly all held: ${remaining}`)
  // No peer has gossiped a rate: this node's own rate is all the need there is.
  t.is(c.view.scarcity(ks, vc.now, 0), 1)
  t.is(c.view.scarcity(ks, vc.now, remaining / 2), 1, 'half of what is held, even over the whole horizon: plenty')
  const s = c.view.scarcity(ks, vc.now, 1e6)
  t.true(s > 0 && s < 0.01, `a need far above what is held: ${s}`)
})

test('short nodes with the same view do not all ask the same donor first', t => {
  const { vc, core } = formed()
  const first = new Map<string, number>()
  for (const n of NODES) {
    const c = core(n)
    const ks = c.limiter.keyState('api', 1, vc.now)
    // Every peer still at its 100-token share and idle: equal surpluses, one donor enough for 1 token.
    const donors = c.view.chooseDonors(ks, vc.now, 1, 32)
    t.is(donors.length, 1)
    t.true(donors[0][1] >= 99, `a donor's surplus as this node sees it: ${donors[0][1]}`)
    first.set(donors[0][0].name, (first.get(donors[0][0].name) ?? 0) + 1)
  }
  t.log(`first donor asked, by how many of the ${NODES.length} askers: ${JSON.stringify(Object.fromEntries(first))}`)
  t.true(first.size >= 4, `askers spread over ${first.size} donors`)
  t.true(Math.max(...first.values()) <= NODES.length / 2, 'no donor is everyone\'s first choice')
})

test('a peer that comes to hold a token after the last walk is a donor at once, from its gossip or a push to it', t => {
  const { vc, core } = formed()
  const c = core('n00')
  const ks = c.limiter.keyState('api', 1, vc.now)
  const x = ks.ext as KeyExt
  // Every peer believed empty, then a fresh walk: no donor candidate is left.
  for (const n of NODES.slice(1)) c.view.believeHeld(n, ks, -1e6, vc.now)
  x.peersHeldAt = -Infinity
  c.view.clusterRemaining(ks, vc.now)
  const walked = x.peersHeldAt
  t.deepEqual(c.view.chooseDonors(ks, vc.now, 1, 32), [])
  // A push to n05 makes it hold 50 as this node believes.
  c.view.believeHeld('n05', ks, 50, vc.now)
  // n07 gossips a line: it holds 30 now.
  const p = c.peers.get('n07') as Peer
  const g: Gossip = {
    v: CLUSTER_VERSION, t: 'gossip', node: 'n07', epoch: p.epoch, inc: p.inc, seq: p.seq + 1, now: vc.now, pending: [], carries: [],
    cfg: c.clusterHash, rules: p.rules, keys: [['api', 30, 0, 0, 0, 0, 0, 0]], acks: []
  }
  t.not(c.peers.observe(g, 'n00', c.epoch, vc.mono('n00'), vc.now), null)
  const donors = c.view.chooseDonors(ks, vc.now, 60, 32)
  t.is(x.peersHeldAt, walked, 'no new walk over the peers')
  t.deepEqual(donors.map(d => d[0].name).sort(), ['n05', 'n07'])
})

test('the cluster-wide sums kept current between walks equal a fresh walk, under load with wants, grants and nones', t => {
  const { vc, core } = formed()
  // 1,500 requests a second against 1,200, most at three nodes: donors run dry, nones and grants both happen.
  const hot = ['n01', 'n02', 'n03']
  let checked = 0
  let asked = 0
  for (let i = 0; i < 3000; i++) {
    const node = i % 5 === 0 ? NODES[(i / 5) % NODES.length] : hot[i % 3]
    vc.runUntil(T0 + 4000 + i * 2 / 3)
    vc.acquire(node, 'api', 1, () => {})
    if (i % 150 !== 0) continue
    for (const n of NODES) {
      const c = core(n)
      const ks = c.limiter.existing('api')
      if (ks === undefined) continue
      const x = ks.ext as KeyExt
      const kept = c.view.clusterRemaining(ks, vc.mono(n))
      const keptRate = x.peersRate
      x.peersHeldAt = -Infinity
      const walked = c.view.clusterRemaining(ks, vc.mono(n))
      t.true(Math.abs(kept - walked) < 1e-6, `${n} at ${i}: kept ${kept}, walked ${walked}`)
      t.true(Math.abs(keptRate - x.peersRate) < 1e-6, `${n} at ${i}: rates kept ${keptRate}, walked ${x.peersRate}`)
      checked++
    }
  }
  for (const n of NODES) asked += core(n).counters.wantsSent
  t.true(checked >= 200 && asked > 50, `${checked} checks, ${asked} wants sent`)
})

test('a peer whose wants come to nothing twice in a row is not asked until its backoff ends; the next useful answer clears it', t => {
  const { vc, core } = formed()
  const c = core('n00')
  const ks = c.limiter.keyState('api', 1, vc.now)
  // The core's own clock (monotonic), as the daemon and the simulator pass it; the cluster runs on between looks,
  // idle (nobody is short, so no want is sent that could clear the backoff by itself).
  const mono = (): number => vc.mono('n00')
  const asked = (): Set<string> => new Set(c.view.chooseDonors(ks, mono(), 1200, 32).map(([p]) => p.name))
  const wait = c.tuning.wantTimeoutMs
  t.true(asked().has('n01'), 'n01 is a donor to begin with')
  // One want lost: nothing changes (a single lost message costs nothing).
  c.transfers.wantOutcome('n01', false, mono())
  t.true(asked().has('n01'))
  // A second in a row: not asked for one want timeout.
  const at = mono()
  c.transfers.wantOutcome('n01', false, at)
  t.false(asked().has('n01'))
  t.true(asked().size > 0, 'the others are asked meanwhile')
  vc.runUntil(vc.now + wait / 2)
  t.false(asked().has('n01'))
  vc.runUntil(vc.now + wait / 2 + 1)
  t.true(asked().has('n01'), 'asked again once the backoff ends')
  // Each further spoiled want doubles it, up to 16 want timeouts.
  for (let i = 0; i < 10; i++) c.transfers.wantOutcome('n01', false, mono())
  vc.runUntil(vc.now + 15 * wait)
  t.false(asked().has('n01'))
  vc.runUntil(vc.now + wait + 1)
  t.true(asked().has('n01'), 'never more than 16 want timeouts')
  // An answer it can use clears it at once.
  c.transfers.wantOutcome('n01', false, mono())
  c.transfers.wantOutcome('n01', false, mono())
  t.false(asked().has('n01'))
  c.transfers.wantOutcome('n01', true, mono())
  t.true(asked().has('n01'))
})
