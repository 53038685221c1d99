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
import type { Bucket, BucketParams } from './bucket.js'
import type { CalendarView } from '../calendar.js'

export class FixedWindowBucket implements Bucket {
  held: number
  private spent = 0
  private windowStart: number
  private readonly perMs: number
  private readonly cal: CalendarView

  constructor (p: BucketParams, nowMs: number, cal: CalendarView) {
    this.perMs = p.perMs
    this.held = p.share
    this.cal = cal
    this.windowStart = Math.floor(cal.at(nowMs) / p.perMs) * p.perMs
  }

  get share (): number { return this.held + this.spent }

  advance (nowMs: number): void {
    const t = this.cal.at(nowMs)
    if (t - this.windowStart >= this.perMs) {
      this.windowStart = Math.floor(t / this.perMs) * this.perMs
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
