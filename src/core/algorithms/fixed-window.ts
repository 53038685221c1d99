/**
 * Fixed window, calendar-aligned: windows start at multiples of `perMs` since
 * the Unix epoch (UTC midnight for `1d`). A token spent in a window returns to
 * its spender at the next window boundary.
 *
 * Methods take monotonic time; window boundaries are placed on the calendar
 * (calendar.ts), which never runs backwards, so a wall-clock step can't
 * reopen a window.
 *
 * Known property, kept on purpose: up to 2x `limit` can be admitted across a
 * boundary (the end of one window and the start of the next).
 */
import { windowNumber, type Bucket, type BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'

/**
 * Fields: the window is kept as its number relative to `spec.origin` (a
 * small integer, so V8 stores it in the object: see BucketSpec), and
 * windowStart = (win + origin) * perMs is the same double as
 * floor(t / perMs) * perMs. Integer counts keep `held` and `spent` small
 * integers too, so a fixed-window key is one object with no boxed numbers.
 */
export class FixedWindowBucket extends KeyState implements Bucket {
  held: number
  private spent: number
  private win: number

  constructor (spec: BucketSpec, share: number, nowMs: number) {
    super(spec)
    this.held = share
    this.spent = 0
    this.win = windowNumber(spec, spec.cal.at(nowMs))
  }

  get share (): number { return this.held + this.spent }

  private get windowStart (): number { return (this.win + this.h.spec.origin) * this.h.spec.perMs }
  private get perMs (): number { return this.h.spec.perMs }
  private get cal (): BucketSpec['cal'] { return this.h.spec.cal }

  advance (nowMs: number): void {
    const t = this.cal.at(nowMs)
    if (t - this.windowStart >= this.perMs) {
      this.win = windowNumber(this.h.spec, t)
      this.held += this.spent
      this.spent = 0
    }
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held < count) return false
    this.held -= count
    this.spent += count
    return true
  }

  outstanding (nowMs: number): number {
    this.advance(nowMs)
    return this.spent
  }

  waitFor (count: number, nowMs: number): number {
    this.advance(nowMs)
    if (this.held >= count) return 0
    if (this.held + this.spent >= count) return this.windowStart + this.perMs - this.cal.at(nowMs)
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    return this.spent > 0 ? this.windowStart + this.perMs - this.cal.at(nowMs) : 0
  }

  forceSpend (count: number, nowMs: number): void {
    this.advance(nowMs)
    const n = Math.min(count, this.held)
    this.held -= n
    this.spent += n
  }

  credit (count: number): void { this.held += count }

  debit (count: number): number {
    const n = Math.min(count, this.held)
    this.held -= n
    return n
  }
}
