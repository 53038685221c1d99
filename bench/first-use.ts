/**
 * The first request for a key new at a node (issue 13), in the simulator:
 * the same runs with `firstUseWaitMs` 0 (the old behaviour: denied until a
 * transfer arrives) and at its default (a short wait for the transfer). Glob
 * keys under Zipf load: keys100 (20/s each), keys100-slow (a third of the
 * rate), and keys100-slow on a 5-per-day rule, where nearly every request
 * is a key's first at its node. Utilization is admitted / min(demand, limit)
 * against an exact central limiter on the same arrivals; hard-mode overshoot
 * must stay 0.
 *
 *   npm run build && node dist/bench/first-use.js [--seeds 3] [--nodes 3,10]
 */
import { intFlag, parseCli } from '../src/cli/common.js'
import type { RuleConfig } from '../src/config/types.js'
import { defaultTuning } from '../src/cluster/tuning.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import { machineInfo, printMachine } from './lib/machine.js'

const glob = (limit: number, perMs: number, per: string): RuleConfig => ({
  name: 'g', match: 'k:*', algorithm: 'fixed-window', limit, perMs, per, burst: limit, mode: 'hard', onPartition: 'local-share', maxDebt: 0
})
const CASES: Array<{ scenario: string, rule: RuleConfig }> = [
  { scenario: 'keys100', rule: glob(20, 1000, '1s') },
  { scenario: 'keys100-slow', rule: glob(20, 1000, '1s') },
  { scenario: 'keys100-slow', rule: glob(5, 86_400_000, '1d') }
]

const { values } = parseCli({ args: process.argv.slice(2), options: { seeds: { type: 'string' }, nodes: { type: 'string' } } })
const seeds = intFlag('seeds', values.seeds, 3, 1)
const sizes = (values.nodes ?? '3,10').split(',').map(Number)
printMachine(machineInfo())
const wait = defaultTuning().firstUseWaitMs
console.log(`\n10 virtual s per run, gossip 250 ms, seeds 1..${seeds}; utilization mean (min) over seeds\n`)
console.log('| scenario | rule | N | firstUseWaitMs 0 | firstUseWaitMs ' + wait + ' | overshoot |')
console.log('|---|---|---|---|---|---|')
for (const c of CASES) {
  for (const n of sizes) {
    const cells: string[] = []
    let overshoot = 0
    for (const firstUseWaitMs of [0, wait]) {
      const u: number[] = []
      for (let seed = 1; seed <= seeds; seed++) {
        const r = runSim({ scenario: scenario(c.scenario), nodes: n, seed, mode: 'hard', durationMs: 10_000, gossipIntervalMs: 250, rule: c.rule, tuning: { firstUseWaitMs } })
        u.push(r.cluster.utilization)
        overshoot += r.overshoot
      }
      cells.push(`${(100 * u.reduce((a, b) => a + b, 0) / u.length).toFixed(1)}% (${(100 * Math.min(...u)).toFixed(1)}%)`)
    }
    console.log(`| ${c.scenario} | ${c.rule.limit}/${c.rule.per} | ${n} | ${cells[0]} | ${cells[1]} | ${overshoot} |`)
  }
}
