/**
 * A bucket is one node's holding of one key's conserved tokens.
 *
 * Every token of a key's stock is, at each moment, in exactly one place:
 * held here (spendable now), outstanding here (spent, waiting for the rule's
 * return schedule to bring it back to this node), or somewhere else in the
 * cluster (another node's bucket, or a transfer in flight). A bucket never
 * creates tokens: only `advance` moves tokens from outstanding to held, on the
 * algorithm's schedule, and `credit`/`debit` move held tokens in and out for
 * transfers. So, per bucket:
 *
 *     held + outstanding == share          (share changes only by credit/debit)
 *
 * The algorithms differ only in when a spent token comes back. All methods are
 * pure functions of the bucket and `nowMs`: no clock reads, no timers.
 *
 * Time must not run backwards for one bucket; callers pass a monotone `nowMs`
 * (the limiter clamps it).
 */
import type { CalendarView } from '../calendar.js'
import type { LogSlab } from './log-slab.js'

/** Float tolerance for algorithms whose tokens return continuously. */
export const EPSILON = 1e-9

export interface Bucket {
  /** Move returned tokens into `held`. Idempotent for the same `nowMs`. */
  advance: (nowMs: number) => void
  /** Tokens spendable now (call `advance` first). May be fractional. */
  readonly held: number
  /** Spend `count` if held (after advancing). Returns whether it did. */
  trySpend: (count: number, nowMs: number) => boolean
  /** Spent tokens not yet returned. */
  outstanding: (nowMs: number) => number
  /** The tokens this bucket accounts for: held + outstanding. */
  readonly share: number
  /**
   * Milliseconds until `count` tokens will be held, counting only this
   * bucket's own return schedule (no transfers). Infinity if they never will.
   */
  waitFor: (count: number, nowMs: number) => number
  /** Milliseconds until every outstanding token has returned. */
  resetIn: (nowMs: number) => number
  /** Spend `count` regardless of holdings, down to zero held at most. Used to carry outstanding spends across a rule reload. */
  forceSpend: (count: number, nowMs: number) => void
  /** Add `count` received tokens to `held` (a transfer in). */
  credit: (count: number) => void
  /** Remove up to `count` held tokens (a transfer out). Returns how many were removed. */
  debit: (count: number) => number
  /**
   * Held tokens that may not be spent (KeyState.reserve). Only a token bucket
   * needs to know: its refill rate is proportional to its capacity, so it
   * refills at the rate of its capacity less the reserve (see token-bucket.ts).
   * Called after `advance(nowMs)`, so the past refills at the old rate.
   */
  setReserve?: (reserve: number) => void
  /**
   * Give back what the bucket keeps outside itself, shared with other keys
   * (a sliding log's block in its rule's slab). Called when the bucket is
   * dropped (its key evicted or removed, or the bucket replaced); it is not
   * used after.
   */
  release?: () => void
}

/**
 * What every bucket of one rule shares: kept once per rule (the limiter
 * caches it), not once per key. Immutable.
 */
export interface BucketSpec {
  readonly perMs: number
  /** Token bucket: tokens per ms per token of capacity (limit / perMs / burst). */
  readonly ratePerCap: number
  /** Windowed algorithms place their windows on this calendar. */
  readonly cal: CalendarView
  /**
   * Window numbers are kept relative to this one (the window at the spec's
   * creation), so they stay small integers: V8 keeps a small integer in the
   * object itself, but boxes any other number in a heap number of its own.
   */
  readonly origin: number
  /**
   * The slab the rule's sliding logs keep their entries in (log-slab.ts):
   * made by the first sliding log that records a spend, null until then
   * (other algorithms never make one). The one field written after creation.
   */
  logs: LogSlab | null
}

export function bucketSpec (p: Omit<BucketParams, 'share'>, nowMs: number, cal: CalendarView): BucketSpec {
  return { perMs: p.perMs, ratePerCap: p.limit / p.perMs / p.burst, cal, origin: Math.floor(cal.at(nowMs) / p.perMs), logs: null }
}

/** Parameters every algorithm gets. `share` is this node's starting holding. */
export interface BucketParams {
  /** The rule's limit per period. */
  limit: number
  /** The period in ms. */
  perMs: number
  /** Token-bucket capacity (the rule's burst); equals limit for window algorithms. */
  burst: number
  /** Starting holding (whole share, nothing outstanding). */
  share: number
}

/** The number of the calendar window holding calendar time `calMs`, relative to `spec.origin` (a small integer). */
export function windowNumber (spec: BucketSpec, calMs: number): number {
  return Math.floor(calMs / spec.perMs) - spec.origin
}
