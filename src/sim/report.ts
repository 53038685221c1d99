/**
 * Summaries of many runs of one (scenario, N, mode, rule) cell, and the
 * text table `quotad simulate` and bench/accuracy print. Medians, because
 * single runs vary; overshoot and conservation are totals and maxima,
 * because one bad run is one too many.
 */
import type { SimResult } from './run.js'

export interface Summary {
  scenario: string
  nodes: number
  /** Of `nodes`, the seeds (the rest: members listed from the start). */
  seedNodes: number
  mode: string
  rule: string
  algorithm: string
  runs: number
  failed: number
  overshoot: number
  overdraft: number
  utilization: { median: number, min: number }
  staticUtilization: number
  centralUtilization: number
  fairness: number
  staticFairness: number
  centralFairness: number
  /** Over every move of every run: median and max, ms; count of moves never followed. */
  follow: { median: number, max: number, moves: number, missed: number }
  bytesPerNodeSec: number
  messagesPerNodeSec: number
  recvBytesPerNodeSec: number
  /** A member's sent + received bytes per second (the median run's mean over members); NaN without members. */
  memberBytesPerSec: number
  /** The same for a seed. */
  seedBytesPerSec: number
  stranded: number
  /** The first failures, each with its replay command. */
  failures: Array<{ seed: number, reasons: string[], replay: string }>
}

export function median (xs: readonly number[]): number {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2
}

export function summarize (rs: readonly SimResult[]): Summary {
  const r0 = rs[0]
  const follows = rs.flatMap(r => r.followMs)
  const followed = follows.filter(Number.isFinite)
  const failed = rs.filter(r => !r.ok)
  return {
    scenario: r0.scenario,
    nodes: r0.nodes,
    seedNodes: r0.seedNodes,
    mode: r0.mode,
    rule: r0.rule,
    algorithm: r0.algorithm,
    runs: rs.length,
    failed: failed.length,
    overshoot: rs.reduce((n, r) => n + r.overshoot, 0),
    overdraft: rs.reduce((n, r) => n + r.overdraft, 0),
    utilization: { median: median(rs.map(r => r.cluster.utilization)), min: Math.min(...rs.map(r => r.cluster.utilization)) },
    staticUtilization: median(rs.map(r => r.static.utilization)),
    centralUtilization: median(rs.map(r => r.central.utilization)),
    fairness: median(rs.map(r => r.cluster.fairness)),
    staticFairness: median(rs.map(r => r.static.fairness)),
    centralFairness: median(rs.map(r => r.central.fairness)),
    follow: { median: median(followed), max: followed.length > 0 ? Math.max(...followed) : NaN, moves: follows.length, missed: follows.length - followed.length },
    bytesPerNodeSec: median(rs.map(r => r.bytesPerNodeSec)),
    messagesPerNodeSec: median(rs.map(r => r.messagesPerNodeSec)),
    recvBytesPerNodeSec: median(rs.map(r => r.recvBytesPerNodeSec)),
    memberBytesPerSec: median(rs.flatMap(r => r.roles.members === undefined ? [] : [r.roles.members.sentBytesPerNodeSec + r.roles.members.recvBytesPerNodeSec])),
    seedBytesPerSec: median(rs.map(r => r.roles.seeds.sentBytesPerNodeSec + r.roles.seeds.recvBytesPerNodeSec)),
    stranded: median(rs.map(r => r.stranded)),
    failures: failed.slice(0, 5).map(r => ({ seed: r.seed, reasons: r.failures, replay: r.replay }))
  }
}

const pct = (x: number): string => Number.isNaN(x) ? '-' : `${(100 * x).toFixed(1)}%`
const num = (x: number, d = 0): string => Number.isNaN(x) ? '-' : x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

export const HEADER = ['scenario', 'N', 'mode', 'runs', 'overshoot', 'util (min)', 'static', 'central', 'fairness q/s/c', 'follow p50/max ms',
  'ctl kbit/s sent/recv', 'msg/s/node', 'stranded', 'result']

export function row (s: Summary): string[] {
  const follow = s.follow.moves === 0
    ? '-'
    : `${num(s.follow.median)}/${num(s.follow.max)}${s.follow.missed > 0 ? ` (${s.follow.missed} missed)` : ''}`
  return [
    s.scenario, s.seedNodes < s.nodes ? `${s.nodes} (${s.seedNodes} seeds)` : String(s.nodes), s.mode, num(s.runs), s.mode === 'soft' ? `${num(s.overshoot)} (debt ${num(s.overdraft)})` : num(s.overshoot),
    `${pct(s.utilization.median)} (${pct(s.utilization.min)})`, pct(s.staticUtilization), pct(s.centralUtilization),
    `${s.fairness.toFixed(2)}/${s.staticFairness.toFixed(2)}/${s.centralFairness.toFixed(2)}`, follow,
    `${num(s.bytesPerNodeSec * 8 / 1000, 1)}/${num(s.recvBytesPerNodeSec * 8 / 1000, 1)}`, num(s.messagesPerNodeSec, 1), num(s.stranded, 1), s.failed === 0 ? 'ok' : `FAILED ${s.failed}`
  ]
}

/** A plain aligned table (markdown-compatible). */
export function table (head: readonly string[], rows: readonly string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(w[i])).join(' | ')} |`
  return [line(head), `|${w.map(n => '-'.repeat(n + 2)).join('|')}|`, ...rows.map(line)].join('\n')
}

/** What to print for failed runs: the seed, why, and the command that replays it. */
export function failureText (s: Summary): string {
  return s.failures.map(f => `FAILED ${s.scenario} N=${s.nodes} ${s.mode} seed ${f.seed}:\n  ${f.reasons.join('\n  ')}\n  replay: ${f.replay}`).join('\n')
}
