/**
 * What the cluster keeps per key, beside the key's bucket: the demand rate,
 * deferred credits, soft-mode debt, pacing while tight, and counters.
 *
 * Deferred credits are tokens received with an `at` (calendar time) later
 * than this node's calendar (a donor whose window already rolled over, or a handed-off token that
 * has not returned yet). They are in transit until `at`: never spendable
 * early, so a token can't be spent twice in one window even with skew.
 */
import type { KeyState } from '../core/limiter.js'
import type { CalendarView } from '../core/calendar.js'

export interface KeyExt {
  /** Tokens requested (allowed or not) since the last rate update. */
  demand: number
  /** EWMA of demand, tokens per second (half-life `rateHalfLifeMs`): what is gossiped. */
  rate: number
  /** A fast EWMA (half-life of about two ticks): reacts to a shift at once. */
  fastRate: number
  lastDemandAt: number
  /** When a want for this key was sent (-Infinity: none in flight). */
  wantSentAt: number
  /** When the last want was sent (kept after its reply; spaces wants out). */
  lastWantAt: number
  /** What alive agreeing peers hold, as last summed (ClusterView.clusterRemaining), and when. */
  peersHeld: number
  peersHeldAt: number
  deferred: Array<[amount: number, at: number]> | null
  /** Soft mode: tokens admitted without holding them, still to repay. */
  debt: number
  /** Soft mode: all tokens ever overdrawn (reported). */
  overdraft: number
  /**
   * Tokens this node owes to destroy: a rule change lowered its share by
   * more than it held. Paid before anything is spent or given: from held
   * tokens, from tokens as they come back, and from tokens asked of peers
   * for the purpose. Gossiped (`owed`) so that every node keeps as much of
   * its own holding unspent while it is unpaid (caution.ts). Saved.
   */
  burn: number
  /** When `ks.reserve` (caution.ts) was last computed. */
  reserveAt: number
  /** Burns owed elsewhere as this node's own view sees them (caution.ts); gossiped. */
  debts: number
  /** Tightening: cluster-wide remaining below the low-water mark. */
  tight: boolean
  /** Tokens spendable before the next tick while tight. */
  pace: number
  transfersIn: number
  transfersOut: number
  /** Tokens of this key known lost (grants to a dead epoch, unplaceable credits). */
  stranded: number
  /** Values last gossiped, to send only what changed. */
  sentHeld: number
  sentOutstanding: number
  sentRate: number
  sentOwed: number
  sentDebts: number
  /** held + outstanding + deferred + in transit out, as last gossiped (shortfall.ts). */
  sentCustody: number
}

export function ext (ks: KeyState): KeyExt {
  let x = ks.ext as KeyExt | null
  if (x === null) {
    x = {
      demand: 0, rate: 0, fastRate: 0, lastDemandAt: -Infinity, wantSentAt: -Infinity, lastWantAt: -Infinity, peersHeld: 0, peersHeldAt: -Infinity, deferred: null, debt: 0, overdraft: 0, burn: 0,
      reserveAt: -Infinity, debts: 0,
      tight: false, pace: 0, transfersIn: 0, transfersOut: 0, stranded: 0, sentHeld: NaN, sentOutstanding: NaN, sentRate: NaN, sentOwed: NaN, sentDebts: NaN,
      sentCustody: NaN
    }
    ks.ext = x
  }
  return x
}

/** Move deferred credits that are due (by calendar time `calMs`) into the bucket. Returns whether any were. */
export function applyDeferred (ks: KeyState, x: KeyExt, calMs: number): boolean {
  const d = x.deferred
  if (d === null) return false
  let moved = false
  let kept = 0
  for (const item of d) {
    if (item[1] <= calMs) { ks.bucket.credit(item[0]); moved = true } else d[kept++] = item
  }
  d.length = kept
  if (kept === 0) x.deferred = null
  return moved
}

export function deferredTotal (x: KeyExt): number {
  let n = 0
  for (const [a] of x.deferred ?? []) n += a
  return n
}

/** Whether the rule's windows are calendar-aligned (so tokens carry a window tag). */
export function windowed (algorithm: string): boolean {
  return algorithm === 'fixed-window' || algorithm === 'sliding-window'
}

/** The start of the calendar window holding calendar time `calMs`. */
export function windowStart (calMs: number, perMs: number): number {
  return Math.floor(calMs / perMs) * perMs
}

/** Update the EWMA with the demand seen over the last `dtMs`. */
export function updateRate (x: KeyExt, dtMs: number, halfLifeMs: number, fastHalfLifeMs: number): void {
  if (dtMs <= 0) return
  const inst = x.demand * 1000 / dtMs
  x.rate += (1 - Math.pow(2, -dtMs / halfLifeMs)) * (inst - x.rate)
  x.fastRate += (1 - Math.pow(2, -dtMs / fastHalfLifeMs)) * (inst - x.fastRate)
  if (x.rate < 1e-3) x.rate = 0
  if (x.fastRate < 1e-3) x.fastRate = 0
  x.demand = 0
}

/** What a node expects to need: the higher of the two rates, so a surge is asked for at once. */
export function needRate (x: KeyExt): number {
  return Math.max(x.rate, x.fastRate)
}

/**
 * What a donor keeps for itself. While it is busy, the higher of its two
 * rates, the same as it would ask for: a node that keeps less than it needs
 * gives tokens away and asks for them back a moment later (the simulator
 * showed busy nodes trading tokens back and forth several times a second).
 * Once its demand has clearly dropped (the fast average under half
 * the slow one), the fast one, so a node that went quiet gives at once.
 */
export function keepRate (x: KeyExt): number {
  return x.fastRate < x.rate / 2 ? x.fastRate : Math.max(x.rate, x.fastRate)
}

/** Destroy owed tokens from what is held now (see `burn`). Returns how many were destroyed. */
export function burnDue (ks: KeyState, x: KeyExt, nowMs: number): number {
  if (x.burn <= 0) return 0
  ks.bucket.advance(nowMs)
  const n = ks.bucket.debit(Math.min(x.burn, Math.max(0, ks.bucket.held)))
  x.burn -= n
  if (x.burn < 1e-9) x.burn = 0
  return n
}

/**
 * How far ahead a node plans, in ms: the tuning horizon, but for a calendar
 * window never past the window's end (its spent tokens come back then, and
 * tokens kept beyond it would only be wasted at the boundary).
 */
export function horizon (ks: KeyState, horizonMs: number, nowMs: number, calendar: CalendarView): number {
  const rule = ks.rule.config
  if (!windowed(rule.algorithm)) return horizonMs
  const cal = calendar.at(nowMs)
  return Math.max(1, Math.min(horizonMs, windowStart(cal, rule.perMs) + rule.perMs - cal))
}
