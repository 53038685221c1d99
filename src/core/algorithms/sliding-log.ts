/**
 * Sliding log (exact): a token spent at time s returns to its spender at
 * s + perMs. So at any time t the tokens outstanding are exactly those spent in
 * (t - perMs, t], and no interval of length perMs ever admits more than the
 * share. Never 2x across a boundary.
 *
 * Data structure: a FIFO of (time, count) spends in two parallel arrays with a
 * head index; spends in the same millisecond merge into one entry, so memory
 * is bounded by min(share, distinct spend milliseconds in one period). The
 * arrays are compacted when the consumed prefix grows past half.
 */
import type { Bucket, BucketParams } from './bucket.js'

export class SlidingLogBucket implements Bucket {
  held: number
  private readonly perMs: number
  private times: number[] = []
  private counts: number[] = []
  private head = 0
  private pending = 0

  constructor (p: BucketParams, _nowMs: number) {
    this.perMs = p.perMs
    this.held = p.share
  }

  get share (): number { return this.held + this.pending }

  advance (nowMs: number): void {
    const cutoff = nowMs - this.perMs
    let h = this.head
    const times = this.times
    while (h < times.length && times[h] <= cutoff) {
      const c = this.counts[h]
      this.held += c
      this.pending -= c
      h++
    }
    if (h === times.length) {
      if (h > 0) { this.times = []; this.counts = []; h = 0 }
    } else if (h > 64 && h * 2 > times.length) {
      this.times = times.slice(h)
      this.counts = this.counts.slice(h)
      h = 0
    }
    this.head = h
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held < count) return false
    this.record(count, nowMs)
    return true
  }

  private record (count: number, nowMs: number): void {
    this.held -= count
    this.pending += count
    const last = this.times.length - 1
    if (last >= this.head && this.times[last] === nowMs) {
      this.counts[last] += count
    } else {
      this.times.push(nowMs)
      this.counts.push(count)
    }
  }

  outstanding (nowMs: number): number {
    this.advance(nowMs)
    return this.pending
  }

  waitFor (count: number, nowMs: number): number {
    this.advance(nowMs)
    let need = count - this.held
    if (need <= 0) return 0
    for (let i = this.head; i < this.times.length; i++) {
      need -= this.counts[i]
      if (need <= 0) return this.times[i] + this.perMs - nowMs
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const n = this.times.length
    return n > this.head ? this.times[n - 1] + this.perMs - nowMs : 0
  }

  forceSpend (count: number, nowMs: number): void {
    this.advance(nowMs)
    const n = Math.min(count, this.held)
    if (n > 0) this.record(n, nowMs)
  }

  credit (count: number): void { this.held += count }

  debit (count: number): number {
    const n = Math.min(count, this.held)
    this.held -= n
    return n
  }
}
