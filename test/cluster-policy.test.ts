/**
 * Soft-mode failure policies, tightening, and handoff, on the pure state
 * machine over the virtual network.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { ext } from '../src/cluster/key-ext.js'
import type { FailurePolicy } from '../src/config/types.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

function softCluster (onPartition: FailurePolicy) {
  return new VirtualCluster({
    nodes: ['a', 'b', 'c'],
    rules: [rule({ name: 'mail', match: 'mail', limit: 30, perMs: 60_000, mode: 'soft', onPartition, maxDebt: 5 })],
    limits: limits(),
    seed: 1,
    startMs: T0
  })
}

/**
 * Let the cluster form (every node holds its lease), then cut a off. It
 * hears no one for longer than the alive timeout (1 s) but not yet for the
 * lease (3 s at the default gossip interval): isolated, not fenced.
 */
function isolateA (vc: VirtualCluster): void {
  vc.runUntil(Math.max(vc.now, T0 + 500), 10)
  vc.partition('a', 'b')
  vc.partition('a', 'c')
  vc.runUntil(vc.now + 1500, 10)
}

/** Run until a's lease has lapsed (no seed echoes it across the cut). */
function fenceA (vc: VirtualCluster): void {
  vc.runUntil(vc.now + (vc.cores.get('a')?.tuning.leaseMs ?? 3000), 10)
}

function spend (vc: VirtualCluster, node: string, n: number): number {
  let ok = 0
  for (let i = 0; i < n; i++) if (vc.cores.get(node)?.acquire('mail', 1, vc.now).allowed === true) ok++
  return ok
}

test('soft local-share: a cut-off node spends its share, then overdraws up to maxDebt, and repays after healing', t => {
  const vc = softCluster('local-share')
  vc.runUntil(T0 + 500, 10)
  isolateA(vc)
  t.true(vc.cores.get('a')?.isolated(vc.now))
  t.false(vc.cores.get('a')?.fenced(vc.now))
  t.is(spend(vc, 'a', 20), 10 + 5) // share 10, debt 5
  const ks = vc.cores.get('a')?.limiter.existing('mail')
  t.is(ks === undefined ? -1 : ext(ks).overdraft, 5)
  vc.heal()
  vc.runUntil(T0 + 60_000 + 2000, 10) // next window: a's 10 come back, 5 go to the debt
  t.is(ks === undefined ? -1 : ext(ks).debt, 0)
})

test('soft fail-closed denies everything while cut off; fail-open admits everything and records the overdraft', t => {
  const closed = softCluster('fail-closed')
  isolateA(closed)
  t.is(spend(closed, 'a', 5), 0)
  t.is(spend(closed, 'b', 5), 5, 'the connected side is unaffected')
  const open = softCluster('fail-open')
  isolateA(open)
  t.is(spend(open, 'a', 50), 50)
  const ks = open.cores.get('a')?.limiter.existing('mail')
  t.is(ks === undefined ? -1 : ext(ks).overdraft, 40)
})

test('soft while fenced: onPartition still applies, and everything admitted counts as overdraft, held tokens included', t => {
  const open = softCluster('fail-open')
  isolateA(open)
  fenceA(open)
  t.true(open.cores.get('a')?.fenced(open.now))
  t.is(spend(open, 'a', 12), 12)
  const ks = open.cores.get('a')?.limiter.existing('mail')
  // 10 from its share, 2 beyond: all 12 may be spent twice once its tokens can be reclaimed.
  t.is(ks === undefined ? -1 : ext(ks).overdraft, 12)
  const closed = softCluster('fail-closed')
  isolateA(closed)
  fenceA(closed)
  t.is(spend(closed, 'a', 3), 0)
})

test('hard mode: a cut-off node spends only what it holds while its lease lasts, and nothing once fenced', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'mail', match: 'mail', limit: 30, perMs: 60_000 })], limits: limits(), seed: 1, startMs: T0 })
  isolateA(vc)
  t.is(spend(vc, 'a', 6), 6)
  fenceA(vc)
  const a = vc.cores.get('a')
  t.true(a?.fenced(vc.now))
  t.is(spend(vc, 'a', 4), 0, 'it holds 4, and spends none of them')
  t.is(a?.limiter.existing('mail')?.bucket.held, 4)
  t.is(spend(vc, 'b', 3), 3, 'the side with a quorum is unaffected')
  vc.heal()
  vc.runUntil(vc.now + 1000, 10)
  t.false(a?.fenced(vc.now))
  t.is(spend(vc, 'a', 4), 4, 'an echo after the heal lifts the fence')
})

test('a seed\'s first start holds a start lease: cut off from the first moment, it spends its share at once and nothing after leaseMs; restarted, it waits for an echo', t => {
  const day = [rule({ name: 'day', match: 'day', limit: 90, perMs: 86_400_000 })]
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: day, limits: limits(), seed: 11, startMs: T0 })
  const a = vc.cores.get('a')
  if (a === undefined) return t.fail()
  const leaseMs = a.tuning.leaseMs
  for (const x of ['b', 'c']) { vc.partition('a', x); vc.partition(x, 'a') }
  vc.runUntil(T0 + 20, 10)
  // No echo can have come (every link is cut): the start lease alone lets it spend its own share.
  t.false(a.fenced(vc.now))
  let admitted = 0
  for (let i = 0; i < 40; i++) if (a.acquire('day', 1, vc.now).allowed) admitted++
  t.is(admitted, 30)
  vc.runUntil(T0 + leaseMs + 50, 10)
  t.true(a.fenced(vc.now), 'the start lease lapses leaseMs after the start')
  // A restart carries the stopped incarnation's books: no start lease, fenced until a quorum echoes it.
  vc.heal()
  vc.runUntil(vc.now + 1000, 10)
  vc.stop('a')
  vc.runUntil(vc.now + 3000, 10)
  for (const x of ['b', 'c']) { vc.partition('a', x); vc.partition(x, 'a') }
  vc.start('a')
  vc.runUntil(vc.now + 20, 10)
  const again = vc.cores.get('a')
  t.true(again !== undefined && again !== a && again.carries.length > 0)
  t.true(again?.fenced(vc.now))
  t.is(vc.audit.account('day').error, 0)
})

test('leases off: hard mode ignores isolation, a cut-off node spends what it holds however long (the behaviour before leases)', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'mail', match: 'mail', limit: 30, perMs: 60_000 })], limits: limits(), seed: 1, startMs: T0, tuning: { leases: false } })
  isolateA(vc)
  fenceA(vc)
  t.false(vc.cores.get('a')?.fenced(vc.now))
  t.is(spend(vc, 'a', 20), 10)
})

test('pace: true: near exhaustion the last tokens are paced over the rest of the window', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'api', match: 'api', limit: 300, perMs: 10_000, pace: true })], limits: limits(), seed: 3, startMs: T0 })
  const admittedAt: number[] = []
  let tightSeen = false
  vc.runUntil(T0 + 9_990, 10, now => {
    const core = vc.cores.get('a')
    if (core === undefined) return
    for (let i = 0; i < 2; i++) if (core.acquire('api', 1, now).allowed) admittedAt.push(now - T0) // 200/s demand vs 300 per 10 s
    const ks = core.limiter.existing('api')
    if (ks !== undefined && ext(ks).tight) tightSeen = true
  })
  t.true(tightSeen)
  t.true(admittedAt.length <= 300)
  t.true(admittedAt.length >= 270, `admitted ${admittedAt.length}`)
  // Without pacing all 300 would be gone in ~1.5 s; with it, some are left for the end of the window.
  t.true(admittedAt.some(ms => ms > 7000), `last admission at ${admittedAt[admittedAt.length - 1]} ms`)
})

test('by default (no pace) a node with all the demand gets the whole limit of a day window: allowed while quota remains', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'day', match: 'day', limit: 30, perMs: 86_400_000 })], limits: limits(), seed: 4, startMs: T0 })
  let admitted = 0
  vc.runUntil(T0 + 5000, 20, now => { if (vc.cores.get('a')?.acquire('day', 1, now).allowed === true) admitted++ })
  t.is(admitted, 30)
})

test('handoff: a stopping node grants its held tokens to live peers, none created', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'day', match: 'day', limit: 90, perMs: 86_400_000 })], limits: limits(), seed: 5, startMs: T0 })
  vc.runUntil(T0 + 1000, 10)
  const a = vc.cores.get('a')
  if (a === undefined) return t.fail()
  vc.stop('a')
  vc.runUntil(T0 + 3000, 10)
  t.is(vc.nodes.get('a')?.state, 'stopped')
  t.is(a.limiter.existing('day')?.bucket.held, 0)
  t.is(vc.held('day'), 90)
  t.deepEqual(a.snapshot?.keys.map(k => [k.key, k.held, k.tokens]), [['day', 0, 0]])
})

test('handoff: a gossip that overtakes the pushed grant (a slow stream) does not get the grant refused', t => {
  // Direct messages take 300 ms more than pubsub: a's scheduled gossips after the push arrive first and say
  // "held 0, 30 in transit". The receivers judge the push against that whole custody (peers.ts `said`);
  // judged against held alone they refused it (seen on a loaded CI machine), and a kept its tokens.
  const network = { minLatencyMs: 1, maxLatencyMs: 3, loss: 0, duplicate: 0, directExtraMs: 300 }
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'day', match: 'day', limit: 90, perMs: 86_400_000 })], limits: limits(), seed: 5, startMs: T0, network })
  vc.runUntil(T0 + 2000, 10)
  const a = vc.cores.get('a')
  if (a === undefined) return t.fail()
  vc.stop('a')
  vc.runUntil(T0 + 6000, 10)
  t.is(vc.nodes.get('a')?.state, 'stopped')
  const refused = ['b', 'c'].map(n => vc.cores.get(n)?.counters.grantsRefused)
  t.deepEqual(refused, [0, 0], `refusals: ${['b', 'c'].map(n => vc.cores.get(n)?.lastRefusal).join('; ')}`)
  t.is(a.counters.handedOff, 30)
  t.is(vc.held('day'), 90)
  t.is(vc.audit.account('day').error, 0)
})

test('a stopping node that is fenced hands off nothing: its tokens stay in its snapshot, none created or lost', t => {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'day', match: 'day', limit: 90, perMs: 86_400_000 })], limits: limits(), seed: 5, startMs: T0 })
  isolateA(vc)
  fenceA(vc)
  const a = vc.cores.get('a')
  if (a === undefined) return t.fail()
  vc.stop('a')
  vc.runUntil(vc.now + 3000, 10)
  t.is(vc.nodes.get('a')?.state, 'stopped')
  t.is(a.counters.handoffsFenced, 1)
  t.is(a.counters.handedOff, 0)
  t.deepEqual(a.snapshot?.keys.map(k => [k.key, k.held]), [['day', 30]])
  t.is(vc.audit.account('day').error, 0)
})

test('a reload that changes a rule moves the cluster\'s tokens by exactly the change in stock', t => {
  const day = (limit: number) => [rule({ name: 'day', match: 'day', limit, perMs: 86_400_000 })]
  for (const next of [200, 91, 60, 20]) {
    const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: day(90), limits: limits(), seed: 9, startMs: T0 })
    let admitted = 0
    vc.runUntil(T0 + 3000, 10, now => { if (vc.cores.get('a')?.acquire('day', 1, now).allowed === true) admitted++ })
    const before = admitted
    t.true(before > 70, `tokens moved to a: ${before}`)
    for (const n of ['a', 'b', 'c']) vc.reload(n, day(next))
    vc.runUntil(T0 + 6000, 10, now => {
      for (const n of ['a', 'b', 'c']) if (vc.cores.get(n)?.acquire('day', 1, now).allowed === true) admitted++
    })
    // The exact limiter, reloaded the same way, admits max(before, next) in this window.
    t.true(admitted <= Math.max(before, next), `reload to ${next}: ${before} before, ${admitted} in all`)
    if (next === 200) t.true(admitted >= next * 0.9, `reload to ${next}: the added tokens are usable (${admitted})`)
  }
})
