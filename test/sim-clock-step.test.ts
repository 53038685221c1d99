/**
 * One node's wall clock stepped back (chaos 3+2 seed 20): its calendar used
 * to follow the wall clock back at 90% speed until the fence caught it, up to
 * maxClockSkewMs behind the others. Its windows then ended late, and the tail
 * of a window whose limit was just lowered was spent in the next true window
 * (real processes: 206 of 200). Now a calendar does not follow a wall clock
 * that a quorum's wall clocks disagree with (ClusterCore.observeWall), and
 * the oracle of clock-step-back-lower counts windows of true time.
 *
 * A calendar held behind the others (it followed its wall clock back while
 * it could not hear a quorum, or it started 150 ms behind, within
 * maxClockSkewMs) ended its windows late for good: it could catch up only
 * at 500 ppm. It now jumps to the calendars a quorum surely keeps
 * (clock-behind-lower).
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function run (seed: number, sabotage?: (vc: VirtualCluster) => void, scenario = 'clock-step-back-lower'): { failures: string[] } {
  const spec: SimSpec = { ...propertySpec({ scenario, mode: 'hard', seed }), ...(sabotage === undefined ? {} : { sabotage }) }
  return runSim(spec)
}

/** Apply `blind` to every core, and to each started later. */
function everyCore (vc: VirtualCluster, blind: (core: ClusterCore) => void): void {
  const start = vc.start.bind(vc)
  vc.start = (name, rules) => { start(name, rules); blind(vc.cores.get(name) as ClusterCore) }
  for (const core of vc.cores.values()) blind(core)
}

/** Every core's calendar follows its own wall clock alone, as before the fix. */
function wallOnly (vc: VirtualCluster): void {
  everyCore(vc, core => { core.observeWall = (wallMs, monoMs) => core.calendar.sync(wallMs, monoMs) })
}

/** Every core's calendar holds against a quorum's wall clocks but never jumps forward to the quorum's calendars. */
function noCatchUp (vc: VirtualCluster): void {
  everyCore(vc, core => {
    const inner = core as unknown as { voterOffsets: (m: number) => unknown, followsWall: (w: number, m: number, o: unknown) => boolean }
    core.observeWall = (wallMs, monoMs) => core.calendar.sync(wallMs, monoMs, inner.followsWall(wallMs, monoMs, inner.voterOffsets(monoMs)))
  })
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

// Seeds that spent a lowered window's late tail in the next true window with a calendar held 150 ms behind (2 of 30).
for (const seed of [12, 24]) {
  test(`clock-behind-lower hard seed ${seed}: a calendar behind a quorum's catches up at once`, t => {
    t.deepEqual(run(seed, undefined, 'clock-behind-lower').failures, [])
  })
}

test('the scenario catches a calendar that stays behind the quorum\'s', t => {
  const failures = [12, 24].flatMap(seed => run(seed, noCatchUp, 'clock-behind-lower').failures)
  t.true(failures.some(f => f.includes('overshoot')), failures.join('; '))
})
