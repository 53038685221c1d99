/**
 * Envoy's Rate Limit Service beside the Unix-socket protocol: decisions/s and
 * p50/p99 latency of `ShouldRateLimit` (gRPC over a Unix socket, one
 * descriptor per call, @grpc/grpc-js client on Envoy's protos) and of
 * `acquire` (the Unix socket, @quotad/client), against one real daemon
 * process, in the same run.
 *
 * Both sides decide on 1,000 keys visited in a cycle, under limits no run
 * reaches (every decision is an admission): the socket's glob rule `k:*`, and
 * the envoy section's descriptor `k` (its own glob rule, a bucket per value).
 * Workloads: C closed-loop workers (C = 1, 16, 64), one decision per round
 * trip; the RLS side shares one gRPC channel (HTTP/2 streams), as one Envoy
 * worker does, and the socket side one connection.
 *
 * Method: one warm-up run per cell, then trials alternating socket / RLS (so
 * drift on a noisy machine hits both alike); each number printed is the
 * median over the trials. See bench/README.md.
 *
 * Run: npm run build && node dist/bench/rls.js [--quick] [--json FILE]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { QuotadClient } from '@quotad/client'
import { RlsClient } from '../src/envoy/rls-client.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { runTrial, type Operation, type TrialResult } from './lib/load.js'
import { summarize, type Summary } from './lib/report.js'
import { startDaemonProcess, writeBenchCluster } from './lib/quotad-target.js'
import { fmtInt, fmtRatio, fmtUs, renderTable } from './lib/table.js'
import { intFlag } from '../src/cli/common.js'

const HELP = `usage: node dist/bench/rls.js [options]

  --quick            ~20 s run (short trials) instead of ~1 min
  --trials N         trials per cell and side (default 5; --quick 3)
  --trial-ms MS      length of one trial (default 1500; --quick 500)
  --warmup-ms MS     untimed run before each cell (default 500; --quick 200)
  --json FILE        also write every trial and the medians as JSON
`

const KEYS = 1000
const CONCURRENCIES = [1, 16, 64]
/** Limits no run reaches: every decision is an admission, so both sides do the same work. */
const LIMIT = 1_000_000_000

interface Row { c: number, socket: Summary, rls: Summary, trials: { socket: TrialResult[], rls: TrialResult[] } }

function cycle (n: number): () => number {
  let i = 0
  return () => { const k = i; i = i + 1 === n ? 0 : i + 1; return k }
}

/** The daemon's CPU time per decision, in µs: its CPU share of one core over the decisions it made. */
function cpuPerDecisionUs (s: Summary): number {
  return s.serverCpuPct / 100 * 1e6 / s.decisionsPerSec
}

async function main (): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      trials: { type: 'string' },
      'trial-ms': { type: 'string' },
      'warmup-ms': { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); return }
  const quick = values.quick === true
  const trials = intFlag('trials', values.trials, quick ? 3 : 5, 1)
  const trialMs = intFlag('trial-ms', values['trial-ms'], quick ? 500 : 1500, 50)
  const warmupMs = intFlag('warmup-ms', values['warmup-ms'], quick ? 200 : 500, 0)

  const machine = machineInfo()
  printMachine(machine)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'qd-rls-'))
  const cluster = await writeBenchCluster(dir, [{ name: 'socket', match: 'k:*', limit: LIMIT, per: '1d', algorithm: 'fixed-window' }])
  const grpc = `unix:${path.join(dir, 'rls.sock')}`
  const raw = cluster.raw as { nodes: Array<Record<string, unknown>>, envoy?: unknown }
  raw.nodes[0].grpc = grpc
  raw.envoy = { domains: [{ domain: 'bench', descriptors: [{ key: 'k', rate_limit: { unit: 'day', requests_per_unit: LIMIT } }] }] }
  writeFileSync(cluster.file, JSON.stringify(raw, null, 2) + '\n')
  const target = await startDaemonProcess(cluster)
  const socket = await QuotadClient.connect({ socketPath: cluster.socketPath, timeoutMs: 30_000 })
  const rls = new RlsClient(grpc)
  const keys = Array.from({ length: KEYS }, (_, i) => String(i))
  const nextSocket = cycle(KEYS)
  const nextRls = cycle(KEYS)
  const socketOp: Operation = async () => (await socket.acquire(`k:${keys[nextSocket()]}`)).allowed ? 0 : 1
  const rlsOp: Operation = async () => {
    const r = await rls.shouldRateLimit({ domain: 'bench', descriptors: [{ entries: [{ key: 'k', value: keys[nextRls()] }] }] })
    return r.overall_code === 'OK' ? 0 : 1
  }
  const trial = async (op: Operation, c: number, ms: number): Promise<TrialResult> =>
    await runTrial({ concurrency: c, durationMs: ms, itemsPerOp: 1, op, serverPid: target.pid })

  const rows: Row[] = []
  try {
    for (const c of CONCURRENCIES) {
      await trial(socketOp, c, warmupMs)
      await trial(rlsOp, c, warmupMs)
      const s: TrialResult[] = []
      const r: TrialResult[] = []
      for (let i = 0; i < trials; i++) {
        s.push(await trial(socketOp, c, trialMs))
        r.push(await trial(rlsOp, c, trialMs))
      }
      const row = { c, socket: summarize(s), rls: summarize(r), trials: { socket: s, rls: r } }
      rows.push(row)
      process.stderr.write(`c=${c}: socket ${fmtInt(row.socket.decisionsPerSec)}/s, RLS ${fmtInt(row.rls.decisionsPerSec)}/s\n`)
    }
  } finally {
    await socket.close()
    rls.close()
    await target.stop()
    rmSync(dir, { recursive: true, force: true })
  }

  process.stdout.write(`\n${trials} trials of ${trialMs} ms per cell and side, medians; ${KEYS} keys; every decision admitted\n\n`)
  process.stdout.write(renderTable(
    ['workload', 'decisions/s', 'p50 µs', 'p99 µs', 'daemon CPU µs', 'decisions/s', 'p50 µs', 'p99 µs', 'daemon CPU µs', 'RLS/socket', 'errors'],
    rows.map(r => [
      `c=${r.c}`,
      fmtInt(r.socket.decisionsPerSec), fmtUs(r.socket.p50Us), fmtUs(r.socket.p99Us), fmtUs(cpuPerDecisionUs(r.socket)),
      fmtInt(r.rls.decisionsPerSec), fmtUs(r.rls.p50Us), fmtUs(r.rls.p99Us), fmtUs(cpuPerDecisionUs(r.rls)),
      fmtRatio(r.rls.decisionsPerSec / r.socket.decisionsPerSec),
      String(r.socket.errors + r.rls.errors)
    ]),
    [['', 1], ['Unix socket (acquire)', 4], ['Envoy RLS (gRPC, unix)', 4], ['', 2]]
  ))
  process.stdout.write('daemon CPU µs: the daemon process\'s CPU time per decision (user + system), the cost on the node whatever the client\n')
  const errors = rows.flatMap(r => [r.socket.firstError, r.rls.firstError]).filter(e => e !== null)
  if (errors.length > 0) process.stdout.write(`first error: ${errors[0]}\n`)
  if (values.json !== undefined) {
    writeFileSync(values.json, JSON.stringify({ machine, trials, trialMs, keys: KEYS, rows }, null, 2) + '\n')
  }
}

main().catch(err => {
  process.stderr.write(`${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
