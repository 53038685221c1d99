/**
 * A member's overflow (forward-overflow.ts) in the simulator: where members'
 * parts are a token or two a window, an acquire a member cannot cover goes
 * to a seed that holds some, is decided there by the seed's own core, and
 * the cluster admits what a central limiter does; every simulator check
 * holds (overshoot, conservation, leases judged at the seed). Under the
 * limit nothing is denied while tokens remain, and most acquires are still
 * decided at the members. Where answers come too late (slow-streams), a
 * member stops sending them.
 */
import test from 'ava'
import type { RuleConfig } from '../src/config/types.js'
import { runSim, type SimResult, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ForwardCounters } from '../src/cluster/forward-counters.js'

const RULE: RuleConfig = { name: 'api', match: 'api', limit: 200, perMs: 1000, per: '1s', algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', burst: 200, maxDebt: 20 }
const SEEDS = ['n001', 'n002', 'n003']

function spec (name: string, demand: number, overflow: boolean, nodes = 100, seed = 1): SimSpec {
  return { scenario: { ...scenario(name), demand }, nodes, seedNodes: 3, seed, mode: 'hard', rule: RULE, durationMs: 4000, gossipIntervalMs: 250, tuning: { overflow } }
}

/** A run, and the members' and the seeds' forward counters summed. */
function run (s: SimSpec): { r: SimResult, members: ForwardCounters, seeds: ForwardCounters, memberCount: number } {
  let vc: VirtualCluster | null = null
  const r = runSim({ ...s, sabotage: v => { vc = v } })
  const sum = (names: (n: string) => boolean): ForwardCounters => {
    const out: Record<string, number> = {}
    for (const [n, c] of (vc as unknown as VirtualCluster).cores) {
      if (!names(n)) continue
      for (const [k, v] of Object.entries(c.forwarding.counters)) out[k] = (out[k] ?? 0) + v
    }
    return out as unknown as ForwardCounters
  }
  const memberCount = [...(vc as unknown as VirtualCluster).cores.keys()].filter(n => !SEEDS.includes(n)).length
  return { r, members: sum(n => !SEEDS.includes(n)), seeds: sum(n => SEEDS.includes(n)), memberCount }
}

test('over the limit, 97 members with about 2 tokens a window each: what a member cannot cover is decided at a seed, and the cluster admits what a central limiter does', t => {
  const on = run(spec('uniform', 1.2, true))
  const off = run(spec('uniform', 1.2, false))
  for (const x of [on, off]) {
    t.true(x.r.ok, x.r.failures.join('; '))
    t.is(x.r.overshoot, 0)
  }
  t.true(on.members.forwardOverflow > 0, 'members sent acquires to the seeds')
  t.is(on.seeds.forwardOverflow, 0, 'seeds decide their own')
  t.true(on.members.forwardAllowed > 0, 'and some were admitted there')
  t.true(on.seeds.forwardServed >= on.members.forwardAllowed, 'every admission a member heard, a seed decided')
  t.is(off.members.forwarded, 0, 'without overflow, nothing is sent')
  t.true(on.r.cluster.utilization >= 0.95, `with overflow ${on.r.cluster.utilization}`)
  t.true(on.r.cluster.utilization >= on.r.static.utilization, 'never under the static split')
  t.true(off.r.cluster.utilization < on.r.cluster.utilization - 0.1, `without ${off.r.cluster.utilization}, with ${on.r.cluster.utilization}`)
})

test('under the limit nothing is denied while tokens remain, and most acquires are still decided at the members', t => {
  const on = run(spec('uniform', 0.6, true))
  const off = run(spec('uniform', 0.6, false))
  t.true(on.r.ok, on.r.failures.join('; '))
  t.true(on.r.cluster.utilization >= 0.98, `with overflow ${on.r.cluster.utilization} of the demand admitted`)
  t.true(off.r.cluster.utilization < on.r.cluster.utilization - 0.05, `without, members denied what they did not hold: ${off.r.cluster.utilization}`)
  t.true(on.members.forwardOverflow < 0.5 * on.r.demand, `${on.members.forwardOverflow} of ${on.r.demand} acquires sent to a seed`)
})

test('a moving hot spot is followed: the new hot member\'s acquires reach the seeds\' tokens at once', t => {
  const on = run(spec('moving-hot', 1.2, true))
  const off = run(spec('moving-hot', 1.2, false))
  t.true(on.r.ok, on.r.failures.join('; '))
  t.true(on.r.cluster.utilization >= 0.95, `with overflow ${on.r.cluster.utilization}`)
  t.true(off.r.cluster.utilization < on.r.cluster.utilization - 0.1, `without ${off.r.cluster.utilization}`)
})

test('where answers come after the member\'s timeout, a member stops sending them: at most a probe or two each', t => {
  const on = run(spec('slow-streams', 1.2, true))
  t.true(on.r.ok, on.r.failures.join('; '))
  t.is(on.r.overshoot, 0)
  t.true(on.members.forwardFailed > 0, 'answers came too late')
  t.true(on.members.forwardOverflow <= 2 * on.memberCount, `${on.members.forwardOverflow} sent by ${on.memberCount} members`)
})

test('under loss, a partition, crashes, stops and rule changes, with members overflowing: every check holds', t => {
  for (const name of ['lossy', 'partition', 'crash-restart', 'member-crash-forever', 'seed-crash-forever', 'stops', 'reload-lower', 'restart-changed']) {
    const x = run(spec(name, scenario(name).demand, true, 20, 2))
    t.true(x.r.ok, `${name}: ${x.r.failures.join('; ')}`)
    t.is(x.r.overshoot, 0, name)
    t.true(x.members.forwardOverflow > 0, `${name}: members overflowed`)
  }
})
