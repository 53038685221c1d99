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

function makeJudge (rule: OracleRule, opts: OracleOptions): Judge {
  switch (rule.algorithm) {
    case 'fixed-window': return fixedWindow(rule)
    case 'sliding-window': return slidingWindow(rule, opts)
    case 'sliding-log': return slidingLog(rule)
    case 'token-bucket': return tokenBucket(rule)
  }
}

function fixedWindow ({ limit, perMs }: OracleRule): Judge {
  const counted = new Map<number, number>()
  return a => {
    const k = Math.floor(a.local / perMs)
    const used = counted.get(k) ?? 0
    if (used + a.count > limit + EPS) {
      return `window ${k * perMs}: ${fmt(used + a.count)} > limit ${limit}`
    }
    counted.set(k, used + a.count)
    return null
  }
}

function slidingWindow ({ limit, perMs }: OracleRule, { maxSkewMs }: OracleOptions): Judge {
  // Admissions arrive sorted by local time, so window k-1 is complete before
  // any admission of window k is judged.
  const counted = new Map<number, number>()
  return a => {
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

function slidingLog ({ limit, perMs }: OracleRule): Judge {
  // Recorded spends in time order; `head` is the oldest still inside the
  // window, so each spend is added and evicted once (O(n) overall).
  const times: number[] = []
  const counts: number[] = []
  let head = 0
  let inWindow = 0
  return a => {
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

function tokenBucket ({ limit, perMs, burst }: OracleRule): Judge {
  const rate = limit / perMs
  let level = burst
  let last: number | undefined
  return a => {
    if (last !== undefined) level = Math.min(burst, level + rate * (a.at - last))
    last = a.at
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
