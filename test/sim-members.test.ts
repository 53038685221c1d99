/**
 * Member-heavy clusters in the simulator (SimSpec.seedNodes, `quotad
 * simulate --seed-nodes K`): only the first K starting nodes are seeds, the
 * rest are members listed from the start, holding nothing of their own.
 * Every check still holds (oracle, conservation, positions, leases, the
 * shortfall check where the scenario asks), members are served, and the
 * baselines do not depend on K (the load is the same; the static split is
 * over every starting node, seed or member: baselines.ts).
 */
import test from 'ava'
import { propertyRule } from '../src/sim/property.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function spec (name: string, seed: number, seedNodes: number | undefined, mode: 'hard' | 'soft' = 'hard'): SimSpec {
  const sc = scenario(name)
  const small = sc.keys > 1 ? { ...sc, keys: 5 } : sc
  return {
    scenario: small,
    nodes: 6,
    ...(seedNodes === undefined ? {} : { seedNodes }),
    seed,
    mode,
    rule: propertyRule(seed, small.keys > 1),
    durationMs: 3000,
    gossipIntervalMs: 100
  }
}

const SCENARIOS = ['zipf', 'moving-hot', 'churn', 'crash-restart', 'member-crash-forever', 'partition-minority', 'partition-majority', 'stops', 'reload-lower-restart', 'keys100']

for (const name of SCENARIOS) {
  test(`${name}: 2 seeds and 4 members, hard mode, passes every check with no overshoot`, t => {
    for (const seed of [1, 2]) {
      const r = runSim(spec(name, seed, 2))
      t.true(r.ok, `seed ${seed}: ${r.failures.join('; ')}\n  replay: ${r.replay}`)
      t.is(r.overshoot, 0)
      t.is(r.seedNodes, 2)
      t.true(r.cluster.admitted > 0)
      t.regex(r.replay, /--nodes 6 .*--seed-nodes 2/)
    }
  })
}

test('soft mode: a member-heavy run stays within the reported overdraft', t => {
  for (const name of ['zipf', 'member-crash-forever']) {
    const r = runSim(spec(name, 3, 2, 'soft'))
    t.true(r.ok, `${name}: ${r.failures.join('; ')}`)
  }
})

test('members are listed from the start, hold no share, and are served by the seeds', t => {
  let vc: VirtualCluster | undefined
  const r = runSim({ ...spec('zipf', 4, 1), sabotage: v => { vc = v } })
  t.true(r.ok, r.failures.join('; '))
  const cluster = vc as VirtualCluster
  t.deepEqual(cluster.seeds, ['n1'])
  t.deepEqual(cluster.listed, ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'])
  const members = cluster.listed.slice(1).map(n => cluster.cores.get(n))
  t.true(members.every(c => c !== undefined && !c.reclaim.hasBase), 'every member is up, with no share')
  t.true(members.some(c => (c?.counters.tokensIn ?? 0) > 0), 'some member was given tokens')
})

test('the baselines and the load do not depend on how many nodes are seeds', t => {
  const all = runSim(spec('zipf', 5, undefined))
  const few = runSim(spec('zipf', 5, 2))
  t.is(all.seedNodes, 6)
  t.notRegex(all.replay, /--seed-nodes/)
  t.is(few.demand, all.demand)
  t.is(few.central.admitted, all.central.admitted)
  t.is(few.static.admitted, all.static.admitted)
})

test('seedNodes out of range is refused', t => {
  t.throws(() => runSim(spec('zipf', 1, 0)), { message: /seedNodes must be a whole number from 1 to nodes \(6\), got 0/ })
  t.throws(() => runSim(spec('zipf', 1, 7)), { message: /got 7/ })
})
