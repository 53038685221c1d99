/**
 * `quotad simulate`: what would this cluster file do with N nodes and this
 * load? Runs the deterministic simulator (src/sim) for each rule of the file
 * (or a built-in rule), prints one row per scenario, and exits 2 if any run
 * broke an invariant, printing the seed and the command that replays it.
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { loadClusterFile } from '../config/load.js'
import { ALGORITHMS, DEFAULT_LIMITS, type Algorithm, type LimitsConfig, type Mode, type RuleConfig } from '../config/types.js'
import { DEFAULT_VOTERS } from '../config/lease-options.js'
import { ExitCodes } from '../errors.js'
import { parseTrace } from '../sim/load.js'
import { failureText, HEADER, row, summarize, table } from '../sim/report.js'
import { runCase } from '../sim/property.js'
import { joinerNames, nodeNames, runSim, type SimResult } from '../sim/run.js'
import { SCENARIOS, scenario } from '../sim/scenario.js'
import type { Arrival } from '../sim/types.js'
import { intFlag, parseCli, usage } from './common.js'

export const SIMULATE_HELP = `usage: quotad simulate [options]
  --config FILE      simulate this cluster file's rules (default: one rule "api", 1000 per 1s)
  --rule NAME        only this rule of the file
  --nodes N          nodes at the start, 2..1000 (default: the file's node count, else 10)
  --seed-nodes K     of those, only the first K are seeds; the rest are members listed from the start,
                     holding nothing of their own (default: all N are seeds)
  --voters K         of the seeds, the first K in name order vote on leases (default: the file's cluster.voters, else 15)
  --scenario NAME    ${SCENARIOS.map(s => s.name).join(', ')}, or all (default: all)
  --mode hard|soft   override the rules' mode (default: each rule's own)
  --seconds S        virtual seconds per run (default 10)
  --seed S           first seed (default 1)
  --seeds K          runs per scenario, seeds S..S+K-1 (default 1)
  --gossip-ms MS     gossip interval (default: the file's, else 250)
  --trace FILE       replay a load (CSV timestamp,node,key,count or JSON lines) instead of the scenario's
  --algorithm A --limit L --per-ms P --match M   the built-in rule (without --config; a * in M makes it a glob rule)
  --decide D         local or seeds, over the rules' own "decide": with seeds, members send each acquire to a seed
                     (with --seed-nodes; default: each rule's own)
  --credit-ms MS     with --decide seeds, fixed-window rules: a member may take credit for about half its demand over
                     MS from the seed (the rule's "credit"; 0: none; default: each rule's own)
  --property         replay one case of the CI property test (with --scenario, --mode, --seed)
  --json             print every run's result as JSON lines (with "traffic": sent per node per second by message type, "gossipFields": a gossip's mean bytes by field, and "copyFields": the same for the seeds' copies to members)
`

interface Target { rules: RuleConfig[], nodes: number, gossipMs: number, limits: LimitsConfig, voters: number, configPath?: string }

async function target (values: Record<string, string | boolean | undefined>): Promise<Target> {
  const config = values.config as string | undefined
  if (config !== undefined) {
    const cfg = await loadClusterFile(resolve(config))
    let rules = cfg.rules
    if (values.rule !== undefined) {
      rules = rules.filter(r => r.name === values.rule)
      if (rules.length === 0) throw usage(`no rule named "${String(values.rule)}" in ${config} (rules: ${cfg.rules.map(r => r.name).join(', ')})`)
    }
    return { rules: rules.map(r => withCredit(withDecide(r, values.decide), values['credit-ms'])), nodes: cfg.nodes.length, gossipMs: cfg.cluster.gossipIntervalMs, limits: cfg.limits, voters: cfg.cluster.voters, configPath: config }
  }
  const algorithm = (values.algorithm ?? 'fixed-window') as Algorithm
  if (!ALGORITHMS.includes(algorithm)) throw usage(`--algorithm must be one of ${ALGORITHMS.join(', ')}`)
  const limit = intFlag('limit', values.limit as string | undefined, 1000, 1)
  const perMs = intFlag('per-ms', values['per-ms'] as string | undefined, 1000, 1)
  const match = (values.match ?? 'api') as string
  const rule = withCredit(withDecide({ name: 'api', match, limit, perMs, per: `${perMs}ms`, algorithm, burst: limit, mode: 'hard', onPartition: 'local-share', maxDebt: Math.ceil(limit / 10) }, values.decide), values['credit-ms'])
  return { rules: [rule], nodes: 10, gossipMs: 250, limits: DEFAULT_LIMITS, voters: DEFAULT_VOTERS }
}

/** --decide local|seeds over a rule's own `decide` (absent: the rule's). */
function withDecide (r: RuleConfig, flag: string | boolean | undefined): RuleConfig {
  if (flag === undefined) return r
  if (flag !== 'local' && flag !== 'seeds') throw usage('--decide must be local or seeds')
  const { decide: _, ...rest } = r
  return flag === 'seeds' ? { ...rest, decide: 'seeds' } : rest
}

/** --credit-ms MS over a rule's own `credit` (0: none; absent: the rule's). Only where the rule could say it (validate.ts). */
function withCredit (r: RuleConfig, flag: string | boolean | undefined): RuleConfig {
  if (flag === undefined) return r
  const ms = intFlag('credit-ms', flag as string, 0, 0)
  const { creditMs: _, ...rest } = r
  if (ms === 0) return rest
  if (r.decide !== 'seeds' || r.algorithm !== 'fixed-window' || ms > r.perMs) throw usage(`--credit-ms applies to fixed-window rules decided at the seeds (--decide seeds), at most their period (rule ${r.name})`)
  return { ...rest, creditMs: ms }
}

/** One case of the property test, exactly as CI ran it. */
function replayProperty (values: Record<string, string | boolean | undefined>): void {
  const name = values.scenario as string | undefined
  const mode = values.mode as string | undefined
  if (name === undefined || (mode !== 'hard' && mode !== 'soft')) throw usage('--property needs --scenario NAME and --mode hard|soft (and --seed)')
  try { scenario(name) } catch (err) { throw usage((err as Error).message) }
  const r = runCase({ scenario: name, mode, seed: intFlag('seed', values.seed as string | undefined, 1) })
  process.stdout.write(values.json === true ? JSON.stringify(r) + '\n' : table(HEADER, [row(summarize([r]))]) + '\n')
  if (!r.ok) {
    process.stdout.write(failureText(summarize([r])) + '\n')
    process.exitCode = ExitCodes.ERROR
  }
}

export async function simulate (argv: string[]): Promise<void> {
  const { values } = parseCli({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      rule: { type: 'string' },
      nodes: { type: 'string' },
      'seed-nodes': { type: 'string' },
      voters: { type: 'string' },
      scenario: { type: 'string' },
      mode: { type: 'string' },
      seconds: { type: 'string' },
      seed: { type: 'string' },
      seeds: { type: 'string' },
      'gossip-ms': { type: 'string' },
      trace: { type: 'string' },
      algorithm: { type: 'string' },
      decide: { type: 'string' },
      'credit-ms': { type: 'string' },
      limit: { type: 'string' },
      'per-ms': { type: 'string' },
      match: { type: 'string' },
      property: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(SIMULATE_HELP); return }
  if (values.property === true) { replayProperty(values); return }
  const t = await target(values)
  const nodes = intFlag('nodes', values.nodes, t.nodes, 2)
  if (nodes > 1000) throw usage('--nodes must be at most 1000')
  const seedNodes = intFlag('seed-nodes', values['seed-nodes'], nodes, 1)
  if (seedNodes > nodes) throw usage(`--seed-nodes must be at most --nodes (${nodes})`)
  const voters = intFlag('voters', values.voters, t.voters, 1)
  if (voters > 255) throw usage('--voters must be at most 255')
  const seconds = intFlag('seconds', values.seconds, 10, 1)
  const seed = intFlag('seed', values.seed, 1)
  const seeds = intFlag('seeds', values.seeds, 1, 1)
  const gossipMs = intFlag('gossip-ms', values['gossip-ms'], t.gossipMs, 10)
  const mode = values.mode as Mode | undefined
  if (mode !== undefined && mode !== 'hard' && mode !== 'soft') throw usage('--mode must be hard or soft')
  const names = values.scenario === undefined || values.scenario === 'all' ? SCENARIOS.map(s => s.name) : [values.scenario]
  const scenarios = names.map(n => { try { return scenario(n) } catch (err) { throw usage((err as Error).message) } })
  let trace: Arrival[] | undefined
  if (values.trace !== undefined) {
    try {
      trace = parseTrace(await readFile(values.trace, 'utf8'), values.trace)
    } catch (err) {
      throw usage(`--trace: ${(err as Error).message}`)
    }
    // A trace's times are relative to its first line.
    const t0 = trace.length > 0 ? trace[0].at : 0
    trace = trace.map(a => ({ ...a, at: a.at - t0 }))
    // The simulated nodes are n1..nN whatever the file calls them: a trace naming others would
    // replay nothing (an empty run that looks like 0% utilization), so say so.
    const seedNames = nodeNames(nodes)
    const known = new Set([...seedNames, ...joinerNames(scenarios[0])])
    const strangers = [...new Set(trace.map(a => a.node))].filter(n => !known.has(n))
    if (strangers.length > 0) {
      throw usage(`--trace: node(s) ${strangers.slice(0, 5).map(n => JSON.stringify(n)).join(', ')} are not simulated; the ${nodes} simulated nodes are named ${seedNames.slice(0, 3).join(', ')}${nodes > 3 ? `, ... ${seedNames[nodes - 1]}` : ''}`)
    }
  }

  let failed = 0
  for (const rule of t.rules) {
    const rows: string[][] = []
    const notes: string[] = []
    for (const sc of trace === undefined ? scenarios : [scenarios[0]]) {
      const results: SimResult[] = []
      for (let s = seed; s < seed + seeds; s++) {
        const r = runSim({
          scenario: sc, nodes, seedNodes, seed: s, mode: mode ?? rule.mode, rule, durationMs: seconds * 1000, gossipIntervalMs: gossipMs,
          ...(voters === DEFAULT_VOTERS ? {} : { tuning: { voters } }),
          limits: t.limits, ...(trace !== undefined ? { trace, tracePath: values.trace } : {}), ...(t.configPath !== undefined ? { configPath: t.configPath } : {})
        })
        if (values.json === true) process.stdout.write(JSON.stringify(r) + '\n')
        results.push(r)
      }
      const sum = summarize(results)
      if (trace !== undefined) sum.scenario = `trace ${values.trace}`
      rows.push(row(sum))
      failed += sum.failed
      if (sum.failed > 0) notes.push(failureText(sum))
    }
    if (values.json === true) continue
    process.stdout.write(`\nrule ${rule.name}: ${rule.algorithm} ${rule.limit}/${rule.per}${rule.algorithm === 'token-bucket' ? ` burst ${rule.burst}` : ''}, ` +
      `${nodes} nodes${seedNodes < nodes ? ` (${seedNodes} seeds, ${nodes - seedNodes} members)` : ''}${voters < seedNodes ? `, ${voters} of the seeds voting` : ''}, ${seconds} s per run, gossip ${gossipMs} ms, seeds ${seed}..${seed + seeds - 1}\n`)
    process.stdout.write(table(HEADER, rows) + '\n')
    for (const n of notes) process.stdout.write(n + '\n')
  }
  if (failed > 0) {
    process.stderr.write(`${failed} run(s) broke an invariant; each is replayed by the command printed with it\n`)
    process.exitCode = ExitCodes.ERROR
  }
}
