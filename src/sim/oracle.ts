/**
 * The simulator's oracle: an exact central limiter that judges a cluster's
 * admissions of one key.
 *
 * It is deliberately written from the algorithms' definitions and imports
 * nothing from src/core: if it shared code with the limiter it checks, a bug
 * there would be copied here and the check would pass. It replays the
 * admissions, in time order, through one central limiter that never saw the
 * denied requests. Every admission that limiter would deny counts as overshoot
 * and is NOT spent, so one bad admission is counted once rather than
 * poisoning everything after it.
 *
 * The bounds (EPS absorbs float error in fractional counts and rates):
 * - fixed-window: per node-local calendar window floor(local / perMs), the
 *   tokens admitted are <= limit. Under clock skew each node's windows are its
 *   own, so admissions are ordered and windowed by `local` (the documented
 *   guarantee).
 * - sliding-window (weighted previous window), ordered by `local`: with
 *   f the fraction of window k elapsed, prev*(1-f) + curr + count <=
 *   limit + slack, slack = prev * 2*maxSkewMs/perMs because nodes compute f
 *   from clocks up to 2*maxSkewMs apart (0 without skew). Also curr + count
 *   <= limit: a window's own count never exceeds the limit, skew or not.
 * - sliding-log (exact), ordered by true time `at`: tokens spent in
 *   (at - perMs, at] plus count <= limit. A spend at t0 no longer counts at
 *   t0 + perMs.
 * - token-bucket, ordered by `at`: a bucket of capacity burst, full at the
 *   first admission (the most lenient start), refilled at limit/perMs per ms.
 *   Equivalently, admissions in any interval of length t are <= burst +
 *   rate*t.
 *
 * Rule changes (`rule.changes`): the central limiter's limit changes in true
 * time. While the nodes change over, the larger of the old and new values
 * applies (a node not yet reloaded still enforces the old rule); once the
 * last has, the new one, against everything already admitted in the window
 * (a central limiter keeps its counts across a change). For a token bucket,
 * a larger burst adds its difference to the level, a smaller one caps it.
 */
import type { Admission, OracleRule } from './types.js'

export interface OracleOptions {
  /** Largest |clock offset| of any node, ms (0 without skew). */
  maxSkewMs: number
}

export interface Violation { at: number, local: number, node: string, count: number, detail: string }

export interface KeyCheck {
  /** Tokens admitted (sum of counts). */
  admitted: number
  /** Tokens admitted that the exact central limiter would have denied. */
  overshoot: number
  /** The first few violations (at most 5), for the failure report. */
  violations: Violation[]
}

const EPS = 1e-6
const MAX_VIOLATIONS = 5

/** Decides one admission; returns null to admit (and records the spend), or why it denies. */
type Judge = (a: Admission) => string | null

/** Check every admission of ONE key (any order in input; sort a copy). */
export function checkKey (rule: OracleRule, admissions: readonly Admission[], opts: OracleOptions): KeyCheck {
  // Array.prototype.sort is stable (ES2019), so ties keep input order and the result is deterministic.
  const byLocal = rule.algorithm === 'fixed-window' || rule.algorithm === 'sliding-window'
  const sorted = byLocal
    ? [...admissions].sort((x, y) => x.local - y.local)
    : [...admissions].sort((x, y) => x.at - y.at)
  const judge = makeJudge(rule, opts)
  const result: KeyCheck = { admitted: 0, overshoot: 0, violations: [] }
  for (const a of sorted) {
    result.admitted += a.count
    const why = judge(a)
    if (why === null) continue
    result.overshoot += a.count
    if (result.violations.length < MAX_VIOLATIONS) {
      result.violations.push({ at: a.at, local: a.local, node: a.node, count: a.count, detail: why })
    }
  }
  return result
}

interface Limits { limit: number, burst: number }
interface Boundary { t: number, before: Limits, after: Limits }

/** The rule's limits at true time t, and the moments they change (see the header). */
function schedule (rule: OracleRule): { at: (t: number) => Limits, boundaries: Boundary[] } {
  const segs: Array<{ from: number, lim: Limits }> = [{ from: -Infinity, lim: { limit: rule.limit, burst: rule.burst } }]
  let cur = segs[0].lim
  for (const c of rule.changes ?? []) {
    const during = { limit: Math.max(cur.limit, c.limit), burst: Math.max(cur.burst, c.burst) }
    const after = { limit: c.limit, burst: c.burst }
    segs.push({ from: c.from, lim: during }, { from: c.to, lim: after })
    cur = after
  }
  const boundaries: Boundary[] = []
  for (let i = 1; i < segs.length; i++) boundaries.push({ t: segs[i].from, before: segs[i - 1].lim, after: segs[i].lim })
  const at = (t: number): Limits => {
    let l = segs[0].lim
    for (const s of segs) if (s.from <= t) l = s.lim
    return l
  }
  return { at, boundaries }
}

function makeJudge (rule: OracleRule, opts: OracleOptions): Judge {
  switch (rule.algorithm) {
    case 'fixed-window': return fixedWindow(rule)
    case 'sliding-window': return slidingWindow(rule, opts)
    case 'sliding-log': return slidingLog(rule)
    case 'token-bucket': return tokenBucket(rule)
  }
}

function fixedWindow (rule: OracleRule): Judge {
  const { perMs } = rule
  const sched = schedule(rule)
  const counted = new Map<number, number>()
  return a => {
    const limit = sched.at(a.at).limit
    const k = Math.floor(a.local / perMs)
    const used = counted.get(k) ?? 0
    if (used + a.count > limit + EPS) {
      return `window ${k * perMs}: ${fmt(used + a.count)} > limit ${limit}`
    }
    counted.set(k, used + a.count)
    return null
  }
}

function slidingWindow (rule: OracleRule, { maxSkewMs }: OracleOptions): Judge {
  const { perMs } = rule
  const sched = schedule(rule)
  // Admissions arrive sorted by local time, so window k-1 is complete before
  // any admission of window k is judged.
  const counted = new Map<number, number>()
  return a => {
    const limit = sched.at(a.at).limit
    const k = Math.floor(a.local / perMs)
    const f = (a.local - k * perMs) / perMs
    const prev = counted.get(k - 1) ?? 0
    const curr = counted.get(k) ?? 0
    if (curr + a.count > limit + EPS) {
      return `window ${k * perMs}: ${fmt(curr + a.count)} > limit ${limit}`
    }
    const weighted = prev * (1 - f) + curr + a.count
    const slack = prev * (2 * maxSkewMs / perMs)
    if (weighted > limit + slack + EPS) {
      return `window ${k * perMs} at f=${fmt(f)}: weighted ${fmt(weighted)} > limit ${limit} + slack ${fmt(slack)}`
    }
    counted.set(k, curr + a.count)
    return null
  }
}

function slidingLog (rule: OracleRule): Judge {
  const { perMs } = rule
  const sched = schedule(rule)
  // Recorded spends in time order; `head` is the oldest still inside the
  // window, so each spend is added and evicted once (O(n) overall).
  const times: number[] = []
  const counts: number[] = []
  let head = 0
  let inWindow = 0
  return a => {
    const limit = sched.at(a.at).limit
    while (head < times.length && times[head] <= a.at - perMs) {
      inWindow -= counts[head]
      head++
    }
    if (inWindow + a.count > limit + EPS) {
      return `log (${a.at - perMs}, ${a.at}]: ${fmt(inWindow + a.count)} > limit ${limit}`
    }
    times.push(a.at)
    counts.push(a.count)
    inWindow += a.count
    return null
  }
}

function tokenBucket (rule: OracleRule): Judge {
  const { perMs } = rule
  const sched = schedule(rule)
  let level = rule.burst
  let last: number | undefined
  let next = 0
  /** Refill from `last` to `to` under the limits in force then. */
  const refill = (to: number): void => {
    if (last === undefined) return
    const l = sched.at(last)
    level = Math.min(l.burst, level + l.limit / perMs * (to - last))
    last = to
  }
  return a => {
    // Cross every change of limits since the last admission.
    while (next < sched.boundaries.length && sched.boundaries[next].t <= a.at) {
      const b = sched.boundaries[next++]
      refill(Math.max(b.t, last ?? b.t))
      if (b.after.burst > b.before.burst) level += b.after.burst - b.before.burst
      else level = Math.min(level, b.after.burst)
    }
    refill(a.at)
    last = a.at
    const { burst, limit } = sched.at(a.at)
    const rate = limit / perMs
    if (level + EPS < a.count) {
      return `bucket level ${fmt(level)} < ${fmt(a.count)} (burst ${burst}, rate ${fmt(rate)}/ms)`
    }
    level -= a.count
    return null
  }
}

/** Short, readable numbers for violation details. */
function fmt (n: number): string {
  return String(Math.round(n * 1e6) / 1e6)
}
