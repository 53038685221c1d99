/**
 * Reclaim of dead accounts without a share (reclaim.ts, cluster-protocol.md,
 * "Reclaim of dead members"), on the simulator's virtual clock: a member killed for good is
 * attested by a quorum of seeds after reclaimMs and every survivor settles
 * what it lent it, so the cluster holds its whole stock again; a member cut
 * off long enough to be settled learns it, drops its books and restarts as
 * a new incarnation (the survivors ignore it meanwhile, so no voter echoes
 * it); and the checks catch a survivor that settles twice. (A member that
 * relays breaks the settlement only in a race, a survivor spending relayed
 * tokens before it burns them, that random runs rarely hit:
 * docs/design/2026-11-reclaim.md and cluster-protocol.md argue it instead.)
 */
import test from 'ava'
import { Positions } from '../src/cluster/positions.js'
import { Reclaim } from '../src/cluster/reclaim.js'
import { booksOf } from '../src/cluster/key-ext.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'
import { load } from './helpers/sim-load.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const STOCK = 60

function cluster (seed: number): VirtualCluster {
  return new VirtualCluster({
    nodes: ['a', 'b', 'c', 'm', 'n'],
    seeds: ['a', 'b', 'c'],
    rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })],
    limits: limits(),
    seed,
    startMs: T0 + 100
  })
}

/** The books of `api` over the live nodes (held, outstanding and deferred: every token a live node has). */
function liveBooks (vc: VirtualCluster): number {
  let n = 0
  for (const core of vc.cores.values()) {
    const ks = core.limiter.existing('api')
    if (ks !== undefined) n += booksOf(ks)
    else if (core.limiter.allocate && vc.seeds.includes(core.node)) n += STOCK / 3
  }
  return n
}

test('a member killed for good: a quorum of seeds attests it, the survivors settle what they lent it, the whole stock is back', t => {
  const vc = cluster(1)
  // m is the busy one: tokens move to it. It is killed while busy (idle, a member gives back what it does not use
  // to its lenders within a few ticks: rebalance.ts).
  load(vc, 3000, { a: 2, m: 80 })
  const m = vc.cores.get('m')
  const had = m?.limiter.existing('api') === undefined ? 0 : booksOf(m.limiter.existing('api') as never)
  t.true(had > 20, `m holds ${had}`)
  t.false(m?.reclaim.hasBase, 'a member holds no share')
  vc.crash('m')
  t.true(Math.abs(liveBooks(vc) - (STOCK - had)) < 1e-6, 'what m had is gone with it')
  const reclaimMs = vc.cores.get('a')?.tuning.reclaimMs ?? 5000
  vc.runUntil(vc.now + reclaimMs + 2000)
  for (const s of ['a', 'b', 'c']) {
    const core = vc.cores.get(s)
    t.true(core?.reclaim.attested.has('m'), `${s} attests m`)
    t.true(core?.reclaim.isSettled('m', 1), `${s} settled m`)
    t.is(core?.peers.get('m'), undefined, `${s} forgot m`)
  }
  t.true(Math.abs(liveBooks(vc) - STOCK) < 1e-6, `the survivors' books are the whole stock again: ${liveBooks(vc)}`)
  const a = vc.audit.account('api')
  t.true(Math.abs(a.error) < 1e-6 && Math.abs(a.stranded) < 1e-6, JSON.stringify(a))
  // And spendable: the next windows admit the whole limit again.
  const windows = load(vc, 3000, { a: 40, b: 40, n: 40 })
  const full = [...windows.values()].filter(v => v >= STOCK - 1).length
  t.true(full >= 1, `a full window after the reclaim: ${JSON.stringify([...windows])}`)
  for (const v of windows.values()) t.true(v <= STOCK, `never over the limit: ${JSON.stringify([...windows])}`)
})

test('a member cut off past reclaimMs is settled; after the heal it drops its books and restarts as a new incarnation', t => {
  const vc = cluster(2)
  const windows = load(vc, 3000, { a: 5, m: 60 })
  vc.cuts.split(['m'], ['a', 'b', 'c', 'n'])
  const reclaimMs = vc.cores.get('a')?.tuning.reclaimMs ?? 5000
  // m keeps asking (it is fenced: hard spending stops) while the others spend what they have and get it back.
  load(vc, reclaimMs + 2000, { a: 20, b: 20, m: 20 }, windows)
  t.true(vc.cores.get('a')?.reclaim.isSettled('m', 1), 'a settled m')
  vc.heal()
  load(vc, 4000, { a: 20, b: 20, m: 20 }, windows)
  const m = vc.cores.get('m')
  t.is(m?.incarnation, 2, 'm restarted as a new incarnation')
  t.is(vc.incarnations.filter(c => c.node === 'm')[0].reclaim.reclaimed, true, 'the old one learned it was reclaimed')
  for (const v of windows.values()) t.true(v <= STOCK, `never over the limit: ${JSON.stringify([...windows])}`)
  const a = vc.audit.account('api')
  t.true(Math.abs(a.error) < 1e-6, JSON.stringify(a))
})

/** The first of `seeds` property seeds of `scenario` whose run fails with `sabotage` (undefined: none failed). */
function firstFailing (scenario: string, seeds: number, sabotage: (vc: VirtualCluster) => void): string[] | undefined {
  for (let seed = 1; seed <= seeds; seed++) {
    const r = runSim({ ...propertySpec({ scenario, mode: 'hard', seed }), sabotage })
    if (!r.ok) return r.failures
  }
  return undefined
}

test('the checks catch a survivor that settles twice', t => {
  // Settling twice: every settlement credits its tokens again.
  const twice = firstFailing('member-crash-forever', 20, () => {})
  t.is(twice, undefined, 'honest runs pass')
  const orig = Reclaim.prototype.settle
  const forget = Positions.prototype.forgetAccount
  try {
    // Keeps the positions it settled, and settles again.
    Positions.prototype.forgetAccount = () => {}
    Reclaim.prototype.settle = function (this: Reclaim, node: string, inc: number, nowMs: number) {
      orig.call(this, node, inc, nowMs)
      this.settled.delete(node)
      orig.call(this, node, inc, nowMs)
    }
    const f = firstFailing('member-crash-forever', 20, () => {})
    t.truthy(f, 'a double settlement is caught')
  } finally {
    Reclaim.prototype.settle = orig
    Positions.prototype.forgetAccount = forget
  }

})


test('a member cut off far longer than the attestations are gossiped still learns it was settled when it speaks again', t => {
  const vc = cluster(3)
  load(vc, 3000, { a: 5, m: 60 })
  vc.cuts.split(['m'], ['a', 'b', 'c', 'n'])
  const a = vc.cores.get('a')
  const reclaimMs = a?.tuning.reclaimMs ?? 5000
  vc.runUntil(vc.now + 12 * reclaimMs)
  t.true(a?.reclaim.isSettled('m', 1), 'a settled m')
  t.deepEqual(a?.reclaim.list(vc.mono('a'))?.filter(([n]) => n === 'm'), [], 'no longer gossiped')
  vc.heal()
  vc.runUntil(vc.now + 3000)
  t.is(vc.cores.get('m')?.incarnation, 2, 'm heard its attestation again, dropped its books and restarted')
})

test('a survivor that settles, then crashes and recovers from its journal, does not settle the same member again', t => {
  const vc = cluster(4)
  const windows = load(vc, 3000, { a: 5, m: 80 })
  vc.crash('m')
  const a = vc.cores.get('a')
  const reclaimMs = a?.tuning.reclaimMs ?? 5000
  load(vc, reclaimMs + 2000, { b: 5 }, windows)
  t.true(vc.cores.get('a')?.reclaim.isSettled('m', 1), 'a settled m')
  // a is killed right after and restarts from its journal, while the seeds still gossip m's attestation.
  vc.crash('a')
  vc.start('a')
  load(vc, 3000, { b: 5 }, windows)
  t.true(Math.abs(liveBooks(vc) - STOCK) < 1e-6, `the live books are the stock, once: ${liveBooks(vc)}`)
  load(vc, 3000, { a: 40, b: 40, c: 40 }, windows)
  for (const v of windows.values()) t.true(v <= STOCK, `never over the limit: ${JSON.stringify([...windows])}`)
})
