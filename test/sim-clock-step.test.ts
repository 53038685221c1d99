/**
 * One node's wall clock stepped back (chaos 3+2 seed 20): its calendar used
 * to follow the wall clock back at 90% speed until the fence caught it, up to
 * maxClockSkewMs behind the others. Its windows then ended late, and the tail
 * of a window whose limit was just lowered was spent in the next true window
 * (real processes: 206 of 200). Now a calendar does not follow a wall clock
 * that a quorum's wall clocks disagree with (ClusterCore.observeWall), and
 * the oracle of clock-step-back-lower counts windows of true time.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function run (seed: number, sabotage?: (vc: VirtualCluster) => void): { failures: string[] } {
  const spec: SimSpec = { ...propertySpec({ scenario: 'clock-step-back-lower', mode: 'hard', seed }), ...(sabotage === undefined ? {} : { sabotage }) }
  return runSim(spec)
}

/** Every core's calendar follows its own wall clock alone, as before the fix. */
function wallOnly (vc: VirtualCluster): void {
  const blind = (core: ClusterCore): void => { core.observeWall = (wallMs, monoMs) => core.calendar.sync(wallMs, monoMs) }
  const start = vc.start.bind(vc)
  vc.start = (name, rules) => { start(name, rules); blind(vc.cores.get(name) as ClusterCore) }
  for (const core of vc.cores.values()) blind(core)
}

test('clock-step-back-lower hard seed 12: a stepped-back wall clock moves no admission into the next true window', t => {
  t.deepEqual(run(12).failures, [])
})

test('the scenario catches a calendar that follows its own stepped-back wall clock', t => {
  const r = run(12, wallOnly)
  t.true(r.failures.some(f => f.includes('overshoot')), r.failures.join('; '))
})

test('a calendar holds while its own wall clock is off the others\', and keeps the cluster\'s time', t => {
  let worst = 0
  run(12, vc => {
    const startMs = vc.now
    const poll = (): void => {
      for (const [n, core] of vc.cores) worst = Math.max(worst, Math.abs(core.calendar.at(vc.mono(n)) - vc.now))
      if (vc.now < startMs + 3000) vc.at(vc.now + 50, poll)
    }
    vc.at(vc.now, poll)
  })
  // Without the fix the stepped node's calendar falls maxClockSkewMs (200 ms here) behind before it is fenced.
  t.true(worst < 20, `a calendar strayed ${worst} ms from true time`)
})
