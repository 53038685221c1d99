/**
 * When reclaimed tokens may be spent again (cluster-protocol.md, "Invariants", I3):
 * never before every spend the dead node could have made of them has
 * returned by the rule's schedule. Pure.
 *
 * The dead node's last spend happened before the move, at a calendar time of
 * its own of at most `c + δ'`, where `c` is the crediting node's calendar now
 * and `δ'` bounds the offset between the two calendars (the configured
 * `maxClockSkewMs`, or the dead node's last observed offset if larger). So a
 * token is safe once a spend at `c + δ'` has returned:
 *
 *   fixed-window    at the start of the window after the one holding c + δ'
 *   sliding-window  one window later still: a spend keeps weighing in the
 *                   window after its own
 *   sliding-log     at c + δ' + per
 *   token-bucket    at once, but as capacity with level 0: the tokens refill
 *                   at their rate share, so the cluster stays within
 *                   burst + rate·t whatever the dead bucket's level was
 *
 * The deferred times are calendar times at which `applyDeferred` credits
 * (inclusive: a credit at `at` is spendable when the calendar reads `at`).
 */
import type { Algorithm } from '../config/types.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import { windowStart } from './key-ext.js'

export type ReclaimAt =
  /** Credit as a deferred credit spendable from calendar time `at`. */
  | { kind: 'deferred', at: number }
  /** Credit now as capacity with level 0: `credit(n)` then `forceSpend(n, nowMs)`. */
  | { kind: 'empty-capacity' }

export interface ReclaimRule {
  algorithm: Algorithm
  perMs: number
}

/**
 * @param calMs the crediting node's calendar now (`calendar.at(nowMs)`)
 * @param skewMs δ': the bound on the calendar offset to the dead node, ≥ 0
 */
export function reclaimAt (rule: ReclaimRule, calMs: number, skewMs: number): ReclaimAt {
  if (!Number.isFinite(rule.perMs) || rule.perMs <= 0) bad('rule.perMs', `must be a positive number, got ${rule.perMs}`)
  if (!Number.isFinite(calMs)) bad('calMs', `must be a finite number, got ${calMs}`)
  if (!Number.isFinite(skewMs) || skewMs < 0) bad('skewMs', `must be a finite number >= 0, got ${skewMs}`)
  const latest = calMs + skewMs
  switch (rule.algorithm) {
    case 'fixed-window': return { kind: 'deferred', at: windowStart(latest, rule.perMs) + rule.perMs }
    case 'sliding-window': return { kind: 'deferred', at: windowStart(latest, rule.perMs) + 2 * rule.perMs }
    case 'sliding-log': return { kind: 'deferred', at: latest + rule.perMs }
    case 'token-bucket': return { kind: 'empty-capacity' }
    default: return bad('rule.algorithm', `must be a known algorithm, got ${String(rule.algorithm)}`)
  }
}

function bad (path: string, message: string): never {
  throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `reclaimAt: ${path}: ${message}`, { path })
}
