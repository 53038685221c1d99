/**
 * A node whose clock is far off (2.5 periods, 5x maxClockSkewMs and more)
 * for the whole run: its windows open and close at other real times than the
 * cluster's, so its spent tokens come back early in true time. On real
 * processes a node 10 s off admitted 600 in a real 20 s window of a 300 per
 * 20 s rule. Today it fences itself once it hears a quorum of voters
 * disagree (fence.ts `judgeSkew`); with the judgement taken out, the
 * scenario overshoots.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function runs (sabotage?: (vc: VirtualCluster) => void, scenario = 'skewed-node'): { failed: number, failures: string[], admitted: number } {
  let failed = 0
  let admitted = 0
  const failures: string[] = []
  for (let seed = 1; seed <= 30; seed++) {
    const r = runSim({ ...propertySpec({ scenario, mode: 'hard', seed }), ...(sabotage === undefined ? {} : { sabotage }) })
    admitted += r.cluster.admitted
    if (!r.ok) { failed++; failures.push(`${seed}: ${r.failures[0]}`) }
  }
  return { failed, failures, admitted }
}

test('a node with its clock 2.5 periods off: no overshoot by true time; without the skew judgement, overshoot', t => {
  const today = runs()
  t.deepEqual(today.failures, [])
  t.true(today.admitted > 30 * 20, `the others still admit (${today.admitted})`)
  const blind = runs(vc => {
    const start = vc.start.bind(vc)
    vc.start = (name, rules) => {
      start(name, rules)
      const core = vc.cores.get(name) as ClusterCore
      core.fence.judgeSkew = () => {}
    }
    for (const core of vc.cores.values()) core.fence.judgeSkew = () => {}
  })
  t.true(blind.failed > 0, 'the scenario catches a skewed node judged by its own calendar')
  t.true(blind.failures.some(f => f.includes('overshoot')), blind.failures.join('\n'))
})

// skew-procs under a busy core: one voter's echoes never came and the one that echoed disagreed, so the voters
// that leased the node and the voters that might agree with it were two sets, and it spent 10 s ahead. Before
// the fix, 6 of seeds 1-12 failed (spent past the first two leases; seeds 10 and 12 overshot).
test('a skewed node that one voter never hears still fences itself: a disagreeing voter lends no lease', t => {
  const r = runs(undefined, 'skewed-node-unheard')
  t.deepEqual(r.failures, [])
  const blind = runs(vc => {
    const start = vc.start.bind(vc)
    const blinded = (core: ClusterCore): void => { const ex = core.fence.lease.exclude.bind(core.fence.lease); core.fence.lease.exclude = () => ex(new Set(), false) }
    vc.start = (name, rules) => { start(name, rules); blinded(vc.cores.get(name) as ClusterCore) }
    for (const core of vc.cores.values()) blinded(core)
  }, 'skewed-node-unheard')
  t.true(blind.failures.length > 0, 'with disagreeing voters\' echoes counted, the scenario fails')
})

// skew-procs in CI: judged skewed, then it admitted 18 of 50. A starved process hears its voters late, in bursts:
// past aliveTimeoutMs its judgement forgot them while their echoes still leased it, and after a gap their first
// gossip extended the lease before the next tick judged the reading. Before the fix, 9 of seeds 1-10 spent.
test('a skewed node that hears its voters in bursts stays fenced through each gap and at its end', t => {
  const r = runs(undefined, 'skewed-node-deaf')
  t.deepEqual(r.failures, [])
  // Judged at its ticks only (as before the fix's second half): the first gossip after a gap leases it unjudged.
  const tickOnly = runs(vc => {
    const start = vc.start.bind(vc)
    const blinded = (core: ClusterCore): void => {
      const judge = core.judgeSkew.bind(core)
      core.judgeSkew = nowMs => { if ((core as unknown as { lastTick: number }).lastTick === nowMs) judge(nowMs) }
    }
    vc.start = (name, rules) => { start(name, rules); blinded(vc.cores.get(name) as ClusterCore) }
    for (const core of vc.cores.values()) blinded(core)
  }, 'skewed-node-deaf')
  t.true(tickOnly.failures.some(f => f.includes('must fence itself')), tickOnly.failures.join('\n'))
})
