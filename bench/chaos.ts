/**
 * The real-process fault harness: N real quotad processes (seeds, and
 * members with `--members`), a seeded, replayable plan of faults
 * (src/sim/fault-plan.ts: kill -9, SIGSTOP, SIGTERM restarts, SIGHUP reloads
 * that lower and raise limits, partitions, lossy and duplicating links, a
 * stepped wall clock), load on every node through its Unix socket, and a
 * checker of every answer against one exact limiter (lib/chaos-check.ts).
 *
 *   npx tsc -p . && node dist/bench/chaos.js --seeds 1-10 --nodes 5
 *   node dist/bench/chaos.js --seeds 1-10 --seeds-nodes 3 --members 2
 *   node dist/bench/chaos.js --seeds 7 --faults kill,reload     # replay seed 7 with two kinds only
 *
 * Per run it prints the plan, then one row: overshoot (by true time, and by
 * each deciding node's calendar), utilization of the quiet tail against a
 * fault-free run of the same topology and load, the largest shortfall, the
 * largest surplus (tokens a seed counts in the cluster beyond the limit:
 * created), and the unacknowledged grants every node reports at the end of
 * the quiet, and the processes that exited on their own. The table is appended to
 * bench/results/chaos-<commit>.txt (`--out FILE`, `--out -` for none);
 * `--json FILE` writes every run's full result.
 *
 * Exit status: 1 if any run overshot in hard mode (the one promise that holds
 * under every fault) or created tokens (a surplus over 1, which overshoots
 * once the load uses them), else 0; the other columns are reported, not
 * judged.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { intFlag, parseCli } from '../src/cli/common.js'
import { ChaosNet, netSupport } from './lib/chaos-net.js'
import { FAULT_KINDS, NET_FAULTS, describeEvent, makePlan, summarizePlan, type ChaosEvent, type FaultKind, CHAOS_RELOAD_RULES } from '../src/sim/fault-plan.js'
import { LIBFAKETIME, killAll, runChaos, type ChaosRule, type RunResult } from './lib/chaos-run.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { renderTable } from './lib/table.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

const { values } = parseCli({
  args: process.argv.slice(2),
  options: {
    seeds: { type: 'string' },
    nodes: { type: 'string' },
    'seeds-nodes': { type: 'string' },
    members: { type: 'string' },
    'faults-s': { type: 'string' },
    'quiet-s': { type: 'string' },
    'reclaim-ms': { type: 'string' },
    faults: { type: 'string' },
    json: { type: 'string' },
    out: { type: 'string' },
    keep: { type: 'boolean' },
    events: { type: 'string' },
    'no-baseline': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' }
  }
})
if (values.help === true) {
  process.stdout.write('usage: node dist/bench/chaos.js [--seeds 1-50|1,4,7] [--nodes 5 | --seeds-nodes 3 --members 2]\n' +
    '  [--faults-s 60] [--quiet-s 15] [--reclaim-ms 5000] [--faults kill,stop,term,reload,partition,loss,dup,clock]\n' +
    '  [--json FILE] [--out FILE|-] [--keep] [--no-baseline] [--events 1,3-5]\n' +
    '  --events keeps only those events (1-based, as the log lists them) of each seed\'s plan: to narrow a finding\n' +
    '  within the same plan (--faults draws a new plan of the kinds it names)\n')
  process.exit(0)
}

function parseSeeds (s: string): number[] {
  const out: number[] = []
  for (const part of s.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim())
    if (m === null) throw new Error(`--seeds: expected N, N-M or a comma list, got "${s}"`)
    const a = Number(m[1])
    const b = m[2] === undefined ? a : Number(m[2])
    for (let i = a; i <= b; i++) out.push(i)
  }
  return out
}

const seedList = parseSeeds(values.seeds ?? '1-3')
const seedNodes = values['seeds-nodes'] !== undefined ? intFlag('seeds-nodes', values['seeds-nodes'], 3, 1) : intFlag('nodes', values.nodes, 5, 1)
const memberCount = intFlag('members', values.members, 0, 0)
const faultsMs = intFlag('faults-s', values['faults-s'], 60, 1) * 1000
const quietMs = intFlag('quiet-s', values['quiet-s'], 15, 1) * 1000
const reclaimMs = intFlag('reclaim-ms', values['reclaim-ms'], 5000, 1000)
const kinds = new Set<FaultKind>()
for (const k of (values.faults ?? FAULT_KINDS.join(',')).split(',').filter(x => x !== '')) {
  if (!(FAULT_KINDS as readonly string[]).includes(k)) throw new Error(`--faults: unknown fault "${k}" (known: ${FAULT_KINDS.join(', ')})`)
  kinds.add(k as FaultKind)
}

const keptEvents = values.events === undefined ? null : new Set(parseSeeds(values.events))

/** Seed `seed`'s plan, less the events `--events` leaves out. */
function planOf (seed: number, runFaultsMs: number): ChaosEvent[] {
  const plan = makePlan({ seed, nodes: names, faultsMs: runFaultsMs, kinds, reclaimMs, reloadRules: CHAOS_RELOAD_RULES })
  return keptEvents === null ? plan : plan.filter((_, i) => keptEvents.has(i + 1))
}

const seeds = Array.from({ length: seedNodes }, (_, i) => String.fromCharCode(97 + i))
const members = Array.from({ length: memberCount }, (_, i) => `m${i + 1}`)
const names = [...seeds, ...members]
const topology = memberCount === 0 ? `${seedNodes} seeds` : `${seedNodes} seeds + ${memberCount} members`

// Hard rules of each algorithm, one glob; demand above every limit, so an overshoot would show.
const RULES: ChaosRule[] = [
  { name: 'api', match: 'api', limit: 200, per: '2s', perMs: 2000, algorithm: 'fixed-window', keys: ['api'], demandPerS: 150 },
  { name: 'search', match: 'search', limit: 100, per: '2s', perMs: 2000, algorithm: 'fixed-window', keys: ['search'], demandPerS: 75 },
  { name: 'bucket', match: 'bucket', limit: 40, per: '1s', perMs: 1000, algorithm: 'token-bucket', burst: 40, keys: ['bucket'], demandPerS: 60 },
  { name: 'log', match: 'log', limit: 60, per: '2s', perMs: 2000, algorithm: 'sliding-log', keys: ['log'], demandPerS: 45 },
  { name: 'users', match: 'user:*', limit: 20, per: '2s', perMs: 2000, algorithm: 'fixed-window', keys: ['user:1', 'user:2', 'user:3'], demandPerS: 15 }
]

const log = (line: string): void => { process.stdout.write(line + '\n') }

// What this machine can do: network faults need root and iptables, clock faults libfaketime.
let useNet = [...kinds].some(k => NET_FAULTS.has(k))
if (useNet) {
  const s = netSupport()
  if (!s.ok) {
    log(`chaos: network faults skipped (${s.why}); nodes run on loopback`)
    for (const k of NET_FAULTS) kinds.delete(k)
    useNet = false
  }
}
let fakeTime = kinds.has('clock')
if (fakeTime && !existsSync(LIBFAKETIME)) {
  if (process.getuid?.() === 0) {
    log('chaos: installing libfaketime (apt-get install -y libfaketime)')
    spawnSync('apt-get', ['install', '-y', '-q', 'libfaketime'], { stdio: 'ignore', timeout: 300_000 })
  }
  if (!existsSync(LIBFAKETIME)) {
    log(`chaos: clock faults skipped (${LIBFAKETIME} missing and could not be installed)`)
    kinds.delete('clock')
    fakeTime = false
  }
}

const commit = (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim() } catch { return 'unknown' } })()

interface Row { seed: number, plan: string, r: RunResult, util: number }

// Stopped (Ctrl-C, a test's timeout): no node and no namespace may outlive the harness.
let current: ChaosNet | null = null
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    killAll()
    current?.down()
    process.kill(process.pid, sig)
  })
}

async function once (seed: number, withFaults: boolean, runFaultsMs: number): Promise<RunResult> {
  const plan = withFaults ? planOf(seed, runFaultsMs) : []
  const net = useNet ? new ChaosNet(names, String(process.pid)) : null
  current = net
  await net?.up()
  try {
    // The baseline's logs are kept: a utilization figure is only as good as the run it is measured against.
    return await runChaos({ seed, seeds, members, rules: RULES, plan, faultsMs: runFaultsMs, quietMs, reclaimMs, net, fakeTime, keepDir: values.keep === true || !withFaults, log })
  } finally {
    net?.down()
  }
}

async function main (): Promise<void> {
  printMachine(machineInfo())
  log(`chaos: ${topology}, faults ${faultsMs / 1000} s + quiet ${quietMs / 1000} s, reclaimMs ${reclaimMs}, kinds ${[...kinds].join(',') || 'none'}, ${useNet ? 'network namespaces' : 'loopback'}, commit ${commit}`)
  let baselineTail = NaN
  let baselineMs = NaN
  if (values['no-baseline'] !== true) {
    log('baseline: a fault-free run of the same topology and load')
    const b = await once(seedList[0], false, Math.min(faultsMs, 10_000))
    baselineTail = b.tailAllowed
    baselineMs = b.tailMs
    log(`baseline: ${b.tailAllowed} allowed in the last ${(b.tailMs / 1000).toFixed(1)} s, overshoot ${b.overshoot}, ${b.answers} answers, ${b.errors} errors, ` +
      `fenced at the end: ${b.ends.filter(e => e.fenced === true).map(e => e.node).join(',') || 'none'}; logs in ${b.dir}`)
    if (b.tailAllowed === 0) log('baseline: nothing admitted in its tail, so no utilization (see its logs)')
  }
  const rows: Row[] = []
  const failed: string[] = []
  for (const seed of seedList) {
    const plan = planOf(seed, faultsMs)
    log(`\nseed ${seed} (${topology}): ${plan.length} events${keptEvents === null ? '' : ` (--events ${values.events ?? ''})`}`)
    for (const e of plan) log(`  plan ${describeEvent(e)}`)
    let r: RunResult
    try {
      r = await once(seed, true, faultsMs)
    } catch (err) {
      failed.push(`seed ${seed}: ${(err as Error).message.slice(0, 500)}`)
      log(`  ! the run failed: ${(err as Error).stack ?? String(err)}`)
      continue
    }
    const util = baselineTail > 0 ? r.tailAllowed / r.tailMs / (baselineTail / baselineMs) : NaN
    rows.push({ seed, plan: summarizePlan(plan), r, util })
    log(rowText({ seed, plan: summarizePlan(plan), r, util }))
    for (const v of r.verdicts) {
      if (v.overshoot > 0 || v.overshootByNodeCalendar > 0) log(`  overshoot ${v.key} (${v.rule}): ${v.overshoot} by true time, ${v.overshootByNodeCalendar} by node calendars; worst ${JSON.stringify(v.worst)} (at ${v.worst === null ? '-' : new Date(v.worst.at).toISOString()})`)
    }
    if (r.overshoot > 0 || r.maxSurplus > 1 || r.exits.length > 0 || r.startFailures.length > 0) log(`  logs kept in ${r.dir}`)
  }
  const table = renderTable(
    ['seed', 'topology', 'faults', 'overshoot', 'by node cal.', 'util (tail)', 'max shortfall', 'max surplus', 'unacked > 2 s', 'fenced at end', 'exits', 'answers'],
    rows.map(x => [String(x.seed), topology, x.plan, String(x.r.overshoot), String(x.r.overshootByNodeCalendar), Number.isFinite(x.util) ? `${(x.util * 100).toFixed(1)}%` : '-',
      String(x.r.maxShortfall), Number.isNaN(x.r.maxSurplus) ? '-' : String(x.r.maxSurplus), String(x.r.unacked), x.r.ends.filter(e => e.fenced === true).map(e => e.node).join(',') || '-', x.r.exits.map(e => `${e.node}: ${e.codes.join(' ') || e.how}`).join('; ') || '0', String(x.r.answers)])
  )
  const over = rows.filter(x => x.r.overshoot > 0)
  const bad = rows.filter(x => x.r.overshoot > 0 || x.r.maxSurplus > 1)
  const summary = `${rows.length} runs, ${over.length} with overshoot${over.length === 0 ? '' : ` (seeds ${over.map(x => x.seed).join(',')})`}, ` +
    `${rows.filter(x => x.r.maxShortfall > 1).length} with a shortfall > 1 after the quiet, ${rows.filter(x => x.r.maxSurplus > 1).length} with a surplus > 1 (tokens created), ${rows.filter(x => x.r.unacked > 0).length} with unacked grants, ` +
    `${rows.filter(x => x.r.exits.length > 0).length} with a process that exited on its own, ${rows.filter(x => x.r.startFailures.length > 0).length} with a node that did not start or form, ` +
    `${rows.filter(x => x.util < 0.95).length} with tail utilization < 95%` + (failed.length === 0 ? '' : `; ${failed.length} runs failed: ${failed.join('; ')}`)
  log('\n' + table + '\n' + summary)
  const out = values.out ?? path.join(ROOT, 'bench', 'results', `chaos-${commit}.txt`)
  if (out !== '-') {
    mkdirSync(path.dirname(out), { recursive: true })
    appendFileSync(out, `\n## ${new Date().toISOString()} node dist/bench/chaos.js ${process.argv.slice(2).join(' ')}\n` +
      `${topology}, faults ${faultsMs / 1000} s + quiet ${quietMs / 1000} s, kinds ${[...kinds].join(',')}, commit ${commit}; baseline tail ${baselineTail} allowed in ${(baselineMs / 1000).toFixed(1)} s\n\n${table}\n${summary}\n`)
    log(`appended to ${out}`)
  }
  if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ topology, kinds: [...kinds], faultsMs, quietMs, baselineTail, baselineMs, runs: rows }, null, 2))
  process.exitCode = bad.length > 0 || failed.length > 0 ? 1 : 0
}

function rowText (x: Row): string {
  return `seed ${x.seed}: overshoot ${x.r.overshoot} (by node calendars ${x.r.overshootByNodeCalendar}), util ${(x.util * 100).toFixed(1)}%, max shortfall ${x.r.maxShortfall}, max surplus ${x.r.maxSurplus}, unacked ${x.r.unacked}, ` +
    `exits ${x.r.exits.length}, start failures ${x.r.startFailures.length}, ${x.r.answers} answers, ${x.r.errors} errors`
}

main().catch(err => {
  process.stderr.write(`chaos: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 2
})
