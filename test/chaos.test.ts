/**
 * The real-process fault harness (bench/chaos.ts), short seeds: 3 seeds
 * as real quotad processes, load on each through its socket, a seeded plan
 * of faults, and every answer checked against one exact limiter.
 *
 * What it asserts is what holds on today's code: no overshoot in hard mode
 * under the fault kinds in KINDS, every node started, and the load was
 * answered. The harness finds more than that (bench/README.md, "chaos");
 * the kinds and the columns asserted here grow as the fixes of issue 43
 * land (shortfall and unacked grants after the quiet, exits, utilization).
 *
 * `npm test` runs seed 1 (about a minute of three nodes under faults);
 * `npm run test:long` runs seeds 1-3 (helpers/long.ts), and the sweeps of
 * bench/README.md ("chaos") many more.
 */
import test from 'ava'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sweep } from './helpers/long.js'
import { run, tempDir } from './helpers/proc.js'

const CHAOS = fileURLToPath(new URL('../bench/chaos.js', import.meta.url))

/** The fault kinds the cluster survives with no overshoot today (see the sweep in bench/results/). */
const KINDS = 'kill,stop,term'

interface ChaosJson {
  kinds: string[]
  runs: Array<{ seed: number, plan: string, r: { overshoot: number, maxSurplus: number, answers: number, startFailures: string[], verdicts: Array<{ key: string, allowed: number, overshoot: number }> } }>
}

const SEEDS = sweep([1], [1, 2, 3])

test(`${SEEDS.length === 1 ? 'a short seed' : `${SEEDS.length} short seeds`} of process faults on real processes: no more admitted than one exact limiter would`, async t => {
  t.timeout(420_000)
  const json = join(tempDir(), 'chaos.json')
  const started = Date.now()
  const r = await run(CHAOS, ['--seeds', SEEDS.join(','), '--nodes', '3', '--faults-s', '12', '--quiet-s', '6', '--faults', KINDS, '--no-baseline', '--out', '-', '--json', json], { timeoutMs: 400_000 })
  t.is(r.code, 0, `exit ${r.code} after ${Date.now() - started} ms\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`)
  const out = JSON.parse(readFileSync(json, 'utf8')) as ChaosJson
  t.deepEqual(out.kinds, KINDS.split(','))
  t.deepEqual(out.runs.map(x => x.seed), SEEDS)
  for (const x of out.runs) {
    t.deepEqual(x.r.startFailures, [], `seed ${x.seed}`)
    t.true(x.r.answers > 1000, `seed ${x.seed}: the load was answered (${x.r.answers})`)
    // Every key got grants: the checker had something to check.
    for (const v of x.r.verdicts) t.true(v.allowed > 0, `seed ${x.seed}: ${v.key} admitted nothing`)
    t.is(x.r.overshoot, 0, `seed ${x.seed} (${x.plan}): ${JSON.stringify(x.r.verdicts.filter(v => v.overshoot > 0))}`)
    // Nor does any seed count more tokens in the cluster than the limit after the quiet (none created).
    t.true(x.r.maxSurplus <= 1, `seed ${x.seed} (${x.plan}): a surplus of ${x.r.maxSurplus}`)
  }
})
