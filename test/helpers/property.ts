/**
 * The simulator's property test, split over several files: each file takes
 * a half of the scenarios in one mode, with one ava test per scenario, run
 * one at a time so that each reports as it ends (see below).
 * src/sim/property.ts picks, per seed, the algorithm, cluster size and key
 * shape. Hard mode: any overshoot over
 * the exact limiter fails. Soft mode: overshoot must be covered by the
 * overdraft the nodes report. Both: any token created or lost fails, and the
 * failure carries the command that replays the run.
 */
import test from 'ava'
import type { Mode } from '../../src/config/types.js'
import { checkMode, GOSSIP_MS, RUN_MS } from '../../src/sim/property.js'
import { SCENARIOS } from '../../src/sim/scenario.js'

/**
 * Seeds per scenario (the longest scenarios get fewer, below, but never fewer
 * than MIN_SEEDS). `npm test` runs 4: every scenario runs on a few seeds, so
 * each keeps running its algorithms, sizes and key shapes, and the four files
 * together cost about 45 s of CPU (75 s at 8, 200 s at 40; issue 44: the
 * whole `npm test` in 4 minutes on an idle 2-core machine).
 * `npm run test:long` runs 200 (QUOTAD_SIM_SEEDS), and the accuracy bench
 * sweeps thousands (bench/README.md, "Seed counts").
 */
export const SEEDS = seedCount(process.env.QUOTAD_SIM_SEEDS, 4)

/** The fewest seeds a scenario runs, however long its runs (unless QUOTAD_SIM_SEEDS asks for fewer still). */
export const MIN_SEEDS = 3

function seedCount (env: string | undefined, fallback: number): number {
  if (env === undefined || env === '') return fallback
  const n = Number(env)
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`QUOTAD_SIM_SEEDS must be a whole number of at least 1, got ${JSON.stringify(env)}`)
  return n
}

export function propertyTests (mode: Mode, half: 0 | 1): void {
  // Not those the sweep leaves out (Scenario.outOfSweep: seeds that still fail), which propertyCases skips too.
  const names = SCENARIOS.filter(s => s.outOfSweep === undefined).map(s => s.name)
  const mid = Math.ceil(names.length / 2)
  for (const name of half === 0 ? names.slice(0, mid) : names.slice(mid)) {
    // Scenarios that need longer runs (a cut of several reclaim periods) get fewer seeds: about the same virtual time per test.
    const long = (SCENARIOS.find(s => s.name === name)?.minGossips ?? 0) * GOSSIP_MS
    const seeds = Math.max(Math.min(SEEDS, MIN_SEEDS), Math.round(SEEDS * RUN_MS / Math.max(RUN_MS, long)))
    // Serial, each after a turn of the event loop: a test is seconds of synchronous work, and ava's timeout counts
    // from the last result its worker reported. Started together, the tests ran back to back without a turn between
    // them, so no result left the worker until the file was done (48 s alone; over 120 s on a busy 2-core machine,
    // which timed the file out). Now each result goes out as its test ends.
    test.serial(`${mode} mode, ${name}: ${seeds} seeds, ${mode === 'hard' ? 'no overshoot' : 'overshoot within the reported debt'}, tokens conserved`, async t => {
      await new Promise(resolve => setImmediate(resolve))
      const { runs, admitted, bad } = checkMode(mode, seeds, [name])
      t.deepEqual(bad, [])
      t.is(runs, seeds)
      // The runs did something: many requests were admitted.
      t.true(admitted > runs * 10, `only ${admitted} admissions over ${runs} runs`)
    })
  }
}
