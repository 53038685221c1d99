/**
 * The accuracy benchmark: the deterministic simulator over >= 10,000 seeds,
 * every scenario at N = 3, 10, 50 and 200, hard mode, with both baselines
 * (static even split, exact central limiter) on the same arrivals.
 *
 *   npm run build && node dist/bench/accuracy.js [--quick] [--workers 2] [--json FILE] [--scenarios a,b,c] [--seeds N=S,...]
 *     [--sizes 10,50,200,1000] [--seed-nodes K] [--decide seeds] [--credit-ms MS]
 *
 * --sizes picks the node counts (default 3, 10, 50, 200); --seed-nodes K makes only the first K nodes seeds,
 * the rest members (default: every node a seed); --decide seeds gives the rule `"decide": "seeds"` (members send
 * each acquire to a seed: cluster-protocol.md, "Members and forwarding"); --credit-ms MS (with it) gives the rule a `credit` of
 * MS (a member may take about half its demand over MS from a seed as credit: "Credit for a member's busy keys").
 *
 * --scenarios runs only the named scenarios (comma-separated, in the order of
 * SCENARIOS; default: all), at the same sizes and seed counts. --seeds sets the
 * seeds per cell at a size, for every scenario (--seeds 50=20,200=0: 20 at
 * N = 50, none at N = 200), for a partial run on a busy machine; --quick still divides.
 *
 * Rules: one exact key, fixed window 1000 per 1 s; the keys100 scenarios
 * use a glob rule, 100 per 1 s per key, 100 keys. The safety scenarios
 * (stops, rule changes, clock steps) take the four algorithms in turn. Runs last 10 virtual
 * seconds (6 at N = 200), or a scenario's minGossips intervals if longer (run.ts: 22.5 s for the
 * long cuts and member-crash-forever, at every N); gossip every 250 ms. Seeds per cell shrink with
 * N (a run's cost grows about as N^2); the keys100 cells get few seeds at
 * N = 50, one at N = 200 (about 2 CPU minutes) and none at N = 1000.
 *
 * Every run is checked (oracle + conservation); the bench exits 1 if any
 * failed, printing the seeds and replay commands.
 */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { fail, intFlag, parseCli, usage } from '../src/cli/common.js'
import { ALGORITHMS, type RuleConfig } from '../src/config/types.js'
import { failureText, HEADER, row, summarize, table, type Summary } from '../src/sim/report.js'
import { runSim, type SimResult } from '../src/sim/run.js'
import { SCENARIOS, scenario, type Scenario } from '../src/sim/scenario.js'
import { machineInfo, printMachine } from './lib/machine.js'

/** The sizes run by default; --sizes picks others (1000 too). */
const SIZES = [3, 10, 50, 200]
const ALL_SIZES = [3, 10, 50, 200, 1000]
const SEEDS: Record<number, number> = { 3: 560, 10: 500, 50: 40, 200: 6, 1000: 1 }
const KEYS_SEEDS: Record<number, number> = { 3: 50, 10: 20, 50: 2, 200: 1, 1000: 0 }
const GOSSIP_MS = 250

interface Cell { scenario: string, nodes: number, seeds: number, seedNodes?: number, decide?: 'seeds', creditMs?: number }

/** Scenarios about hard mode's safety under stops, rule changes and clock steps: every algorithm takes turns by seed. */
const SAFETY = new Set(['stops', 'reload-lower', 'reload-lower-restart', 'reload-raise', 'restart-changed', 'restart-lowered', 'clock-step'])

function ruleFor (name: string, seed = 0, decide?: 'seeds', creditMs?: number): RuleConfig {
  const many = scenario(name).keys > 1
  const limit = many ? 100 : 1000
  const algorithm = SAFETY.has(name) ? ALGORITHMS[seed % ALGORITHMS.length] : 'fixed-window'
  return { name: 'api', match: many ? 'api:*' : 'api', limit, perMs: 1000, per: '1s', algorithm, burst: limit, mode: 'hard', onPartition: 'local-share', maxDebt: limit / 10, ...(decide === undefined ? {} : { decide }), ...(creditMs === undefined || algorithm !== 'fixed-window' ? {} : { creditMs }) }
}

function runCell (c: Cell, first: number): SimResult[] {
  const out: SimResult[] = []
  for (let s = first; s < first + c.seeds; s++) {
    out.push(runSim({ scenario: scenario(c.scenario), nodes: c.nodes, seedNodes: c.seedNodes === undefined ? undefined : Math.min(c.seedNodes, c.nodes), seed: s, mode: 'hard', rule: ruleFor(c.scenario, s, c.decide, c.creditMs), durationMs: c.nodes >= 200 ? 6000 : 10_000, gossipIntervalMs: GOSSIP_MS }))
  }
  return out
}

/** The scenarios --scenarios names, in SCENARIOS order; all of them without the flag. Unknown names are a usage error. */
function pickScenarios (flag: string | undefined): readonly Scenario[] {
  if (flag === undefined) return SCENARIOS
  const names = flag.split(',').map(n => n.trim()).filter(n => n !== '')
  if (names.length === 0) throw usage('--scenarios must name at least one scenario')
  const unknown = names.filter(n => !SCENARIOS.some(s => s.name === n))
  if (unknown.length > 0) throw usage(`--scenarios: unknown scenario(s) ${unknown.join(', ')} (one of: ${SCENARIOS.map(s => s.name).join(', ')})`)
  return SCENARIOS.filter(s => names.includes(s.name))
}

/** --seeds N=S,...: seeds per cell at size N for every scenario, or a usage error naming the bad part. */
function seedOverrides (flag: string | undefined): Map<number, number> {
  const out = new Map<number, number>()
  if (flag === undefined) return out
  for (const part of flag.split(',').map(p => p.trim()).filter(p => p !== '')) {
    const m = /^(\d+)=(\d+)$/.exec(part)
    if (m === null || !ALL_SIZES.includes(Number(m[1]))) throw usage(`--seeds: "${part}" is not N=S with N one of ${ALL_SIZES.join(', ')} and S a whole number`)
    out.set(Number(m[1]), Number(m[2]))
  }
  return out
}

/** --sizes a,b: the node counts to run, each one of ALL_SIZES; default SIZES. */
function pickSizes (flag: string | undefined): number[] {
  if (flag === undefined) return SIZES
  const out = flag.split(',').map(p => p.trim()).filter(p => p !== '').map(Number)
  if (out.length === 0 || out.some(n => !ALL_SIZES.includes(n))) throw usage(`--sizes: "${flag}" must list node counts among ${ALL_SIZES.join(', ')}`)
  return out
}

if (!isMainThread) {
  const { cells } = workerData as { cells: Array<{ cell: Cell, first: number, id: number }> }
  for (const { cell, first, id } of cells) parentPort?.postMessage({ id, results: runCell(cell, first) })
  process.exit(0)
}

async function main (): Promise<void> {
  const { values } = parseCli({ args: process.argv.slice(2), options: { quick: { type: 'boolean' }, workers: { type: 'string' }, json: { type: 'string' }, scenarios: { type: 'string' }, seeds: { type: 'string' }, sizes: { type: 'string' }, 'seed-nodes': { type: 'string' }, decide: { type: 'string' }, 'credit-ms': { type: 'string' } } })
  const quick = values.quick === true
  const workers = intFlag('workers', values.workers, 2, 1)
  const picked = pickScenarios(values.scenarios)
  const override = seedOverrides(values.seeds)
  const sizes = pickSizes(values.sizes)
  const seedNodes = values['seed-nodes'] === undefined ? undefined : intFlag('seed-nodes', values['seed-nodes'], 1, 1)
  const decide = values.decide
  if (decide !== undefined && decide !== 'seeds' && decide !== 'local') throw usage('--decide must be local or seeds')
  const creditMs = values['credit-ms'] === undefined ? undefined : intFlag('credit-ms', values['credit-ms'], 1, 1)
  if (creditMs !== undefined && (decide !== 'seeds' || creditMs > 1000)) throw usage('--credit-ms needs --decide seeds, and is at most the rules\' 1000 ms period')
  const cells: Cell[] = []
  for (const sc of picked) {
    for (const n of sizes) {
      const seeds = Math.ceil((override.get(n) ?? (sc.keys > 1 ? KEYS_SEEDS[n] : SEEDS[n])) / (quick ? 25 : 1))
      if (seeds > 0) cells.push({ scenario: sc.name, nodes: n, seeds, seedNodes, ...(decide === 'seeds' ? { decide } : {}), ...(creditMs === undefined ? {} : { creditMs }) })
    }
  }
  const total = cells.reduce((n, c) => n + c.seeds, 0)
  printMachine(machineInfo())
  process.stdout.write(`accuracy: ${total} seeded runs, ${cells.length} cells, ${workers} worker(s), hard mode, gossip ${GOSSIP_MS} ms${picked === SCENARIOS ? '' : `; scenarios: ${picked.map(s => s.name).join(', ')}`}${override.size === 0 ? '' : `; seeds per cell set: ${[...override].map(([n, k]) => `N=${n}: ${k}`).join(', ')}`}${seedNodes === undefined ? '' : `; ${seedNodes} seed node(s), the rest members`}${decide === 'seeds' ? '; the rule decided at the seeds (decide: seeds)' : ''}${creditMs === undefined ? '' : `, members' credit over ${creditMs} ms (credit)`}\n`)
  const t0 = performance.now()

  // Split every cell into chunks and deal them round-robin, heaviest first, so workers finish together.
  const chunks: Array<{ cell: Cell, first: number, id: number }> = []
  for (const [i, c] of cells.entries()) {
    const per = c.nodes >= 50 ? 1 : 50
    for (let s = 0; s < c.seeds; s += per) chunks.push({ cell: { ...c, seeds: Math.min(per, c.seeds - s) }, first: 1 + s, id: i })
  }
  chunks.sort((a, b) => b.cell.nodes ** 2 * b.cell.seeds - a.cell.nodes ** 2 * a.cell.seeds)
  const lanes: typeof chunks[] = Array.from({ length: workers }, () => [])
  chunks.forEach((c, i) => lanes[i % workers].push(c))
  const results: SimResult[][] = cells.map(() => [])
  let done = 0
  await Promise.all(lanes.map(async lane => await new Promise<void>((resolve, reject) => {
    const w = new Worker(fileURLToPath(import.meta.url), { workerData: { cells: lane } })
    w.on('message', (m: { id: number, results: SimResult[] }) => {
      results[m.id].push(...m.results)
      done += m.results.length
      if (process.stderr.isTTY) process.stderr.write(`\r${done}/${total} runs`)
    })
    w.on('error', reject)
    w.on('exit', code => code === 0 ? resolve() : reject(new Error(`worker exited ${code}`)))
  })))
  const secs = (performance.now() - t0) / 1000
  if (process.stderr.isTTY) process.stderr.write('\n')

  const summaries: Summary[] = results.map(summarize)
  for (const sc of picked) {
    const rule = ruleFor(sc.name)
    const rows = summaries.filter(s => s.scenario === sc.name)
    if (rows.length === 0) continue
    const alg = SAFETY.has(sc.name) ? 'each algorithm in turn (by seed)' : rule.algorithm
    process.stdout.write(`\n### ${sc.name}: ${sc.summary}\nrule: ${alg} ${rule.limit}/1s${sc.keys > 1 ? ` per key, ${sc.keys} keys` : ''}\n`)
    process.stdout.write(table(HEADER, rows.map(row)) + '\n')
    for (const s of rows) if (s.failed > 0) process.stdout.write(failureText(s) + '\n')
  }

  const failed = summaries.reduce((n, s) => n + s.failed, 0)
  const overshoot = summaries.reduce((n, s) => n + s.overshoot, 0)
  const at = (name: string, n: number): Summary | undefined => summaries.find(s => s.scenario === name && s.nodes === n)
  const lines: string[] = []
  lines.push(`hard-mode overshoot over all ${total} runs: ${overshoot} (goal 0) ${overshoot === 0 ? 'MET' : 'MISSED'}`)
  lines.push(`checker failures (overshoot or conservation): ${failed} ${failed === 0 ? 'MET' : 'MISSED'}`)
  for (const name of ['zipf', 'moving-hot']) {
    const s = at(name, 10)
    if (s !== undefined) lines.push(`utilization ${name} N=10: median ${(100 * s.utilization.median).toFixed(1)}% (goal >= 97%) ${s.utilization.median >= 0.97 ? 'MET' : 'MISSED'}`)
  }
  for (const name of ['zipf', 'moving-hot', 'uniform']) {
    for (const n of sizes.filter(k => k >= 200)) {
      const s = at(name, n)
      if (s === undefined) continue
      const ok = s.utilization.median >= 0.9 && s.utilization.median >= s.staticUtilization
      lines.push(`utilization ${name} N=${n}: median ${(100 * s.utilization.median).toFixed(1)}%, static split ${(100 * s.staticUtilization).toFixed(1)}% (goal >= 90% and >= static) ${ok ? 'MET' : 'MISSED'}`)
    }
  }
  for (const n of sizes) {
    const s = at('moving-hot', n)
    if (s !== undefined && s.follow.moves > 0) {
      const ok = s.follow.missed === 0 && s.follow.max <= 4 * GOSSIP_MS
      lines.push(`hot spot followed N=${n}: p50 ${s.follow.median} ms, max ${s.follow.max} ms, ${s.follow.missed}/${s.follow.moves} moves never followed (goal <= ${4 * GOSSIP_MS} ms = 4 gossip intervals) ${ok ? 'MET' : 'MISSED'}`)
    }
  }
  for (const name of ['keys100', 'keys100-slow']) {
    for (const n of sizes) {
      const s = at(name, n)
      if (s === undefined) continue
      const sent = s.bytesPerNodeSec * 8 / 1000
      const recv = s.recvBytesPerNodeSec * 8 / 1000
      // The goal is judged on the mean over all nodes; by role, where seeds are few, the seeds carry most of it.
      const roles = Number.isNaN(s.memberBytesPerSec) ? '' : `; by role, sent + received: a member ${(s.memberBytesPerSec * 8 / 1000).toFixed(1)}, a seed ${(s.seedBytesPerSec * 8 / 1000).toFixed(1)}`
      lines.push(`control traffic ${name} N=${n}: ${sent.toFixed(1)} kbit/s sent per node (${s.messagesPerNodeSec.toFixed(0)} msg/s) + ${recv.toFixed(1)} kbit/s received (goal <= 50 kbit/s together) ${sent + recv <= 50 ? 'MET' : 'MISSED'}${roles}`)
    }
  }
  for (const n of sizes) {
    const s = at('zipf', n)
    if (s !== undefined) lines.push(`control traffic zipf (1 key) N=${n}: ${(s.bytesPerNodeSec * 8 / 1000).toFixed(1)} kbit/s sent per node, ${(s.recvBytesPerNodeSec * 8 / 1000).toFixed(1)} kbit/s received`)
  }
  process.stdout.write(`\ntargets:\n${lines.map(l => `- ${l}`).join('\n')}\n\n${total} runs in ${secs.toFixed(0)} s\n`)
  if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ machine: machineInfo(), total, seconds: secs, summaries }, null, 2))
  if (failed > 0) process.exitCode = 1
}

main().catch(err => fail(err))
