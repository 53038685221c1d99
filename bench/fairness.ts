/**
 * Fairness between connections: the latency a quiet client sees while other
 * connections flood the same daemon.
 *
 * What runs:
 * - quotad: a real daemon process on a one-node cluster file in a temp dir
 *   (bench/lib/quotad-target.ts), so its event loop is its own.
 * - the flood: a child process (this script with --flood, bench/lib/flood.ts)
 *   with N connections (default 8) that each write one kind of request as
 *   fast as the daemon takes them and read every reply: `fuzz` (seeded
 *   fuzzed frames, test/helpers/fuzz-frames.ts), `acquire` (pipelined valid
 *   acquires), `batch` (100-item batches), `status`.
 * - the quiet client: one QuotadClient connection in this process, doing one
 *   ping (or acquire) at a time, back to back (c=1), timed with
 *   performance.now() around each awaited call.
 *
 * Each row (flood kind) runs `--trials` trials of `--seconds` each; a trial
 * starts a fresh flood, waits until it is connected plus a warm-up, then
 * times the quiet client. Printed per row: the median over trials of the
 * quiet client's p50, p99 and max, and of the flood's replies per second.
 * `none` is the same quiet client with no flood.
 *
 * Run: npx tsc -p . && node dist/bench/fairness.js [--help]
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { intFlag } from '../src/cli/common.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { LatencyLog, median, type LatencySummary } from './lib/stats.js'
import { fmtInt, fmtUs, renderTable } from './lib/table.js'
import { startDaemonProcess, writeBenchCluster, type BenchRule } from './lib/quotad-target.js'
import { FLOOD_KINDS, runFlood, type FloodKind, type FloodResult } from './lib/flood.js'

const HELP = `usage: node dist/bench/fairness.js [options]

  --rows LIST        flood kinds to run, from none,${FLOOD_KINDS.join(',')} (default: all)
  --conns N          flooding connections (default 8)
  --trials N         trials per row (default 3)
  --seconds S        quiet-client time per trial (default 5)
  --quiet-op OP      ping or acquire (default ping)
  --seed N           fuzz seed (default 1)
  --json FILE        also write every trial as JSON
  --keep-tmp         keep the temp dir
`

const RULES: BenchRule[] = [
  { name: 'bench', match: 'bench:*', limit: 1_000_000_000, per: '1s', algorithm: 'fixed-window' },
  { name: 'fz', match: 'fz:*', limit: 1_000_000_000, per: '1s', algorithm: 'fixed-window' }
]
const TARGET_P99_US = 5000

interface Trial {
  row: string
  quiet: LatencySummary
  floodRepliesPerS: number
  /** CPU used by other processes during the trial, in % of one core: noise. */
  otherCpuPct: number
}

async function main (): Promise<void> {
  const { values } = parseArgs({
    options: {
      help: { type: 'boolean' },
      rows: { type: 'string' },
      conns: { type: 'string' },
      trials: { type: 'string' },
      seconds: { type: 'string' },
      'quiet-op': { type: 'string' },
      seed: { type: 'string' },
      json: { type: 'string' },
      'keep-tmp': { type: 'boolean' },
      flood: { type: 'string' },
      kind: { type: 'string' }
    }
  })
  const conns = intFlag('conns', values.conns, 8, 1)
  const seed = intFlag('seed', values.seed, 1)
  if (values.flood !== undefined) {
    // The child: flood until SIGTERM.
    await runFlood(values.flood, values.kind as FloodKind, conns, seed)
    return
  }
  if (values.help === true) {
    process.stdout.write(HELP)
    return
  }
  const rows = (values.rows ?? ['none', ...FLOOD_KINDS].join(',')).split(',')
  for (const r of rows) if (r !== 'none' && !(FLOOD_KINDS as readonly string[]).includes(r)) throw new Error(`unknown row ${r}`)
  const trials = intFlag('trials', values.trials, 3, 1)
  const seconds = intFlag('seconds', values.seconds, 5, 1)
  const quietOp = values['quiet-op'] ?? 'ping'
  if (quietOp !== 'ping' && quietOp !== 'acquire') throw new Error('--quiet-op must be ping or acquire')

  printMachine(machineInfo())
  process.stdout.write(`quiet client: ${quietOp} at c=1 on its own connection; flood: ${conns} connections in a child process; ` +
    `${trials} trials x ${seconds} s per row\n\n`)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'qd-fair-'))
  const cluster = await writeBenchCluster(dir, RULES)
  const target = await startDaemonProcess(cluster)
  const all: Trial[] = []
  try {
    const client = await QuotadClient.connect({ socketPath: cluster.socketPath, timeoutMs: 30_000 })
    const op = quietOp === 'ping' ? async () => { await client.ping() } : async () => { await client.acquire('bench:quiet') }
    for (let i = 0; i < 2000; i++) await op() // warm-up, no flood
    for (const row of rows) {
      for (let k = 0; k < trials; k++) {
        const trial = await runTrial(row, cluster.socketPath, target.pid, conns, seed + k, seconds, op)
        all.push(trial)
        process.stdout.write(`  ${row} trial ${k + 1}: quiet p50 ${fmtUs(trial.quiet.p50Us)} µs, p99 ${fmtUs(trial.quiet.p99Us)} µs, ` +
          `max ${fmtUs(trial.quiet.maxUs)} µs (${trial.quiet.n} requests); flood ${fmtInt(trial.floodRepliesPerS)} replies/s; ` +
          `other CPU ${fmtInt(trial.otherCpuPct)}%\n`)
      }
    }
    await client.close()
  } finally {
    await target.stop()
    if (values['keep-tmp'] !== true) rmSync(dir, { recursive: true, force: true })
  }
  report(rows, all)
  if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ machine: machineInfo(), trials: all }, null, 2) + '\n')
}

async function runTrial (row: string, socketPath: string, daemonPid: number | null, conns: number, seed: number, seconds: number,
  op: () => Promise<void>): Promise<Trial> {
  const flood = row === 'none' ? null : await startFlood(socketPath, row as FloodKind, conns, seed)
  try {
    await sleep(500) // let the flood reach its pace
    const log = new LatencyLog()
    const ours = (): number => cpuMs(null) + (daemonPid === null ? 0 : cpuMs(daemonPid)) + (flood === null ? 0 : cpuMs(flood.pid))
    const busy0 = machineBusyMs()
    const ours0 = ours()
    const t0 = performance.now()
    const until = t0 + seconds * 1000
    while (performance.now() < until) {
      const s = performance.now()
      await op()
      log.push(performance.now() - s)
    }
    const elapsedS = (performance.now() - t0) / 1000
    const otherCpuPct = ((machineBusyMs() - busy0) - (ours() - ours0)) / (elapsedS * 10)
    const result = flood === null ? { sentBytes: 0, replies: 0 } : await flood.stop()
    return { row, quiet: log.summary(), floodRepliesPerS: result.replies / (elapsedS + 0.5), otherCpuPct: Math.max(0, otherCpuPct) }
  } catch (err) {
    await flood?.stop()
    throw err
  }
}

async function startFlood (socketPath: string, kind: FloodKind, conns: number, seed: number): Promise<{ pid: number, stop: () => Promise<FloodResult> }> {
  const script = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [script, '--flood', socketPath, '--kind', kind, '--conns', String(conns), '--seed', String(seed)],
    { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  const lines: Array<() => void> = []
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString()
    for (const wake of lines.splice(0)) wake()
  })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  while (!out.includes('ready\n')) {
    if (child.exitCode !== null) throw new Error(`flood exited: ${out}`)
    await Promise.race([new Promise<void>(resolve => lines.push(resolve)), exited])
  }
  return {
    pid: child.pid ?? -1,
    stop: async () => {
      child.kill('SIGTERM')
      await exited
      const last = out.trim().split('\n').pop() ?? ''
      try {
        return JSON.parse(last) as FloodResult
      } catch {
        return { sentBytes: 0, replies: 0 }
      }
    }
  }
}

function report (rows: string[], all: Trial[]): void {
  const table = rows.map(row => {
    const ts = all.filter(t => t.row === row)
    return [
      row === 'none' ? 'no flood' : `${row} flood`,
      fmtUs(median(ts.map(t => t.quiet.p50Us))),
      fmtUs(median(ts.map(t => t.quiet.p99Us))),
      fmtUs(median(ts.map(t => t.quiet.maxUs))),
      fmtInt(median(ts.map(t => t.quiet.n))),
      row === 'none' ? '-' : fmtInt(median(ts.map(t => t.floodRepliesPerS))),
      `${fmtInt(median(ts.map(t => t.otherCpuPct)))}%`
    ]
  })
  process.stdout.write('\nresults (median over trials):\n')
  process.stdout.write(renderTable(['row', 'quiet p50 µs', 'quiet p99 µs', 'quiet max µs', 'quiet requests', 'flood replies/s', 'other CPU'], table))
  process.stdout.write('(other CPU: processes other than the daemon, the flood and this one, in % of one core: noise)\n')
  process.stdout.write('\ntargets:\n')
  for (const row of rows) {
    if (row === 'none') continue
    const p99 = median(all.filter(t => t.row === row).map(t => t.quiet.p99Us))
    process.stdout.write(`  [${p99 <= TARGET_P99_US ? 'met' : 'not met'}] quiet p99 under the ${row} flood: ${fmtUs(p99)} µs (goal <= ${fmtUs(TARGET_P99_US)} µs)\n`)
  }
}

main().catch(err => {
  process.stderr.write(`${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(2)
})
