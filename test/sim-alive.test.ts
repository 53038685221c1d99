/**
 * Nobody stays dead by mistake (issue 43, item 5), on the simulator's
 * virtual clock: a live member is never left fenced for longer than a lease
 * after it can hear a quorum of seeds again, whether the seeds paused
 * (SIGSTOP) or the member was cut off long enough to be settled; a node
 * settled while alive comes back as a new incarnation (the daemon does it
 * in-process: cluster-node.ts `renew`), and admits again. Each run checks
 * that no window admits more than the limit, and the token audit.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'
import { load } from './helpers/sim-load.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const STOCK = 60

function cluster (seed: number): VirtualCluster {
  return new VirtualCluster({
    nodes: ['a', 'b', 'c', 'm', 'n'],
    seeds: ['a', 'b', 'c'],
    listed: ['a', 'b', 'c', 'm', 'n'],
    rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })],
    limits: limits(),
    seed,
    startMs: T0 + 100
  })
}

/** Run with load until both members are unfenced (any incarnation); the virtual ms it took, or Infinity. */
function untilUnfenced (vc: VirtualCluster, ms: number, windows: Map<number, number>): number {
  const from = vc.now
  let at = Infinity
  vc.runUntil(vc.now + ms, 10, () => {
    for (const x of ['m', 'n']) if (vc.acquire(x, 'api', 1)?.allowed === true) count(vc, x, windows)
    if (at === Infinity && ['m', 'n'].every(x => vc.cores.get(x)?.fence.fenced === false)) at = vc.now - from
  })
  return at
}

function count (vc: VirtualCluster, node: string, windows: Map<number, number>): void {
  const w = Math.floor(vc.calendar(node) / 1000)
  windows.set(w, (windows.get(w) ?? 0) + 1)
}

/** Each member admits again: some of 20 acquires a second over 2 s. */
function admits (vc: VirtualCluster, node: string, windows: Map<number, number>): number {
  let n = 0
  vc.runUntil(vc.now + 2000, 50, () => { if (vc.acquire(node, 'api', 1)?.allowed === true) { n++; count(vc, node, windows) } })
  return n
}

for (const seed of [1, 2, 3]) {
  test(`seed ${seed}: two of three seeds paused past reclaimMs attest no live member; the members are unfenced within a lease of hearing them`, t => {
    const vc = cluster(seed)
    const windows = load(vc, 3000, { a: 5, m: 20, n: 20 })
    const { reclaimMs, leaseMs } = (vc.cores.get('a') as NonNullable<ReturnType<typeof vc.cores.get>>).tuning
    const pauseMs = reclaimMs + 4000
    vc.pause('b', pauseMs)
    vc.pause('c', pauseMs)
    load(vc, pauseMs - 10, { a: 5, m: 20, n: 20 }, windows)
    // The members' links to the resumed seeds come back a while after the seeds' own (re-dialled): the seeds hear
    // each other first. On the old code both attested both members at their first tick, settled them, forgot them,
    // and then published no members' copy: the members never learned it and stayed fenced for good.
    vc.cuts.split(['m', 'n'], ['b', 'c'], true)
    load(vc, 10, { a: 5 }, windows)
    load(vc, 1500, { a: 5, m: 20, n: 20 }, windows)
    vc.heal()
    const took = untilUnfenced(vc, 4 * leaseMs, windows)
    t.true(took <= leaseMs, `the members are unfenced ${took} ms after they hear a quorum again (lease ${leaseMs} ms)`)
    for (const x of ['m', 'n']) {
      t.false(vc.cores.get('b')?.reclaim.isSettled(x, 1), `b did not settle ${x}: it was paused, not ${x}`)
      t.true(admits(vc, x, windows) > 0, `${x} admits again`)
    }
    for (const v of windows.values()) t.true(v <= STOCK, `never over the limit: ${JSON.stringify([...windows])}`)
    const a = vc.audit.account('api')
    t.true(Math.abs(a.error) < 1e-6, JSON.stringify(a))
  })

  test(`seed ${seed}: every member cut off past reclaimMs is settled, learns it after the heal, and is back as a new incarnation within a lease`, t => {
    const vc = cluster(seed)
    const windows = load(vc, 3000, { a: 5, m: 20, n: 20 })
    const { reclaimMs, leaseMs } = (vc.cores.get('a') as NonNullable<ReturnType<typeof vc.cores.get>>).tuning
    vc.cuts.split(['m', 'n'], ['a', 'b', 'c'])
    load(vc, reclaimMs + 2000, { a: 5, m: 20, n: 20 }, windows)
    for (const x of ['m', 'n']) t.true(vc.cores.get('a')?.reclaim.isSettled(x, 1), `a settled ${x}`)
    vc.heal()
    // With every member settled no seed had a member alive in its view, so none published the members' copy, the
    // only gossip a member hears: on the old code the members never learned it and stayed fenced for good.
    const took = untilUnfenced(vc, 4 * leaseMs, windows)
    t.true(took <= leaseMs, `the members are unfenced ${took} ms after the heal (lease ${leaseMs} ms)`)
    for (const x of ['m', 'n']) {
      t.is(vc.cores.get(x)?.incarnation, 2, `${x} is a new incarnation`)
      t.true(admits(vc, x, windows) > 0, `${x} admits again`)
    }
    for (const v of windows.values()) t.true(v <= STOCK, `never over the limit: ${JSON.stringify([...windows])}`)
    const a = vc.audit.account('api')
    t.true(Math.abs(a.error) < 1e-6, JSON.stringify(a))
  })
}
