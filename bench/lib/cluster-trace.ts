/**
 * bench/cluster.ts: its workloads (the per-node demand traces), options,
 * and the records a run keeps.
 */
import { type NodeProc, type TcpSnapshot } from './cluster-harness.js'
import { LatencyLog } from './stats.js'
import { QuotadClient } from '@quotad/client'

export const WORKLOAD_IDS = ['uniform', 'zipf', 'moving', 'moving-1x', 'over', 'tb-zipf'] as const
export type WorkloadId = typeof WORKLOAD_IDS[number]

/** Zipf exponent of the skewed workloads. */
export const ZIPF_S = 1.2
/** Total demand of each workload, in multiples of the limit per window. */
export const DEMAND: Record<WorkloadId, number> = { uniform: 1.2, zipf: 1.2, moving: 1.2, 'moving-1x': 1.0, over: 2.0, 'tb-zipf': 1.2 }
/** Moving hot spot: the hot node's share of the total demand. */
export const HOT_SHARE = 0.7
/** Follow-time bins, and the share of min(demand, limit) a bin must reach. */
export const BIN_MS = 100
export const FOLLOW_FRACTION = 0.9
/** A followed hot spot must hold the rate this many bins in a row. */
export const FOLLOW_BINS = 3
/** The probe key's rule: never exhausted, so every probe is a local decision. */
export const PROBE_LIMIT = 1_000_000_000

export interface Options {
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


// ---------------------------------------------------------------------------
// Traces

/** mulberry32: a small seeded PRNG, so a trace can be replayed from its seed. */
export function rng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function shuffle<T> (xs: T[], rand: () => number): T[] {
  const a = [...xs]
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

/** Per-node shares of a Zipf(s) distribution whose rank r goes to node perm[r]. */
export function zipfShares (n: number, s: number, perm: number[]): number[] {
  const w = Array.from({ length: n }, (_, r) => 1 / Math.pow(r + 1, s))
  const sum = w.reduce((a, x) => a + x, 0)
  const out = new Array<number>(n).fill(0)
  for (let r = 0; r < n; r++) out[perm[r]] = w[r] / sum
  return out
}

export interface Move { atMs: number, from: number, to: number }

export interface Workload {
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

export function buildWorkloads (n: number, opts: Options): Workload[] {
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

export function nodeNames (n: number): string[] {
  return Array.from({ length: n }, (_, i) => String.fromCharCode(97 + i))
}

export function rules (opts: Options): unknown[] {
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

export const PENDING = 0
export const ALLOWED = 1
export const DENIED = 2
export const FAILED = 3

/** One row per request, in send order, in growable typed arrays. */
export class Records {
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

export interface NodeStatus {
  cluster?: {
    counters?: Record<string, number>
    transport?: Record<string, number>
  }
}

export interface Snapshot {
  at: number
  statuses: NodeStatus[]
  tcp: TcpSnapshot
  cpu: { bench: number, nodes: number, single: number, machine: number }
}

export interface Context {
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


export interface RunData {
  records: Records
  t0: number
  t1: number
  probe: { cluster: LatencyLog, single: LatencyLog, errors: number }
  mirrorErrors: number
  tickGaps: number[]
  before: Snapshot
  after: Snapshot
}

