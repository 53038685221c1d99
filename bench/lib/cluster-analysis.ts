/**
 * bench/cluster.ts: what a run's records say (per-window overshoot and
 * utilization against a static split, follow times, traffic, CPU).
 */
import { ssAvailable, tcpDelta } from './cluster-harness.js'
import { ALLOWED, BIN_MS, type Context, FAILED, FOLLOW_BINS, FOLLOW_FRACTION, type Move, type NodeStatus, Records, type RunData, type Snapshot, type Workload, type WorkloadId } from './cluster-trace.js'
import { type LatencySummary, median, percentile } from './stats.js'

// ---------------------------------------------------------------------------
// Analysis

export interface WindowRow { window: number, demand: number[], allowed: number }

export interface FollowResult { atMs: number, from: string, to: string, followMs: number, bins: Array<[demand: number, admitted: number, central: number]> }

export interface Result {
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

export function delta (a: Record<string, number> | undefined, b: Record<string, number> | undefined, k: string): number {
  return (b?.[k] ?? 0) - (a?.[k] ?? 0)
}

export function analyze (w: Workload, ctx: Context, run: RunData): Result {
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

export function fixedWindow (res: Result, r: Records, n: number, per: number, limit: number, firstFull: number, lastFull: number): void {
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
export function tokenBucket (res: Result, r: Records, n: number, per: number, limit: number, firstFull: number, lastFull: number): void {
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
export function centralAdmits (r: Records, per: number, limit: number): Uint8Array {
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
export function follow (r: Records, central: Uint8Array, at: number, until: number, m: Move, names: string[]): FollowResult {
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

export function traffic (ctx: Context, run: { before: Snapshot, after: Snapshot }): Result['perNodePerSec'] {
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

export function cpuPct (run: RunData): Result['cpuPct'] {
  const ms = run.after.at - run.before.at
  const b = (run.after.cpu.bench - run.before.cpu.bench) / ms * 100
  const nodes = (run.after.cpu.nodes - run.before.cpu.nodes) / ms * 100
  const single = (run.after.cpu.single - run.before.cpu.single) / ms * 100
  const machine = (run.after.cpu.machine - run.before.cpu.machine) / ms * 100
  return { bench: b, nodes, single, other: Math.max(0, machine - b - nodes - single) }
}

/** Every request of a run, column-wise (result: 1 allowed, 2 denied, 3 failed). */
export function rawRecords (w: Workload, n: number, run: RunData): Record<string, unknown> {
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
