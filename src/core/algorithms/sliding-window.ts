/**
 * Sliding window counter (approximate, weighted previous window), the classic
 * estimate `prev * (1 - f) + curr <= limit`, where f is the fraction of the
 * current calendar-aligned window that has elapsed.
 *
 * As conserved tokens: a token spent in window w returns to its spender
 * linearly over window w+1, and is fully back at the end of w+1. We keep
 * `base`, the tokens held apart from the part of `prev` already returned, so
 *
 *     held        = base + prev * f
 *     outstanding = curr + prev * (1 - f)
 *     held + outstanding = base + prev + curr = share      (exact, no drift)
 *
 * `base` may go negative: a spend can use the fraction of `prev` that has
 * already come back. Only `held` is compared against a request, with EPSILON
 * tolerance because `prev * f` is a float.
 */
import { EPSILON, windowNumber, type Bucket, type BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'

/** Fields: as in FixedWindowBucket, the window is a small integer relative to `spec.origin`. */
export class SlidingWindowBucket extends KeyState implements Bucket {
  private base: number
  private prev: number
  private curr: number
  private win: number
  private frac: number

  constructor (spec: BucketSpec, share: number, nowMs: number) {
    super(spec)
    this.base = share
    this.prev = 0
    this.curr = 0
    this.win = windowNumber(spec, spec.cal.at(nowMs))
    this.frac = 0
  }

  private get windowStart (): number { return (this.win + this.h.spec.origin) * this.h.spec.perMs }
  private get perMs (): number { return this.h.spec.perMs }
  private get cal (): BucketSpec['cal'] { return this.h.spec.cal }

  get held (): number { return this.base + this.prev * this.frac }
  get share (): number { return this.base + this.prev + this.curr }

  advance (monoMs: number): void {
    const nowMs = this.cal.at(monoMs)
    const elapsed = nowMs - this.windowStart
    if (elapsed >= this.perMs) {
      const k = Math.floor(nowMs / this.perMs)
      const w = k * this.perMs
      if (w - this.windowStart === this.perMs) {
        // One window on: the old prev has fully returned; curr starts returning.
        this.base += this.prev
        this.prev = this.curr
      } else {
        // Two or more windows on: everything has returned.
        this.base += this.prev + this.curr
        this.prev = 0
      }
      this.curr = 0
      this.win = k - this.h.spec.origin
    }
    this.frac = (nowMs - this.windowStart) / this.perMs
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held + EPSILON < count) return false
    this.base -= count
    this.curr += count
    return true
  }

  outstanding (nowMs: number): number {
    this.advance(nowMs)
    return this.curr + this.prev * (1 - this.frac)
  }

  waitFor (count: number, nowMs: number): number {
    this.advance(nowMs)
    let need = count - this.held
    if (need <= EPSILON) return 0
    const restOfPrev = this.prev * (1 - this.frac)
    if (need <= restOfPrev + EPSILON) return need * this.perMs / this.prev
    need -= restOfPrev
    if (need > this.curr + EPSILON) return Infinity
    return (this.windowStart + this.perMs - this.cal.at(nowMs)) + need * this.perMs / this.curr
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const t = this.cal.at(nowMs)
    if (this.curr > 0) return this.windowStart + 2 * this.perMs - t
    if (this.prev > 0) return this.windowStart + this.perMs - t
    return 0
  }

  forceSpend (count: number, nowMs: number): void {
    this.advance(nowMs)
    const n = Math.min(count, Math.max(0, this.held))
    this.base -= n
    this.curr += n
  }

  credit (count: number): void { this.base += count }

  debit (count: number): number {
    const n = Math.min(count, Math.max(0, this.held))
    this.base -= n
    return n
  }
}
