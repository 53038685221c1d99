/**
 * The chaos run's checker: from every answer the load saw, a lower bound on
 * what the cluster admitted in each window or interval, against what one
 * exact limiter would admit. Pure: answers and rules in, counts out.
 *
 * The lower bound: a grant's decision happened somewhere between the moment
 * its request was sent (`t0`) and its answer came back (`t1`), both read on
 * the harness's own (true) wall clock. A grant counts in an interval only if
 * both ends fall inside it, so the count is at most what was really admitted
 * there; a count above the limit is an overshoot, whatever the network did.
 * Requests that timed out or errored are not counted (they may have been
 * admitted: that only lowers the bound further).
 *
 * Per algorithm:
 * - fixed-window: each calendar window [k·per, (k+1)·per) (UTC, as quotad's
 *   calendar places them), at most the highest limit in force at any moment
 *   of the window (a raised limit applies at once; a lowered hard limit
 *   holds for the window it was lowered in: README "Signals"). Counted twice:
 *   by true time, and by the calendar of the node that answered (its wall
 *   clock as the plan stepped it, plus its calendar's skew from that wall
 *   clock, calendar.ts). The second mixes calendars: each node's grants are
 *   placed in the windows that node believes in, and a member's forwarded
 *   acquires are placed by the member's calendar, not the deciding seed's.
 * - sliding-log: any interval of length `per` starting at a grant's t0.
 * - token-bucket: any interval [s, e] between a grant's t0 and another's t1:
 *   at most burst + rate·(e − s).
 */

export type Algorithm = 'fixed-window' | 'sliding-log' | 'token-bucket'

export interface Answer {
  node: string
  key: string
  rule: string
  /** Harness wall clock when the request was sent and when its answer came, ms. */
  t0: number
  t1: number
  allowed: boolean
}

export interface CheckRule {
  name: string
  algorithm: Algorithm
  perMs: number
  /** The limit in force from each moment on (wall ms), in time order; the first at -Infinity. */
  limits: Array<{ at: number, limit: number }>
  burst?: number
}

/** A node's calendar minus true time, from each moment on (sampled: the plan's clock steps plus the calendar's own skew). */
export type Offsets = Map<string, Array<{ at: number, offsetMs: number }>>

export interface KeyVerdict {
  key: string
  rule: string
  allowed: number
  /** Tokens admitted beyond the bound, summed over windows (fixed) or the worst interval (sliding-log, token-bucket). */
  overshoot: number
  /** fixed-window only: the same by each deciding node's calendar. */
  overshootByNodeCalendar: number
  /** The worst window or interval: its start (wall ms), count and bound. */
  worst: { at: number, count: number, bound: number } | null
}

function limitAt (r: CheckRule, t: number): number {
  let l = r.limits[0].limit
  for (const x of r.limits) if (x.at <= t) l = x.limit
  return l
}

/** The highest limit in force at any moment of [a, b). */
function maxLimitIn (r: CheckRule, a: number, b: number): number {
  let l = limitAt(r, a)
  for (const x of r.limits) if (x.at > a && x.at < b) l = Math.max(l, x.limit)
  return l
}

function offsetAt (offsets: Offsets, node: string, t: number): number {
  let o = 0
  for (const x of offsets.get(node) ?? []) if (x.at <= t) o = x.offsetMs
  return o
}

/** Grants per window index, a grant counted only when t0 and t1 (shifted by `shift`) fall in the same window. */
function perWindow (grants: readonly Answer[], perMs: number, shift: (a: Answer) => number): Map<number, number> {
  const n = new Map<number, number>()
  for (const g of grants) {
    const s = shift(g)
    const w = Math.floor((g.t0 + s) / perMs)
    if (w !== Math.floor((g.t1 + s) / perMs)) continue
    n.set(w, (n.get(w) ?? 0) + 1)
  }
  return n
}

export function checkKey (key: string, r: CheckRule, answers: readonly Answer[], offsets: Offsets): KeyVerdict {
  const grants = answers.filter(a => a.allowed).sort((a, b) => a.t0 - b.t0)
  const v: KeyVerdict = { key, rule: r.name, allowed: grants.length, overshoot: 0, overshootByNodeCalendar: 0, worst: null }
  const note = (at: number, count: number, bound: number): void => {
    if (v.worst === null || count - bound > v.worst.count - v.worst.bound) v.worst = { at, count, bound }
  }
  if (r.algorithm === 'fixed-window') {
    for (const [w, count] of perWindow(grants, r.perMs, () => 0)) {
      const bound = maxLimitIn(r, w * r.perMs, (w + 1) * r.perMs)
      note(w * r.perMs, count, bound)
      v.overshoot += Math.max(0, count - bound)
    }
    // By a node's calendar the window is shifted by that node's offset, but a reload happens at one true
    // moment: the bound is the highest limit in force over the window widened by the largest offset.
    let widen = 0
    for (const xs of offsets.values()) for (const x of xs) widen = Math.max(widen, Math.abs(x.offsetMs))
    for (const [w, count] of perWindow(grants, r.perMs, g => offsetAt(offsets, g.node, g.t0))) {
      v.overshootByNodeCalendar += Math.max(0, count - maxLimitIn(r, w * r.perMs - widen, (w + 1) * r.perMs + widen))
    }
    return v
  }
  const bound = (s: number, e: number): number => r.algorithm === 'sliding-log'
    ? maxLimitIn(r, s, e)
    : (r.burst ?? maxLimitIn(r, s, e)) + maxLimitIn(r, s, e) / r.perMs * (e - s)
  const byT1 = [...grants].sort((a, b) => a.t1 - b.t1)
  let worst = 0
  for (const start of grants) {
    const s = start.t0
    let count = 0
    for (const g of byT1) {
      if (g.t0 < s) continue
      if (r.algorithm === 'sliding-log' && g.t1 >= s + r.perMs) break
      count++
      const e = r.algorithm === 'sliding-log' ? s + r.perMs : g.t1
      const b = bound(s, e)
      note(s, count, r.algorithm === 'sliding-log' ? b : Math.floor(b))
      worst = Math.max(worst, count - Math.floor(b))
    }
  }
  v.overshoot = worst
  return v
}

/**
 * Allowed answers with t0 and t1 in [from, to): the tail's admitted count
 * that utilization compares with the fault-free run's.
 */
export function allowedIn (answers: readonly Answer[], from: number, to: number): number {
  let n = 0
  for (const a of answers) if (a.allowed && a.t0 >= from && a.t1 < to) n++
  return n
}
