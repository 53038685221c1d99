/**
 * The simulator's property test, hard mode: 200 seeds x every scenario, each
 * seed with its own algorithm, cluster size and key shape (src/sim/property.ts).
 * Any overshoot over the exact limiter, or any token created or lost, fails,
 * and the message carries the command that replays the run.
 */
import test from 'ava'
import { checkMode } from '../src/sim/property.js'

const SEEDS = 200

test(`hard mode: ${SEEDS} seeds x every scenario, no overshoot, tokens conserved`, t => {
  const { runs, admitted, bad } = checkMode('hard', SEEDS)
  t.deepEqual(bad, [])
  t.true(runs >= SEEDS * 11)
  // The runs did something: most requests were decided, and many admitted.
  t.true(admitted > runs * 10, `only ${admitted} admissions over ${runs} runs`)
})
