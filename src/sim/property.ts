/**
 * The property run CI replays: every scenario x both modes x a range of
 * seeds, small clusters and short runs so it stays fast. Each seed also
 * picks the algorithm (all four take turns), the node count (2..6) and
 * whether the key is exact or a glob, so the seeds cover the combinations.
 */
import type { Algorithm, Mode, RuleConfig } from '../config/types.js'
import { ALGORITHMS } from '../config/types.js'
import { runSim, type SimResult, type SimSpec } from './run.js'
import { SCENARIOS, scenario } from './scenario.js'

export interface PropertyCase { scenario: string, mode: Mode, seed: number }

/** A property run's length and gossip interval (a scenario may ask for longer: Scenario.minGossips). */
export const RUN_MS = 3000
export const GOSSIP_MS = 100

export function propertyRule (seed: number, glob: boolean): RuleConfig {
  const algorithm: Algorithm = ALGORITHMS[seed % ALGORITHMS.length]
  const limit = 20 + (seed % 7) * 15
  return {
    name: 'prop', match: glob ? 'prop:*' : 'prop', limit, perMs: 1000, per: '1s', algorithm,
    // A token bucket's burst may exceed its limit (it then refills over more than one period: recovery.ts).
    burst: algorithm === 'token-bucket' ? limit * (1 + (seed % 3)) : limit, mode: 'hard', onPartition: 'local-share', maxDebt: Math.ceil(limit / 10)
  }
}

export function propertySpec (c: PropertyCase): SimSpec {
  const sc = scenario(c.scenario)
  // keys100 scenarios keep 100 keys only in the benchmark; here 5 keep them fast.
  const small = sc.keys > 1 ? { ...sc, keys: 5 } : sc
  const glob = small.keys > 1 || c.seed % 3 === 0
  return {
    scenario: small,
    nodes: 2 + (c.seed % 5),
    seed: c.seed,
    mode: c.mode,
    rule: propertyRule(c.seed, glob),
    durationMs: sc.propertyMs ?? RUN_MS,
    gossipIntervalMs: GOSSIP_MS
  }
}

export function propertyCases (seeds: number, first = 1): PropertyCase[] {
  const out: PropertyCase[] = []
  for (const sc of SCENARIOS) {
    if (sc.outOfSweep !== undefined) continue
    for (const mode of ['hard', 'soft'] as const) {
      for (let s = first; s < first + seeds; s++) out.push({ scenario: sc.name, mode, seed: s })
    }
  }
  return out
}

/** Run every case of one mode (of the given scenarios); returns each failure with its replay command (empty: all passed). */
export function checkMode (mode: Mode, seeds: number, scenarios?: readonly string[]): { runs: number, admitted: number, bad: string[] } {
  const out = { runs: 0, admitted: 0, bad: [] as string[] }
  for (const c of propertyCases(seeds).filter(x => x.mode === mode && (scenarios === undefined || scenarios.includes(x.scenario)))) {
    const r = runCase(c)
    out.runs++
    out.admitted += r.cluster.admitted
    if (!r.ok) out.bad.push(`${c.scenario} seed ${c.seed}: ${r.failures.join('; ')}\n  replay: ${r.replay}`)
  }
  return out
}

export function runCase (c: PropertyCase): SimResult {
  const r = runSim(propertySpec(c))
  r.replay = `quotad simulate --property --scenario ${c.scenario} --mode ${c.mode} --seed ${c.seed}`
  return r
}
