/**
 * Sliding log (exact): a token spent at time s returns to its spender at
 * s + perMs. So at any time t the tokens outstanding are exactly those spent in
 * (t - perMs, t], and no interval of length perMs ever admits more than the
 * share. Never 2x across a boundary.
 *
 * Data structure: a FIFO of (time, count) spends, interleaved in one array
 * of numbers [t0, c0, t1, c1, ...] with a head index (in entries); spends in
 * the same millisecond merge into one entry, so memory is bounded by
 * min(share, distinct spend milliseconds in one period). The array is made
 * on the first spend with room for just that entry (V8 gives an array that
 * first grows by `push` room for 17 elements, and a key that spends once a
 * period needs 2), dropped when the log empties, and compacted when the
 * consumed prefix grows past half.
 */
import type { Bucket, BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'

export class SlidingLogBucket extends KeyState implements Bucket {
  held: number
  private pending: number
  /** [time, count] pairs, oldest first from entry `head`; null when empty. */
  private log: number[] | null
  private head: number

  constructor (spec: BucketSpec, share: number) {
    super(spec)
    this.held = share
    this.pending = 0
    this.log = null
    this.head = 0
  }

  get share (): number { return this.held + this.pending }

  /** Entries in the log, consumed ones included. */
  private get length (): number { return this.log === null ? 0 : this.log.length >> 1 }

  advance (nowMs: number): void {
    const log = this.log
    if (log === null) return
    const cutoff = nowMs - this.h.spec.perMs
    const n = log.length >> 1
    let h = this.head
    while (h < n && log[2 * h] <= cutoff) {
      const c = log[2 * h + 1]
      this.held += c
      this.pending -= c
      h++
    }
    if (h === n) {
      this.log = null
      h = 0
    } else if (h > 64 && h * 2 > n) {
      this.log = log.slice(2 * h)
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
    const log = this.log
    if (log === null) {
      this.log = [nowMs, count]
      return
    }
    const last = (log.length >> 1) - 1
    if (last >= this.head && log[2 * last] === nowMs) {
      log[2 * last + 1] += count
    } else {
      log.push(nowMs, count)
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
    const log = this.log
    const n = this.length
    for (let i = this.head; i < n; i++) {
      need -= (log as number[])[2 * i + 1]
      if (need <= 0) return (log as number[])[2 * i] + this.h.spec.perMs - nowMs
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const n = this.length
    return n > this.head ? (this.log as number[])[2 * (n - 1)] + this.h.spec.perMs - nowMs : 0
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
