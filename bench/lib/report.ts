/**
 * What the socket bench prints and saves: per-row medians over the trials,
 * the main table, the CPU/denials table, and the targets.
 */
import type { TrialResult } from './load.js'
import { median } from './stats.js'
import { fmtInt, fmtPct, fmtRatio, fmtUs, renderTable } from './table.js'
import { CONCURRENCIES, type Workload } from './workloads.js'

export interface Summary {
  decisionsPerSec: number
  p50Us: number
  p99Us: number
  p999Us: number
  deniedPct: number
  errors: number
  firstError: string | null
  clientCpuPct: number
  serverCpuPct: number
  otherCpuPct: number
}

export function summarize (trials: TrialResult[]): Summary {
  const m = (f: (t: TrialResult) => number): number => median(trials.map(f))
  return {
    decisionsPerSec: m(t => t.decisionsPerSec),
    p50Us: m(t => t.p50Us),
    p99Us: m(t => t.p99Us),
    p999Us: m(t => t.p999Us),
    deniedPct: m(t => t.items === 0 ? NaN : t.denied / t.items * 100),
    errors: trials.reduce((a, t) => a + t.errors, 0),
    firstError: trials.find(t => t.firstError !== null)?.firstError ?? null,
    clientCpuPct: m(t => t.clientCpuPct),
    serverCpuPct: m(t => t.serverCpuPct),
    otherCpuPct: m(t => t.otherCpuPct)
  }
}

export interface RowResult {
  workload: Workload
  itemsPerOp: number
  quotad: { summary: Summary, trials: TrialResult[] }
  peer: { summary: Summary, trials: TrialResult[] } | null
  ratio: number
}

/** A side's median trial had more than this much other load (% of one core): its numbers are suspect. */
export const NOISY_PCT = 25

export function noisy (r: RowResult): boolean {
  return r.quotad.summary.otherCpuPct > NOISY_PCT || (r.peer?.summary.otherCpuPct ?? 0) > NOISY_PCT
}

export function mainTable (rows: RowResult[]): string {
  const head = ['workload', 'dec/s', 'p50 µs', 'p99 µs', 'p999 µs', 'dec/s', 'p50 µs', 'p99 µs', 'p999 µs', 'quotad/peer']
  const body = rows.map(r => {
    const q = r.quotad.summary
    const p = r.peer?.summary
    return [
      r.workload.label + (noisy(r) ? ' *' : ''),
      fmtInt(q.decisionsPerSec), fmtUs(q.p50Us), fmtUs(q.p99Us), fmtUs(q.p999Us),
      fmtInt(p?.decisionsPerSec ?? NaN), fmtUs(p?.p50Us ?? NaN), fmtUs(p?.p99Us ?? NaN), fmtUs(p?.p999Us ?? NaN),
      fmtRatio(r.ratio)
    ]
  })
  return renderTable(head, body, [['', 1], ['quotad', 4], ['peer (redis + rate-limiter-flexible)', 4], ['', 1]])
}

export function detailTable (rows: RowResult[]): string {
  const head = ['workload', 'denied', 'errors', 'client CPU', 'server CPU', 'other CPU', 'denied', 'errors', 'client CPU', 'server CPU', 'other CPU']
  const body = rows.map(r => {
    const q = r.quotad.summary
    const p = r.peer?.summary
    return [
      r.workload.label,
      fmtPct(q.deniedPct), String(q.errors), fmtPct(q.clientCpuPct), fmtPct(q.serverCpuPct), fmtPct(q.otherCpuPct),
      fmtPct(p?.deniedPct ?? NaN), p === undefined ? '-' : String(p.errors), fmtPct(p?.clientCpuPct ?? NaN), fmtPct(p?.serverCpuPct ?? NaN),
      fmtPct(p?.otherCpuPct ?? NaN)
    ]
  })
  return renderTable(head, body, [['', 1], ['quotad', 5], ['peer', 5]])
}

export interface Target { name: string, value: string, goal: string, met: boolean | null }

export function targets (rows: RowResult[]): Target[] {
  const out: Target[] = []
  const byId = new Map(rows.map(r => [r.workload.id, r]))
  for (const c of CONCURRENCIES.filter(c => c >= 16)) {
    const r = byId.get(`c${c}`)
    if (r === undefined) continue
    out.push({ name: `quotad/peer decisions/s at c=${c}`, value: fmtRatio(r.ratio), goal: '>= 2x', met: Number.isFinite(r.ratio) ? r.ratio >= 2 : null })
  }
  const batchRows = rows.filter(r => r.workload.kind === 'batch')
  const allowRows = rows.filter(r => r.workload.mix === 'allow' && r.peer !== null)
  if (batchRows.length > 0 && allowRows.length > 0) {
    const qBatch = Math.max(...batchRows.map(r => r.quotad.summary.decisionsPerSec))
    const pBest = Math.max(...allowRows.map(r => r.peer?.summary.decisionsPerSec ?? 0))
    const ratio = qBatch / pBest
    out.push({ name: 'quotad best batch dec/s / peer best dec/s (any row)', value: fmtRatio(ratio), goal: '>= 5x', met: ratio >= 5 })
  }
  const c1 = byId.get('c1')
  if (c1 !== undefined) {
    const p99 = c1.quotad.summary.p99Us
    out.push({ name: 'quotad p99 at c=1', value: `${fmtUs(p99)} µs`, goal: '<= 100 µs', met: p99 <= 100 })
  }
  return out
}
