/**
 * The cluster benchmark: real local quotad clusters (3 and 5 processes over
 * libp2p on loopback) under the same open-loop load traces, against a static
 * even split computed from the same traces.
 *
 * Per workload and cluster size it reports:
 * - overshoot: max over windows of (allowed in the window - limit); must be 0
 *   in hard mode (for token-bucket: the largest proven excess over the
 *   central envelope burst + rate x t);
 * - utilization: allowed / min(demand, limit), summed over the full windows
 *   (the first, partial window with the start-up and the last partial one are
 *   skipped), and the same for a static split (limit / N per node, no
 *   sharing) computed from the recorded per-node per-window demand;
 * - for the moving hot spot: time until the new hot node's admitted rate is
 *   >= 90% of min(its demand, limit) in 100 ms bins (and stays there);
 * - control traffic per node per second: libp2p TCP bytes (from ss), gossip
 *   messages and transfer requests (from each node's status counters);
 * - the latency of a local decision while gossip runs (c=1 probe on node
 *   `a`), interleaved with the same probe against a single-node daemon (no
 *   cluster layer), in the same run.
 *
 * Run: npx tsc -p . && node dist/bench/cluster.js [--quick] [--json FILE] [--help]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import {
  startNode, ssAvailable, tcpDelta, tcpSnapshot, waitForPeers, writeClusterFile, type NodeProc, type TcpSnapshot
} from './lib/cluster-harness.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { LatencyLog, median, percentile, type LatencySummary } from './lib/stats.js'
import { fmtInt, fmtPct, fmtUs, renderTable } from './lib/table.js'
import { intFlag } from '../src/cli/common.js'

const HELP = `usage: node dist/bench/cluster.js [options]

  --quick            ~1.5 min run (5 s per workload, hot spot moves every 2 s)
  --no-idle          skip the idle traffic measurement per cluster size (3 s; --quick 2 s)
  --json FILE        also write settings, per-window figures and results as JSON
  --raw FILE         also write every request (node, sent, received, result, resetMs) as JSON
  --nodes LIST       cluster sizes (default 3,5)
  --gossip-ms MS     cluster gossipIntervalMs (default 250, the shipped default)
  --duration-ms MS   length of one workload's trace (default 18000; --quick 5000)
  --move-ms MS       the hot spot moves this often (default 3000; --quick 2000)
  --limit N          the rules' limit per window (default 200)
  --per-ms MS        the window (default 1000)
  --seed N           seed for Zipf ranks and hot-spot moves (default 1)
  --tick-ms MS       load generator tick (default 5)
  --probe-ms MS      gap between c=1 latency probes (default 10; sides alternate)
  --only LIST        workloads: uniform,zipf,moving,moving-1x,over,tb-zipf (default all)
  --log-level L      quotad log level (default warn)
  --keep-tmp         keep the temp dir (cluster files, data dirs)
`

const WORKLOAD_IDS = ['uniform', 'zipf', 'moving', 'moving-1x', 'over', 'tb-zipf'] as const
type WorkloadId = typeof WORKLOAD_IDS[number]

/** Zipf exponent of the skewed workloads. */
const ZIPF_S = 1.2
/** Total demand of each workload, in multiples of the limit per window. */
const DEMAND: Record<WorkloadId, number> = { uniform: 1.2, zipf: 1.2, moving: 1.2, 'moving-1x': 1.0, over: 2.0, 'tb-zipf': 1.2 }
/** Moving hot spot: the hot node's share of the total demand. */
const HOT_SHARE = 0.7
/** Follow-time bins, and the share of min(demand, limit) a bin must reach. */
const BIN_MS = 100
const FOLLOW_FRACTION = 0.9
/** A followed hot spot must hold the rate this many bins in a row. */
const FOLLOW_BINS = 3
/** The probe key's rule: never exhausted, so every probe is a local decision. */
const PROBE_LIMIT = 1_000_000_000

interface Options {
  quick: boolean
  json: string | undefined
  raw: string | undefined
  nodes: number[]
  gossipMs: number
  durationMs: number
  moveMs: number
  limit: number
  perMs: number
  seed: number
  tickMs: number
  probeMs: number
  only: Set<WorkloadId>
  logLevel: string
  keepTmp: boolean
  idle: boolean
}

function options (argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      json: { type: 'string' },
      raw: { type: 'string' },
      nodes: { type: 'string' },
      'gossip-ms': { type: 'string' },
      'duration-ms': { type: 'string' },
      'move-ms': { type: 'string' },
      limit: { type: 'string' },
      'per-ms': { type: 'string' },
      seed: { type: 'string' },
      'tick-ms': { type: 'string' },
      'probe-ms': { type: 'string' },
      only: { type: 'string' },
      'log-level': { type: 'string' },
      'keep-tmp': { type: 'boolean' },
      'no-idle': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); process.exit(0) }
  const quick = values.quick === true
  const int = intFlag
  const nodes = (values.nodes ?? '3,5').split(',').map(s => int('nodes', s.trim(), 0, 2))
  const only = new Set<WorkloadId>()
  for (const s of (values.only ?? WORKLOAD_IDS.join(',')).split(',')) {
    const id = s.trim() as WorkloadId
    if (!WORKLOAD_IDS.includes(id)) throw new Error(`--only: unknown workload "${s}" (known: ${WORKLOAD_IDS.join(', ')})`)
    only.add(id)
  }
  const perMs = int('per-ms', values['per-ms'], 1000, 100)
  return {
    quick,
    json: values.json,
    raw: values.raw,
    nodes,
    gossipMs: int('gossip-ms', values['gossip-ms'], 250, 10),
    durationMs: int('duration-ms', values['duration-ms'], quick ? 5000 : 18_000, 3 * perMs),
    moveMs: int('move-ms', values['move-ms'], quick ? 2000 : 3000, 500),
    limit: int('limit', values.limit, 200, 10),
    perMs,
    seed: int('seed', values.seed, 1, 0),
    tickMs: int('tick-ms', values['tick-ms'], 5, 1),
    probeMs: int('probe-ms', values['probe-ms'], 10, 1),
    only,
    logLevel: values['log-level'] ?? 'warn',
    keepTmp: values['keep-tmp'] === true,
    idle: values['no-idle'] !== true
  }
}

// ---------------------------------------------------------------------------
// Traces

/** mulberry32: a small seeded PRNG, so a trace can be replayed from its seed. */
function rng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function shuffle<T> (xs: T[], rand: () => number): T[] {
  const a = [...xs]
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

/** Per-node shares of a Zipf(s) distribution whose rank r goes to node perm[r]. */
function zipfShares (n: number, s: number, perm: number[]): number[] {
  const w = Array.from({ length: n }, (_, r) => 1 / Math.pow(r + 1, s))
  const sum = w.reduce((a, x) => a + x, 0)
  const out = new Array<number>(n).fill(0)
  for (let r = 0; r < n; r++) out[perm[r]] = w[r] / sum
  return out
}

interface Move { atMs: number, from: number, to: number }

interface Workload {
  id: WorkloadId
  key: string
  algorithm: 'fixed-window' | 'token-bucket'
  /** Total demand, requests/s. */
  totalRate: number
  description: string
  /** Per-node demand in requests/s, `tMs` after the trace start. */
  rates: (tMs: number) => number[]
  moves: Move[]
}

function buildWorkloads (n: number, opts: Options): Workload[] {
  const rand = rng(opts.seed * 1000 + n)
  const perSec = opts.limit * 1000 / opts.perMs
  const rateOf = (id: WorkloadId): number => DEMAND[id] * perSec
  const names = nodeNames(n)
  const fmtShares = (shares: number[], total: number): string => shares.map((s, i) => `${names[i]} ${(s * total).toFixed(0)}`).join(', ')
  const zipfPerm = shuffle(Array.from({ length: n }, (_, i) => i), rand)
  const zipf = zipfShares(n, ZIPF_S, zipfPerm)
  const out: Workload[] = []
  const fixed = (id: WorkloadId, shares: number[], what: string): Workload => {
    const total = rateOf(id)
    const rates = shares.map(s => s * total)
    return {
      id,
      key: id,
      algorithm: id.startsWith('tb-') ? 'token-bucket' : 'fixed-window',
      totalRate: total,
      description: `${what}, ${DEMAND[id]}x limit = ${total.toFixed(0)}/s: ${fmtShares(shares, total)} /s`,
      rates: () => rates,
      moves: []
    }
  }
  out.push(fixed('uniform', new Array<number>(n).fill(1 / n), 'uniform'))
  out.push(fixed('zipf', zipf, `Zipf s=${ZIPF_S}`))
  // Moving hot spot: HOT_SHARE of the demand on one node, the rest spread evenly; moves every moveMs to another node.
  // Both variants move along the same path.
  const path = [Math.floor(rand() * n)]
  for (let t = opts.moveMs; t < opts.durationMs; t += opts.moveMs) path.push((path[path.length - 1] + 1 + Math.floor(rand() * (n - 1))) % n)
  for (const id of ['moving', 'moving-1x'] as const) {
    const total = rateOf(id)
    const hotRate = HOT_SHARE * total
    const coldRate = (1 - HOT_SHARE) * total / (n - 1)
    const moves: Move[] = path.slice(1).map((to, k) => ({ atMs: (k + 1) * opts.moveMs, from: path[k], to }))
    out.push({
      id,
      key: id,
      algorithm: 'fixed-window',
      totalRate: total,
      description: `moving hot spot, ${DEMAND[id]}x limit = ${total.toFixed(0)}/s: hot node ${hotRate.toFixed(0)}/s, others ${coldRate.toFixed(1)}/s each; ` +
        `hot: ${names[path[0]]}${moves.map(m => ` -> ${names[m.to]}@${m.atMs / 1000}s`).join('')}`,
      rates: (t: number) => {
        let h = path[0]
        for (const m of moves) if (m.atMs <= t) h = m.to
        return Array.from({ length: n }, (_, i) => i === h ? hotRate : coldRate)
      },
      moves
    })
  }
  out.push(fixed('over', zipf, `over the limit, Zipf s=${ZIPF_S}`))
  out.push(fixed('tb-zipf', zipf, `token-bucket rule, Zipf s=${ZIPF_S}`))
  return out.filter(w => opts.only.has(w.id))
}

function nodeNames (n: number): string[] {
  return Array.from({ length: n }, (_, i) => String.fromCharCode(97 + i))
}

function rules (opts: Options): unknown[] {
  const per = `${opts.perMs}ms`
  return [
    ...WORKLOAD_IDS.filter(id => !id.startsWith('tb-')).map(id => ({ name: id, match: id, limit: opts.limit, per, algorithm: 'fixed-window', mode: 'hard' })),
    { name: 'tb-zipf', match: 'tb-zipf', limit: opts.limit, per, algorithm: 'token-bucket', burst: opts.limit, mode: 'hard' },
    { name: 'probe', match: 'probe', limit: PROBE_LIMIT, per: '1s', algorithm: 'fixed-window', mode: 'hard' },
    { name: 'warmup', match: 'warmup', limit: opts.limit, per, algorithm: 'fixed-window', mode: 'hard' }
  ]
}

// ---------------------------------------------------------------------------
// Recording

const PENDING = 0
const ALLOWED = 1
const DENIED = 2
const FAILED = 3

/** One row per request, in send order, in growable typed arrays. */
class Records {
  n = 0
  node = new Uint8Array(1024)
  sendAt = new Float64Array(1024)
  recvAt = new Float64Array(1024)
  resetMs = new Float64Array(1024)
  result = new Uint8Array(1024)
  firstError: string | null = null

  add (node: number, sendAt: number): number {
    if (this.n === this.node.length) this.grow()
    const i = this.n++
    this.node[i] = node
    this.sendAt[i] = sendAt
    this.result[i] = PENDING
    return i
  }

  private grow (): void {
    const cap = this.node.length * 2
    const g = <T extends Uint8Array | Float64Array>(a: T, make: (n: number) => T): T => { const b = make(cap); b.set(a); return b }
    this.node = g(this.node, k => new Uint8Array(k))
    this.sendAt = g(this.sendAt, k => new Float64Array(k))
    this.recvAt = g(this.recvAt, k => new Float64Array(k))
    this.resetMs = g(this.resetMs, k => new Float64Array(k))
    this.result = g(this.result, k => new Uint8Array(k))
  }
}

interface NodeStatus {
  cluster?: {
    counters?: Record<string, number>
    transport?: Record<string, number>
  }
}

interface Snapshot {
  at: number
  statuses: NodeStatus[]
  tcp: TcpSnapshot
  cpu: { bench: number, nodes: number, single: number, machine: number }
}

interface Context {
  opts: Options
  n: number
  names: string[]
  procs: NodeProc[]
  single: NodeProc
  clients: QuotadClient[]
  probeCluster: QuotadClient
  probeSingle: QuotadClient
  mirror: QuotadClient
  pooled: { cluster: LatencyLog, single: LatencyLog }
}

async function snapshot (ctx: Context): Promise<Snapshot> {
  const statuses = await Promise.all(ctx.clients.map(async c => await c.status() as NodeStatus))
  const pids = ctx.procs.map(p => p.pid)
  return {
    at: performance.now(),
    statuses,
    tcp: tcpSnapshot(pids),
    cpu: {
      bench: cpuMs(null),
      nodes: pids.reduce((a, p) => a + cpuMs(p), 0),
      single: cpuMs(ctx.single.pid),
      machine: machineBusyMs()
    }
  }
}

interface RunData {
  records: Records
  t0: number
  t1: number
  probe: { cluster: LatencyLog, single: LatencyLog, errors: number }
  mirrorErrors: number
  tickGaps: number[]
  before: Snapshot
  after: Snapshot
}

/** Wait until the wall clock is `phase` ms into a window. */
async function alignTo (perMs: number, phase: number): Promise<void> {
  const now = Date.now()
  let wait = (phase - (now % perMs) + perMs) % perMs
  if (wait < 200) wait += perMs
  await sleep(wait - 20)
  while (Date.now() % perMs < phase || Date.now() % perMs > phase + 50) await sleep(1)
}

/**
 * Run one trace open-loop: every tick, each node is sent the requests its
 * rate owes since the last tick (fractions carry over), whether or not
 * earlier replies came back. Meanwhile a c=1 probe alternates between node a
 * and the single-node daemon, and node a's load is mirrored to the single-node
 * daemon so both serve the same request stream.
 */
async function runTrace (w: Workload, ctx: Context): Promise<RunData> {
  const { opts, n, clients } = ctx
  const rec = new Records()
  const inflight: Array<Promise<void>> = []
  let mirrorErrors = 0
  await alignTo(opts.perMs, Math.floor(opts.perMs / 2))
  const before = await snapshot(ctx)
  const owed = new Array<number>(n).fill(0)
  const tickGaps: number[] = []
  const t0 = Date.now()
  const p0 = performance.now()
  let last = p0
  let done = false

  const send = (i: number): void => {
    const idx = rec.add(i, Date.now())
    inflight.push(clients[i].acquire(w.key).then(d => {
      rec.recvAt[idx] = Date.now()
      rec.resetMs[idx] = d.resetMs
      rec.result[idx] = d.allowed ? ALLOWED : DENIED
    }, (err: unknown) => {
      rec.recvAt[idx] = Date.now()
      rec.result[idx] = FAILED
      rec.firstError ??= err instanceof Error ? err.message : String(err)
    }))
    if (i === 0) inflight.push(ctx.mirror.acquire(w.key).then(() => {}, () => { mirrorErrors++ }))
  }

  const probe = { cluster: new LatencyLog(1 << 12), single: new LatencyLog(1 << 12), errors: 0 }
  const prober = (async () => {
    let k = 0
    while (!done) {
      await sleep(opts.probeMs)
      if (done) break
      const side = k++ % 2 === 0 ? 'cluster' : 'single'
      const c = side === 'cluster' ? ctx.probeCluster : ctx.probeSingle
      const t = performance.now()
      try {
        await c.acquire('probe')
        const ms = performance.now() - t
        probe[side].push(ms)
        ctx.pooled[side].push(ms)
      } catch {
        probe.errors++
      }
    }
  })()

  await new Promise<void>(resolve => {
    const tick = (): void => {
      const now = performance.now()
      tickGaps.push(now - last)
      const elapsed = now - p0
      const dt = now - last
      last = now
      if (elapsed >= opts.durationMs) { resolve(); return }
      const rates = w.rates(elapsed)
      for (let i = 0; i < n; i++) {
        owed[i] += rates[i] * dt / 1000
        while (owed[i] >= 1) { owed[i] -= 1; send(i) }
      }
      setTimeout(tick, opts.tickMs)
    }
    tick()
  })
  const t1 = Date.now()
  done = true
  await Promise.all(inflight)
  await prober
  const after = await snapshot(ctx)
  return { records: rec, t0, t1, probe, mirrorErrors, tickGaps, before, after }
}

// ---------------------------------------------------------------------------
// Analysis

interface WindowRow { window: number, demand: number[], allowed: number }

interface FollowResult { atMs: number, from: string, to: string, followMs: number, bins: Array<[demand: number, admitted: number, central: number]> }

interface Result {
  workload: WorkloadId
  n: number
  algorithm: string
  description: string
  requests: number
  demandPerSec: number
  allowedPerSec: number
  errors: number
  firstError: string | null
  /** Allowed decisions whose window could not be told from send/receive times and resetMs. */
  ambiguousWindows: number
  fullWindows: number
  utilization: number
  staticUtilization: number
  /** Lowest utilization of one full window. */
  minWindowUtilization: number
  overshoot: number
  overshootWindows: Array<{ window: number, allowed: number, startIso: string }>
  follow: FollowResult[]
  followP50Ms: number
  followMaxMs: number
  perNodePerSec: {
    wireOutBytes: number
    wireInBytes: number
    wireOutBytesMax: number
    gossipPublished: number
    gossipReceived: number
    requestsOut: number
    requestsIn: number
    wantsSent: number
    grantsApplied: number
    tokensMoved: number
  }
  latency: { cluster: LatencySummary, single: LatencySummary, probeErrors: number }
  cpuPct: { bench: number, nodes: number, single: number, other: number }
  tickGapMs: { p99: number, max: number }
  mirrorErrors: number
  windows: WindowRow[]
}

function delta (a: Record<string, number> | undefined, b: Record<string, number> | undefined, k: string): number {
  return (b?.[k] ?? 0) - (a?.[k] ?? 0)
}

function analyze (w: Workload, ctx: Context, run: RunData): Result {
  const { opts, n, names } = ctx
  const { records: r, t0, t1 } = run
  const per = opts.perMs
  const limit = opts.limit
  const elapsedS = (t1 - t0) / 1000
  let errors = 0
  let allowedTotal = 0
  for (let i = 0; i < r.n; i++) {
    if (r.result[i] === FAILED) errors++
    else if (r.result[i] === ALLOWED) allowedTotal++
  }
  const firstFull = Math.floor(t0 / per) + 1
  const lastFull = Math.floor(t1 / per) - 1
  const res: Result = {
    workload: w.id,
    n,
    algorithm: w.algorithm,
    description: w.description,
    requests: r.n,
    demandPerSec: r.n / elapsedS,
    allowedPerSec: allowedTotal / elapsedS,
    errors,
    firstError: r.firstError,
    ambiguousWindows: 0,
    fullWindows: Math.max(0, lastFull - firstFull + 1),
    utilization: NaN,
    staticUtilization: NaN,
    minWindowUtilization: NaN,
    overshoot: 0,
    overshootWindows: [],
    follow: [],
    followP50Ms: NaN,
    followMaxMs: NaN,
    perNodePerSec: traffic(ctx, run),
    latency: { cluster: run.probe.cluster.summary(), single: run.probe.single.summary(), probeErrors: run.probe.errors },
    cpuPct: cpuPct(run),
    tickGapMs: { p99: percentile([...run.tickGaps].sort((a, b) => a - b), 0.99), max: Math.max(...run.tickGaps) },
    mirrorErrors: run.mirrorErrors,
    windows: []
  }
  if (w.algorithm === 'fixed-window') fixedWindow(res, r, n, per, limit, firstFull, lastFull)
  else tokenBucket(res, r, n, per, limit, firstFull, lastFull)
  if (w.moves.length > 0) {
    const central = centralAdmits(r, per, limit)
    res.follow = w.moves.map((m, k) => follow(r, central, t0 + m.atMs, k + 1 < w.moves.length ? t0 + w.moves[k + 1].atMs : t1, m, names))
    const fs = res.follow.map(f => f.followMs)
    res.followP50Ms = median(fs)
    res.followMaxMs = Math.max(...fs)
  }
  return res
}

function fixedWindow (res: Result, r: Records, n: number, per: number, limit: number, firstFull: number, lastFull: number): void {
  const windows = new Map<number, WindowRow>()
  const row = (wi: number): WindowRow => {
    let x = windows.get(wi)
    if (x === undefined) { x = { window: wi, demand: new Array<number>(n).fill(0), allowed: 0 }; windows.set(wi, x) }
    return x
  }
  for (let i = 0; i < r.n; i++) {
    row(Math.floor(r.sendAt[i] / per)).demand[r.node[i]]++
    if (r.result[i] !== ALLOWED) continue
    // The decision was taken at some ms in [sendAt, recvAt] (same clock), and its window ends at that ms + resetMs.
    const lo = Math.ceil((r.sendAt[i] + r.resetMs[i]) / per)
    const hi = Math.floor((r.recvAt[i] + r.resetMs[i]) / per)
    let end = lo
    if (lo !== hi) {
      res.ambiguousWindows++
      end = Math.round((r.recvAt[i] + r.resetMs[i]) / per)
    }
    row(end - 1).allowed++
  }
  const sorted = [...windows.values()].sort((a, b) => a.window - b.window)
  res.windows = sorted
  let used = 0
  let ideal = 0
  let stat = 0
  let minU = Infinity
  const share = Math.floor(limit / n)
  for (const x of sorted) {
    if (x.allowed > limit) {
      res.overshoot = Math.max(res.overshoot, x.allowed - limit)
      res.overshootWindows.push({ window: x.window, allowed: x.allowed, startIso: new Date(x.window * per).toISOString() })
    }
    if (x.window < firstFull || x.window > lastFull) continue
    const demand = x.demand.reduce((a, d) => a + d, 0)
    const cap = Math.min(demand, limit)
    used += x.allowed
    ideal += cap
    for (const d of x.demand) stat += Math.min(d, share)
    if (cap > 0) minU = Math.min(minU, x.allowed / cap)
  }
  res.utilization = used / ideal
  res.staticUtilization = stat / ideal
  res.minWindowUtilization = minU
}

/**
 * Token bucket (rate limit/per, burst = limit). Utilization against an exact
 * central token bucket run on the same merged trace; the static split is one
 * bucket per node with burst/N and rate/N. Overshoot: the largest proven
 * excess of admissions over burst + rate x t in any interval, where an
 * admission is only known to lie in [sendAt, recvAt + 1 ms].
 */
function tokenBucket (res: Result, r: Records, n: number, per: number, limit: number, firstFull: number, lastFull: number): void {
  const rate = limit / per
  const burst = limit
  const from = firstFull * per
  const to = (lastFull + 1) * per
  const inRange = (t: number): boolean => t >= from && t < to
  const sim = (capacity: number, rt: number) => {
    let tokens = capacity
    let last = r.sendAt[0] ?? 0
    return (t: number): boolean => {
      tokens = Math.min(capacity, tokens + (t - last) * rt)
      last = t
      if (tokens >= 1) { tokens -= 1; return true }
      return false
    }
  }
  const central = sim(burst, rate)
  const locals = Array.from({ length: n }, () => sim(Math.floor(burst / n), rate / n))
  let quotad = 0
  let exact = 0
  let stat = 0
  // Envelope check over allowed decisions in send order (index j counts admissions).
  let j = 0
  let maxRecv = -Infinity
  let minStart = Infinity
  let excess = -Infinity
  for (let i = 0; i < r.n; i++) {
    const t = r.sendAt[i]
    const c = central(t)
    const s = locals[r.node[i]](t)
    const ok = r.result[i] === ALLOWED
    if (inRange(t)) {
      if (c) exact++
      if (s) stat++
      if (ok) quotad++
    }
    if (!ok) continue
    minStart = Math.min(minStart, j - rate * t)
    maxRecv = Math.max(maxRecv, r.recvAt[i] + 1)
    excess = Math.max(excess, (j - rate * maxRecv) - minStart + 1 - burst)
    j++
  }
  res.utilization = quotad / exact
  res.staticUtilization = stat / exact
  res.overshoot = excess > 1e-6 ? Math.ceil(excess) : 0
  if (res.overshoot > 0) res.overshootWindows.push({ window: -1, allowed: res.overshoot, startIso: 'token-bucket envelope' })
}

/**
 * What an exact central fixed-window limiter admits of the merged trace: in
 * send order, each window's first `limit` requests.
 */
function centralAdmits (r: Records, per: number, limit: number): Uint8Array {
  const out = new Uint8Array(r.n)
  let window = -1
  let used = 0
  for (let i = 0; i < r.n; i++) {
    const w = Math.floor(r.sendAt[i] / per)
    if (w !== window) { window = w; used = 0 }
    if (used < limit) { used++; out[i] = 1 }
  }
  return out
}

/**
 * After a move, per BIN_MS bin of the new hot node's requests (by send time):
 * demand, admitted, and what the central limiter would admit of them (that
 * is min(demand, limit) per bin, except where the window's stock is used up:
 * then it admits nothing either, and the bin is skipped). Followed: the
 * first bin of FOLLOW_BINS (not skipped) in a row that admit >=
 * FOLLOW_FRACTION of the central figure.
 */
function follow (r: Records, central: Uint8Array, at: number, until: number, m: Move, names: string[]): FollowResult {
  const nb = Math.floor((until - at) / BIN_MS)
  const bins: Array<[number, number, number]> = Array.from({ length: nb }, () => [0, 0, 0])
  for (let i = 0; i < r.n; i++) {
    if (r.node[i] !== m.to) continue
    const b = Math.floor((r.sendAt[i] - at) / BIN_MS)
    if (b < 0 || b >= nb) continue
    bins[b][0]++
    if (r.result[i] === ALLOWED) bins[b][1]++
    bins[b][2] += central[i]
  }
  // Bins where the central limiter admits nothing of this node (its window's stock is gone) neither count nor break a run.
  const real = bins.map((b, k) => [k, b[1] >= FOLLOW_FRACTION * b[2]] as const).filter((_, k) => bins[k][2] > 0)
  let followMs = Infinity
  for (let i = 0; i < real.length; i++) {
    if (real.slice(i, i + FOLLOW_BINS).every(([, ok]) => ok)) { followMs = real[i][0] * BIN_MS; break }
  }
  return { atMs: at, from: names[m.from], to: names[m.to], followMs, bins }
}

function traffic (ctx: Context, run: { before: Snapshot, after: Snapshot }): Result['perNodePerSec'] {
  const s = (run.after.at - run.before.at) / 1000
  const n = ctx.n
  const tcp = tcpDelta(run.before.tcp, run.after.tcp)
  let out = 0
  let inb = 0
  let outMax = 0
  for (const p of ctx.procs) {
    const d = tcp.get(p.pid)
    out += d?.out ?? 0
    inb += d?.in ?? 0
    outMax = Math.max(outMax, d?.out ?? 0)
  }
  const sum = (f: (a: NodeStatus, b: NodeStatus) => number): number => {
    let t = 0
    for (let i = 0; i < n; i++) t += f(run.before.statuses[i], run.after.statuses[i])
    return t / n / s
  }
  const tr = (k: string) => sum((a, b) => delta(a.cluster?.transport, b.cluster?.transport, k))
  const co = (k: string) => sum((a, b) => delta(a.cluster?.counters, b.cluster?.counters, k))
  return {
    wireOutBytes: ssAvailable() ? out / n / s : NaN,
    wireInBytes: ssAvailable() ? inb / n / s : NaN,
    wireOutBytesMax: ssAvailable() ? outMax / s : NaN,
    gossipPublished: tr('published'),
    gossipReceived: tr('received'),
    requestsOut: tr('requestsOut'),
    requestsIn: tr('requestsIn'),
    wantsSent: co('wantsSent'),
    grantsApplied: co('grantsApplied'),
    tokensMoved: co('tokensOut')
  }
}

function cpuPct (run: RunData): Result['cpuPct'] {
  const ms = run.after.at - run.before.at
  const b = (run.after.cpu.bench - run.before.cpu.bench) / ms * 100
  const nodes = (run.after.cpu.nodes - run.before.cpu.nodes) / ms * 100
  const single = (run.after.cpu.single - run.before.cpu.single) / ms * 100
  const machine = (run.after.cpu.machine - run.before.cpu.machine) / ms * 100
  return { bench: b, nodes, single, other: Math.max(0, machine - b - nodes - single) }
}

/** Every request of a run, column-wise (result: 1 allowed, 2 denied, 3 failed). */
function rawRecords (w: Workload, n: number, run: RunData): Record<string, unknown> {
  const r = run.records
  return {
    n,
    workload: w.id,
    description: w.description,
    moves: w.moves,
    t0: run.t0,
    t1: run.t1,
    node: Array.from(r.node.subarray(0, r.n)),
    sendAt: Array.from(r.sendAt.subarray(0, r.n)),
    recvAt: Array.from(r.recvAt.subarray(0, r.n)),
    result: Array.from(r.result.subarray(0, r.n)),
    resetMs: Array.from(r.resetMs.subarray(0, r.n))
  }
}

// ---------------------------------------------------------------------------
// Output

const LABEL: Record<WorkloadId, string> = {
  uniform: 'uniform 1.2x',
  zipf: 'zipf 1.2x',
  moving: 'moving hot 1.2x',
  'moving-1x': 'moving hot 1.0x',
  over: 'over: zipf 2x',
  'tb-zipf': 'token-bucket zipf 1.2x'
}

function fmtMs (n: number): string {
  return Number.isFinite(n) ? `${Math.round(n)}` : n === Infinity ? 'never' : '-'
}

function fmtUtil (n: number): string {
  return Number.isFinite(n) ? `${(n * 100).toFixed(1)}%` : '-'
}

function fmtTraffic (t: Result['perNodePerSec']): string {
  return `per node ${fmtInt(t.wireOutBytes)} wire B/s out, ${t.gossipPublished.toFixed(1)} gossip msg/s published, ${t.gossipReceived.toFixed(1)} received, ` +
    `${t.requestsOut.toFixed(1)} transfer req/s`
}

function mainTable (rs: Result[]): string {
  const head = ['workload', 'quotad util', 'static util', 'overshoot', 'follow p50/max ms', 'wire B/s', 'gossip msg/s', 'xfer req/s', 'p50/p99 µs', 'p50/p99 µs']
  const rows = rs.map(r => [
    LABEL[r.workload],
    fmtUtil(r.utilization),
    fmtUtil(r.staticUtilization),
    String(r.overshoot) + (r.overshoot > 0 ? ' !!' : ''),
    r.follow.length === 0 ? '-' : `${fmtMs(r.followP50Ms)} / ${fmtMs(r.followMaxMs)}`,
    fmtInt(r.perNodePerSec.wireOutBytes),
    `${r.perNodePerSec.gossipPublished.toFixed(1)} / ${r.perNodePerSec.gossipReceived.toFixed(1)}`,
    r.perNodePerSec.requestsOut.toFixed(1),
    `${fmtUs(r.latency.cluster.p50Us)} / ${fmtUs(r.latency.cluster.p99Us)}`,
    `${fmtUs(r.latency.single.p50Us)} / ${fmtUs(r.latency.single.p99Us)}`
  ])
  return renderTable(head, rows, [['', 4], ['', 1], ['per node (mean)', 3], ['decision, N-node', 1], ['1-node', 1]])
}

function detailTable (rs: Result[]): string {
  const head = ['workload', 'demand/s', 'allowed/s', 'min win util', 'full wins', 'wants/s', 'tokens moved/s', 'wire B/s max', 'bench', 'nodes', '1-node', 'other', 'tick p99/max ms', 'errors']
  const rows = rs.map(r => [
    LABEL[r.workload],
    fmtInt(r.demandPerSec),
    fmtInt(r.allowedPerSec),
    fmtUtil(r.minWindowUtilization),
    String(r.fullWindows),
    r.perNodePerSec.wantsSent.toFixed(1),
    r.perNodePerSec.tokensMoved.toFixed(1),
    fmtInt(r.perNodePerSec.wireOutBytesMax),
    fmtPct(r.cpuPct.bench),
    fmtPct(r.cpuPct.nodes),
    fmtPct(r.cpuPct.single),
    fmtPct(r.cpuPct.other),
    `${r.tickGapMs.p99.toFixed(1)} / ${r.tickGapMs.max.toFixed(1)}`,
    String(r.errors + r.mirrorErrors + r.latency.probeErrors) + (r.ambiguousWindows > 0 ? ` (${r.ambiguousWindows} ambig.)` : '')
  ])
  return renderTable(head, rows, [['', 5], ['per node (mean)', 2], ['', 1], ['CPU, % of one core', 4], ['', 2]])
}

interface Target { name: string, value: string, goal: string, met: boolean | null }

function targets (all: Array<{ n: number, results: Result[], pooled: { cluster: LatencySummary, single: LatencySummary } }>): Target[] {
  const out: Target[] = []
  for (const { n, results, pooled } of all) {
    for (const id of ['zipf', 'moving', 'moving-1x'] as const) {
      const r = results.find(x => x.workload === id)
      if (r === undefined) continue
      out.push({
        name: `N=${n} ${LABEL[id]}: utilization (static split: ${fmtUtil(r.staticUtilization)})`,
        value: fmtUtil(r.utilization),
        goal: '>= 95%',
        met: Number.isFinite(r.utilization) ? r.utilization >= 0.95 : null
      })
    }
    for (const m of results.filter(x => x.follow.length > 0)) {
      out.push({ name: `N=${n} ${LABEL[m.workload]}: moved hot spot followed (max over ${m.follow.length} moves)`, value: `${fmtMs(m.followMaxMs)} ms`, goal: '<= 1000 ms', met: m.followMaxMs <= 1000 })
    }
    const ratio = pooled.cluster.p99Us / pooled.single.p99Us
    out.push({
      name: `N=${n} decision p99 under gossip vs single node (all workloads pooled; ${pooled.cluster.n}/${pooled.single.n} probes)`,
      value: `${fmtUs(pooled.cluster.p99Us)} vs ${fmtUs(pooled.single.p99Us)} µs (${((ratio - 1) * 100).toFixed(0)}%)`,
      goal: '<= +20%',
      met: Number.isFinite(ratio) ? ratio <= 1.2 : null
    })
    for (const r of results) {
      if (r.overshoot > 0) out.push({ name: `N=${n} ${LABEL[r.workload]}: overshoot`, value: String(r.overshoot), goal: '0', met: false })
    }
  }
  return out
}

// ---------------------------------------------------------------------------

async function main (): Promise<void> {
  const opts = options(process.argv.slice(2))
  const machine = machineInfo()
  printMachine(machine)
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'quotad-cluster-bench-'))
  const started: NodeProc[] = []
  const clients: QuotadClient[] = []
  const results: Array<{ n: number, results: Result[], pooled: { cluster: LatencySummary, single: LatencySummary }, idle: Result['perNodePerSec'] | null }> = []
  const t0 = performance.now()
  let critical = false
  const raw: Array<Record<string, unknown>> = []
  try {
    process.stdout.write(
      `settings: cluster sizes ${opts.nodes.join(', ')}; gossipIntervalMs ${opts.gossipMs} (tick ${Math.min(50, opts.gossipMs)} ms, defaults otherwise: horizon 1000 ms, ` +
      `rate half-life 500 ms, low water 0.2); seed ${opts.seed}\n` +
      `          rules: one exact key per workload, fixed-window hard, limit ${opts.limit} per ${opts.perMs} ms ` +
      `(token-bucket row: rate ${opts.limit}/${opts.perMs} ms, burst ${opts.limit}, hard); probe key: fixed-window ${PROBE_LIMIT} per 1 s\n` +
      `          each workload: ${opts.durationMs / 1000} s open-loop trace starting mid-window, ${opts.tickMs} ms ticks, one QuotadClient per node; ` +
      `hot spot moves every ${opts.moveMs / 1000} s\n` +
      `          latency: c=1 acquire on the probe key every ${opts.probeMs} ms, alternating node a (which also takes its share of the load) and a ` +
      `single-node daemon (no cluster layer) that is sent a mirror of node a's load; separate connections\n` +
      `          static split: computed from the recorded trace, per node per window min(demand, floor(limit/N)) ` +
      `(token-bucket: one bucket per node with burst/N and rate/N)\n` +
      `          load: a few hundred req/s in total, kept low on purpose: ${Math.max(...opts.nodes)} quotad processes + the bench share ${os.cpus().length} cores\n` +
      `          wire bytes: TCP bytes acked per node process from ss (all libp2p traffic: gossipsub incl. heartbeats, transfers, noise, yamux); ` +
      `${ssAvailable() ? 'ss available' : 'ss NOT available: no byte figures'}\n\n`)

    // The single-node daemon: same rules, no cluster layer.
    const singleDir = path.join(tmp, 'single')
    mkdirSync(singleDir)
    const singleFile = await writeClusterFile(singleDir, 'bench-single', ['s'], rules(opts), opts.gossipMs)
    const single = await startNode(singleFile, 's', opts.logLevel)
    started.push(single)
    const probeSingle = await QuotadClient.connect({ socketPath: single.socketPath, timeoutMs: 5000, reconnect: false })
    const mirror = await QuotadClient.connect({ socketPath: single.socketPath, timeoutMs: 5000, reconnect: false })
    clients.push(probeSingle, mirror)

    for (const n of opts.nodes) {
      const names = nodeNames(n)
      const dir = path.join(tmp, `n${n}`)
      mkdirSync(dir)
      const file = await writeClusterFile(dir, `bench${n}`, names, rules(opts), opts.gossipMs)
      const ts = performance.now()
      const procs = await Promise.all(names.map(async name => await startNode(file, name, opts.logLevel)))
      started.push(...procs)
      const cl = await Promise.all(procs.map(async p => await QuotadClient.connect({ socketPath: p.socketPath, timeoutMs: 5000, reconnect: false })))
      clients.push(...cl)
      await waitForPeers(cl, n - 1)
      const probeCluster = await QuotadClient.connect({ socketPath: procs[0].socketPath, timeoutMs: 5000, reconnect: false })
      clients.push(probeCluster)
      process.stdout.write(`N=${n}: ${n} nodes up and agreeing in ${((performance.now() - ts) / 1000).toFixed(1)} s (pids ${procs.map(p => p.pid).join(', ')})\n`)
      // Warm up both probe paths (JIT, connections).
      for (let i = 0; i < 200; i++) { await probeCluster.acquire('probe'); await probeSingle.acquire('probe') }
      const pooled = { cluster: new LatencyLog(1 << 14), single: new LatencyLog(1 << 14) }
      const ctx: Context = { opts, n, names, procs, single, clients: cl, probeCluster, probeSingle, mirror, pooled }
      let idle: Result['perNodePerSec'] | null = null
      if (opts.idle) {
        const before = await snapshot(ctx)
        await sleep(opts.quick ? 2000 : 3000)
        idle = traffic(ctx, { before, after: await snapshot(ctx) })
        process.stdout.write(`  idle ${opts.quick ? 2 : 3} s (no load, no probes): ${fmtTraffic(idle)}\n`)
      }
      // Warm up the decision and transfer paths (JIT) with the Zipf trace on a key of its own; not reported.
      const zipfTrace = buildWorkloads(n, { ...opts, only: new Set(['zipf']) })[0]
      const warmMs = opts.quick ? 1000 : 2000
      await runTrace({ ...zipfTrace, key: 'warmup' }, { ...ctx, opts: { ...opts, durationMs: warmMs }, pooled: { cluster: new LatencyLog(), single: new LatencyLog() } })
      const rs: Result[] = []
      for (const w of buildWorkloads(n, opts)) {
        process.stdout.write(`  ${w.id}: ${w.description}\n`)
        const run = await runTrace(w, ctx)
        const r = analyze(w, ctx, run)
        rs.push(r)
        if (opts.raw !== undefined) raw.push(rawRecords(w, n, run))
        process.stdout.write(`    util ${fmtUtil(r.utilization)} (static ${fmtUtil(r.staticUtilization)}), overshoot ${r.overshoot}` +
          (r.follow.length > 0 ? `, follow ${r.follow.map(f => fmtMs(f.followMs)).join('/')} ms` : '') +
          `, errors ${r.errors}\n`)
        for (const p of procs) {
          if (p.exited() !== null) throw new Error(`node ${p.name} died: ${p.exited() ?? ''}\n${p.output()}`)
        }
        if (r.overshoot > 0) {
          critical = true
          process.stdout.write(`    CRITICAL: overshoot ${r.overshoot} in hard mode: N=${n}, workload ${w.id}, seed ${opts.seed}, trace start ${new Date(run.t0).toISOString()}, ` +
            `windows ${JSON.stringify(r.overshootWindows)}\n`)
        }
      }
      results.push({ n, results: rs, pooled: { cluster: pooled.cluster.summary(), single: pooled.single.summary() }, idle })
      await Promise.all(cl.map(c => c.close()))
      await probeCluster.close()
      const warnings = procs.map(p => ({ name: p.name, lines: p.output().split('\n').filter(l => l.trim().length > 0) }))
      await Promise.all(procs.map(p => p.stop()))
      for (const w of warnings) {
        if (w.lines.length > 0) process.stdout.write(`  node ${w.name} logged ${w.lines.length} line(s) at ${opts.logLevel}+, last: ${w.lines[w.lines.length - 1].slice(0, 300)}\n`)
      }
      process.stdout.write('\n')
    }

    for (const { n, results: rs, pooled, idle } of results) {
      process.stdout.write(`\nN=${n} nodes (gossip ${opts.gossipMs} ms; limit ${opts.limit} per ${opts.perMs} ms; ${rs[0]?.fullWindows ?? 0} full windows per workload):\n`)
      process.stdout.write(mainTable(rs))
      if (idle !== null) process.stdout.write(`  idle cluster (no load): ${fmtTraffic(idle)}\n`)
      process.stdout.write(`  decision latency pooled over the workloads: N-node p50/p99 ${fmtUs(pooled.cluster.p50Us)} / ${fmtUs(pooled.cluster.p99Us)} µs ` +
        `(n=${pooled.cluster.n}), 1-node ${fmtUs(pooled.single.p50Us)} / ${fmtUs(pooled.single.p99Us)} µs (n=${pooled.single.n})\n`)
      process.stdout.write('details:\n')
      process.stdout.write(detailTable(rs))
    }
    process.stdout.write(
      '\ncolumns: util = allowed / min(demand, limit) over the full windows (token-bucket: / what an exact central token bucket admits on the same trace);\n' +
      '  static util = the static even split on the same trace (computed from the recorded demand, not run);\n' +
      '  overshoot = max over all windows of allowed - limit (must be 0; token-bucket: proven excess over burst + rate x t);\n' +
      `  follow = after each move, ms until the new hot node admits >= ${FOLLOW_FRACTION * 100}% of min(demand, limit) per ${BIN_MS} ms bin for ${FOLLOW_BINS} bins in a row\n` +
      '    (0: never below; the target per bin is what an exact central limiter admits of that node\'s requests, i.e. min(demand, limit) until the window\'s stock is gone);\n' +
      '  wire B/s = TCP bytes sent per node process (ss; every libp2p byte: gossip and transfers are multiplexed on one connection, so not split);\n' +
      '  gossip msg/s = gossip messages published / received per node (transport counters); xfer req/s = transfer requests (wants, grants) sent per node;\n' +
      '  p50/p99 µs = c=1 acquire round trip on node a vs on a single-node daemon, probes interleaved, same machine load.\n')

    const ts = targets(results)
    process.stdout.write('\ntargets:\n')
    for (const t of ts) process.stdout.write(`  ${t.met === null ? '[ ? ]' : t.met ? '[met]' : '[MISSED]'} ${t.name}: ${t.value} (goal ${t.goal})\n`)
    if (critical) process.stdout.write('\nCRITICAL: hard-mode overshoot seen; see the lines marked CRITICAL above\n')
    process.stdout.write(`\ntotal time ${((performance.now() - t0) / 1000).toFixed(0)} s\n`)

    if (opts.raw !== undefined) {
      writeFileSync(opts.raw, JSON.stringify({ settings: { ...opts, only: [...opts.only] }, runs: raw }) + '\n')
      process.stdout.write(`wrote ${opts.raw}\n`)
    }
    if (opts.json !== undefined) {
      writeFileSync(opts.json, JSON.stringify({
        machine,
        settings: { ...opts, only: [...opts.only], rules: rules(opts), demand: DEMAND, zipfS: ZIPF_S, hotShare: HOT_SHARE, binMs: BIN_MS, followFraction: FOLLOW_FRACTION, followBins: FOLLOW_BINS },
        results,
        targets: ts
      }, (_k, v: unknown) => typeof v === 'number' && !Number.isFinite(v) ? String(v) : v, 2) + '\n')
      process.stdout.write(`wrote ${opts.json}\n`)
    }
  } finally {
    await Promise.all(clients.map(c => c.close().catch(() => {})))
    await Promise.all(started.map(p => p.stop()))
    if (!opts.keepTmp) rmSync(tmp, { recursive: true, force: true })
    else process.stdout.write(`kept ${tmp}\n`)
  }
  if (critical) process.exitCode = 2
}

main().catch(err => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})
