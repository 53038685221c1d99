/**
 * How one key's state answers a request: spending from its bucket (never
 * into its reserve) and the decision sent back. Pure functions of the key
 * state and `now`, shared by every path of the limiter that answers.
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import { EPSILON } from './algorithms/index.js'
import type { KeyState } from './key-state.js'
import type { Decision } from './types.js'

/** Throws unless `key` may have a state: non-empty, at most `max` UTF-8 bytes. */
export function checkKey (key: string, max: number): void {
  if (key.length === 0) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'key must be a non-empty string')
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need counting.
  if (key.length > max || (key.length * 3 > max && Buffer.byteLength(key) > max)) {
    throw new QuotadError(ErrorCodes.KEY_TOO_LONG, `key is longer than ${max} bytes`)
  }
}

/** The answer for `count` tokens of `ks`; `record` counts it in the rule's stats. */
export function decision (ks: KeyState, allowed: boolean, count: number, now: number, record = true): Decision {
  const b = ks.bucket
  const rule = ks.rule
  if (record) {
    if (allowed) rule.stats.allowed++
    else rule.stats.denied++
  }
  let retryAfterMs = 0
  if (!allowed) {
    const t = waitFor(ks, ks.queued + count, now)
    retryAfterMs = t === Infinity ? -1 : Math.ceil(t)
  }
  return {
    allowed,
    remaining: Math.max(0, Math.floor(b.held - ks.reserve + EPSILON)),
    limit: rule.stock,
    resetMs: Math.ceil(b.resetIn(now)),
    retryAfterMs,
    rule: rule.name
  }
}

/**
 * Spend from a key's bucket, never into its reserve: tokens held here that a
 * layer above says may not be spent (the cluster's share of unpaid burns
 * elsewhere, see cluster/caution.ts).
 */
export function spend (ks: KeyState, count: number, now: number): boolean {
  if (ks.reserve > 0) {
    ks.bucket.advance(now)
    if (ks.bucket.held - ks.reserve + EPSILON < count) return false
  }
  return ks.bucket.trySpend(count, now)
}

/**
 * When `count` tokens could be spent, by the bucket's own return schedule,
 * above the reserve (what `spend` may not touch): the bucket alone would say
 * "now" for tokens that sit in the reserve, and a waiter woken for them
 * would be woken again at once, for ever.
 */
export function waitFor (ks: KeyState, count: number, now: number): number {
  const r = ks.reserve
  if (r === Infinity) return Infinity
  return ks.bucket.waitFor(r > 0 ? count + r : count, now)
}
