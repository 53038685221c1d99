/**
 * Sliding log (exact): a token spent at time s returns to its spender at
 * s + perMs. So at any time t the tokens outstanding are exactly those spent in
 * (t - perMs, t], and no interval of length perMs ever admits more than the
 * share. Never 2x across a boundary.
 *
 * Data structure: a FIFO of (time, count) entries, oldest first. A spend at
 * the time of the newest entry merges into it, so the entries are at most
 * min(share, distinct spend times in one period). Times are kept as the
 * doubles they came in as (no offsets, no rounding), and every number is
 * added and subtracted in the same order as with one (time, count) pair per
 * entry, so each decision is bit for bit what that log decides. `log` is:
 *
 * - `null`: no entry (nothing outstanding);
 * - a number: ONE entry, at that time, whose count is `pending` (a key that
 *   spent once a period costs one 16-byte heap number). Only while the
 *   entry's count is bit-equal to `pending`: true from its first spend when
 *   `pending` was 0 before, and kept by merges, which add the same count to
 *   both;
 * - an array of doubles (V8 keeps them unboxed, 8 bytes each): a ring,
 *   `[head, size, stride, ...slots]`, its `size` live entries oldest first
 *   from slot `head`, wrapping around. Stride 1 (`UNITS`): each entry is a
 *   time of count 1, the common case, 8 bytes per token. Stride 2 (`PAIRS`):
 *   time, count. A log turns to pairs when an entry's count is not 1, and
 *   back to units when it is copied (grown, shrunk) and every count is 1
 *   again. Its capacity is managed here, not by `push` (which adds 17 slots
 *   to a small array): it doubles when full, up to one entry per token of
 *   the share (each entry holds at least one token, so a ring that size is
 *   never full when a spend is admitted), and halves when at most a quarter
 *   is in use.
 *
 * So a key with one live spend costs 16 bytes of log, and a key whose share
 * is all spent, one token at a time at distinct times, 8 per token plus 72.
 */
import type { Bucket, BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'

/** Array slots before the ring: head (the oldest entry's slot), size (live entries), stride. */
const META = 3
const UNITS = 1
const PAIRS = 2
/** An array log with no entries: what a log that was null is copied from. */
const EMPTY: readonly number[] = [META, 0, PAIRS]
/** The smallest array worth halving (in entries). */
const SHRINK_FROM = 16

export class SlidingLogBucket extends KeyState implements Bucket {
  held: number
  private pending: number
  /** The log (see the header): null, one entry's time, or an array. */
  private log: number | number[] | null

  constructor (spec: BucketSpec, share: number) {
    super(spec)
    this.held = share
    this.pending = 0
    this.log = null
  }

  get share (): number { return this.held + this.pending }

  advance (nowMs: number): void {
    const log = this.log
    if (log === null) return
    const cutoff = nowMs - this.h.spec.perMs
    if (typeof log === 'number') {
      if (log <= cutoff) {
        const c = this.pending
        this.held += c
        this.pending -= c
        this.log = null
      }
      return
    }
    const s = log[2]
    const size = log[1]
    let at = log[0]
    let n = size
    while (n > 0 && log[at] <= cutoff) {
      const c = s === UNITS ? 1 : log[at + 1]
      this.held += c
      this.pending -= c
      n--
      at += s
      if (at === log.length) at = META
    }
    if (n === size) return
    if (n === 0) {
      this.log = null
    } else if (n === 1 && (s === UNITS ? 1 : log[at + 1]) === this.pending) {
      this.log = log[at]
    } else {
      log[0] = at
      log[1] = n
      const capacity = (log.length - META) / s
      if (capacity >= SHRINK_FROM && n * 4 <= capacity) this.log = this.copy(log, allOnes(log) ? UNITS : s, 0)
    }
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held < count) return false
    this.record(count, nowMs)
    return true
  }

  private record (count: number, nowMs: number): void {
    const before = this.pending
    this.held -= count
    this.pending = before + count
    const log = this.log
    if (log === null) {
      // `pending` was 0 (or a float residue that the count absorbed): one entry whose count it is.
      this.log = this.pending === count ? nowMs : this.copy(EMPTY, PAIRS, 1, nowMs, count)
    } else if (typeof log === 'number') {
      // The entry's count was `before`; a merge adds `count` to it as to `pending`.
      if (log === nowMs) return
      const first = before === 1 ? [META, 1, UNITS, log] : [META, 1, PAIRS, log, before]
      this.log = this.copy(first, before === 1 && count === 1 ? UNITS : PAIRS, 1, nowMs, count)
    } else {
      this.append(log, count, nowMs)
    }
  }

  /** Add `count` at `nowMs` to an array log: merged into the newest entry, or a new entry. */
  private append (log: number[], count: number, nowMs: number): void {
    const s = log[2]
    const n = log[1]
    const newest = newestAt(log)
    if (log[newest] === nowMs) {
      if (s === PAIRS) {
        log[newest + 1] += count
      } else {
        const pairs = this.copy(log, PAIRS, 0)
        pairs[META + PAIRS * n - 1] = 1 + count
        this.log = pairs
      }
    } else if (s === UNITS && count !== 1) {
      this.log = this.copy(log, PAIRS, 1, nowMs, count)
    } else if (s * n < log.length - META) {
      const at = newest + s === log.length ? META : newest + s
      log[at] = nowMs
      if (s === PAIRS) log[at + 1] = count
      log[1] = n + 1
    } else {
      this.log = this.copy(log, s === PAIRS && count === 1 && allOnes(log) ? UNITS : s, 1, nowMs, count)
    }
  }

  /**
   * A new array log of stride `s` holding the entries of `from` and, if
   * `extra` is 1, a new newest entry (`t`, `c`), with room for as many again
   * (but never more entries than the share has tokens, when they fit).
   */
  private copy (from: readonly number[], s: number, extra: 0 | 1, t = 0, c = 0): number[] {
    const n = from[1]
    const need = n + extra
    const bound = Math.ceil(this.held + this.pending)
    let capacity = 2 * need
    if (need <= bound && capacity > bound) capacity = bound
    // Unused slots stay holes: they are never read.
    const a = new Array<number>(META + s * capacity)
    const fs = from[2]
    let at = from[0]
    let j = META
    for (let k = 0; k < n; k++) {
      a[j] = from[at]
      if (s === PAIRS) a[j + 1] = fs === UNITS ? 1 : from[at + 1]
      j += s
      at += fs
      if (at === from.length) at = META
    }
    if (extra === 1) {
      a[j] = t
      if (s === PAIRS) a[j + 1] = c
    }
    a[0] = META
    a[1] = need
    a[2] = s
    return a
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
    if (log === null) return Infinity
    if (typeof log === 'number') {
      need -= this.pending
      return need <= 0 ? log + this.h.spec.perMs - nowMs : Infinity
    }
    const s = log[2]
    let at = log[0]
    for (let k = log[1]; k > 0; k--) {
      need -= s === UNITS ? 1 : log[at + 1]
      if (need <= 0) return log[at] + this.h.spec.perMs - nowMs
      at += s
      if (at === log.length) at = META
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const log = this.log
    if (log === null) return 0
    const newest = typeof log === 'number' ? log : log[newestAt(log)]
    return newest + this.h.spec.perMs - nowMs
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

/** The slot of an array log's newest entry (its time; its count follows in pairs). */
function newestAt (log: readonly number[]): number {
  const at = log[0] + log[2] * (log[1] - 1)
  return at < log.length ? at : at - (log.length - META)
}

/** Whether every live entry of an array log has count 1. */
function allOnes (log: number[]): boolean {
  if (log[2] === UNITS) return true
  let at = log[0]
  for (let k = log[1]; k > 0; k--) {
    if (log[at + 1] !== 1) return false
    at += PAIRS
    if (at === log.length) at = META
  }
  return true
}
