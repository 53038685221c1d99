/**
 * The simulator's property test, split over several files so that no file
 * runs near ava's timeout: each file takes a half of the scenarios in one
 * mode, with one ava test per scenario (src/sim/property.ts picks, per seed,
 * the algorithm, cluster size and key shape). Hard mode: any overshoot over
 * the exact limiter fails. Soft mode: overshoot must be covered by the
 * overdraft the nodes report. Both: any token created or lost fails, and the
 * failure carries the command that replays the run.
 */
import test from 'ava'
import type { Mode } from '../../src/config/types.js'
import { checkMode, GOSSIP_MS, RUN_MS } from '../../src/sim/property.js'
import { SCENARIOS } from '../../src/sim/scenario.js'

export const SEEDS = 200

export function propertyTests (mode: Mode, half: 0 | 1): void {
  const names = SCENARIOS.map(s => s.name)
  const mid = Math.ceil(names.length / 2)
  for (const name of half === 0 ? names.slice(0, mid) : names.slice(mid)) {
    // Scenarios that need longer runs (a cut of several reclaim periods) get fewer seeds: about the same virtual time per test.
    const long = (SCENARIOS.find(s => s.name === name)?.minGossips ?? 0) * GOSSIP_MS
    const seeds = Math.round(SEEDS * RUN_MS / Math.max(RUN_MS, long))
    test(`${mode} mode, ${name}: ${seeds} seeds, ${mode === 'hard' ? 'no overshoot' : 'overshoot within the reported debt'}, tokens conserved`, t => {
      const { runs, admitted, bad } = checkMode(mode, seeds, [name])
      t.deepEqual(bad, [])
      t.is(runs, seeds)
      // The runs did something: many requests were admitted.
      t.true(admitted > runs * 10, `only ${admitted} admissions over ${runs} runs`)
    })
  }
}
