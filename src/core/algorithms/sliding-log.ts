/**
 * Sliding log (exact): a token spent at time s returns to its spender at
 * s + perMs. So at any time t the tokens outstanding are exactly those spent in
 * (t - perMs, t], and no interval of length perMs ever admits more than the
 * share. Never 2x across a boundary.
 *
 * Data structure: a FIFO of (time, count) entries, oldest first, kept in a
 * block of the rule's slab (log-slab.ts: a ring of 32-bit times, and counts
 * as doubles only while one is not 1). Times are recorded rounded UP to the
 * slab's unit (~16 µs for periods up to ~2.3 h): a token may come back up
 * to one unit late, never early, so the limit stays exact. A spend in the
 * unit of the newest entry merges into it, so the entries are at most
 * min(share, distinct units spent in one period). Every number is added and
 * subtracted in the same order as with one (rounded time, count) pair per
 * entry, so each decision is bit for bit what that log decides.
 *
 * The key keeps its block's offset (`log`, a small integer; NO_LOG while
 * nothing is outstanding). A fresh log holds one entry; a full one is copied
 * into a block twice as large, up to one entry per token of the share (each
 * entry holds at least one token, so a ring that size is never full when a
 * spend is admitted); one at most a quarter full is copied into a block half
 * its size. A log turns to PAIRS when an entry's count is not 1, and back to
 * UNITS when it is copied and every count is 1 again.
 *
 * So a key with one live spend costs a block of 16 bytes, and a key whose
 * share is all spent, one token at a time in distinct units, 4 per token
 * plus 12 (rounded up to 8 bytes).
 */
import type { Bucket, BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'
import { META, PAIRS, UNITS, countsAt, logsOf, type LogSlab } from './log-slab.js'

/** `log` when nothing is outstanding. */
const NO_LOG = -1

export class SlidingLogBucket extends KeyState implements Bucket {
  held: number
  private pending: number
  /** The log's block in the rule's slab, or NO_LOG. */
  private log: number

  constructor (spec: BucketSpec, share: number) {
    super(spec)
    this.held = share
    this.pending = 0
    this.log = NO_LOG
  }

  get share (): number { return this.held + this.pending }

  advance (nowMs: number): void {
    const b = this.log
    if (b === NO_LOG) return
    const L = logsOf(this.h.spec)
    const u = L.u
    const last = L.atOrBefore(nowMs - this.h.spec.perMs)
    const cap = u[b] >>> 1
    const pairs = (u[b] & 1) === PAIRS
    const c0 = countsAt(b, cap)
    const size = u[b + 2]
    let at = u[b + 1]
    let n = size
    while (n > 0 && u[b + META + at] <= last) {
      const c = pairs ? L.f[c0 + at] : 1
      this.held += c
      this.pending -= c
      n--
      at = at + 1 === cap ? 0 : at + 1
    }
    if (n === size) return
    if (n === 0) {
      L.release(b)
      this.log = NO_LOG
      return
    }
    u[b + 1] = at
    u[b + 2] = n
    if (n * 4 <= cap) this.log = this.copy(L, b, allOnes(L, b) ? UNITS : PAIRS, 0)
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held < count) return false
    this.record(count, nowMs)
    return true
  }

  private record (count: number, nowMs: number): void {
    const L = logsOf(this.h.spec)
    // First: it may rebase the slab's times.
    const off = L.offset(nowMs)
    this.held -= count
    this.pending += count
    const b = this.log
    if (b !== NO_LOG) {
      this.append(L, b, count, off)
      return
    }
    const mode = count === 1 ? UNITS : PAIRS
    const fresh = L.alloc(1, mode)
    L.u[fresh + META] = off
    if (mode === PAIRS) L.f[countsAt(fresh, 1)] = count
    L.u[fresh + 2] = 1
    this.log = fresh
  }

  /** Add `count` at offset `off` to the log: merged into the newest entry, or a new entry. */
  private append (L: LogSlab, b: number, count: number, off: number): void {
    const u = L.u
    const cap = u[b] >>> 1
    const mode = u[b] & 1
    const n = u[b + 2]
    const newest = newestOf(u, b)
    if (u[b + META + newest] === off) {
      if (mode === PAIRS) {
        L.f[countsAt(b, cap) + newest] += count
      } else {
        const pairs = this.copy(L, b, PAIRS, 0)
        L.f[countsAt(pairs, L.u[pairs] >>> 1) + n - 1] = 1 + count
        this.log = pairs
      }
    } else if (mode === UNITS && count !== 1) {
      this.log = this.copy(L, b, PAIRS, 1, off, count)
    } else if (n < cap) {
      const at = newest + 1 === cap ? 0 : newest + 1
      u[b + META + at] = off
      if (mode === PAIRS) L.f[countsAt(b, cap) + at] = count
      u[b + 2] = n + 1
    } else {
      this.log = this.copy(L, b, mode === PAIRS && count === 1 && allOnes(L, b) ? UNITS : mode, 1, off, count)
    }
  }

  /**
   * A new block in `mode` holding the entries of block `from` (released) and,
   * if `extra` is 1, a new newest entry (`off`, `c`), with room for as many
   * again (but never more entries than the share has tokens, when they fit).
   */
  private copy (L: LogSlab, from: number, mode: number, extra: 0 | 1, off = 0, c = 0): number {
    const n = L.u[from + 2]
    const need = n + extra
    const bound = Math.ceil(this.held + this.pending)
    let cap = 2 * need
    if (need <= bound && cap > bound) cap = bound
    const b = L.alloc(cap, mode)
    // Read after alloc: the slab may have grown.
    const u = L.u
    const f = L.f
    const fromCap = u[from] >>> 1
    const fromPairs = (u[from] & 1) === PAIRS
    const fc = countsAt(from, fromCap)
    const tc = countsAt(b, cap)
    let at = u[from + 1]
    for (let k = 0; k < n; k++) {
      u[b + META + k] = u[from + META + at]
      if (mode === PAIRS) f[tc + k] = fromPairs ? f[fc + at] : 1
      at = at + 1 === fromCap ? 0 : at + 1
    }
    if (extra === 1) {
      u[b + META + n] = off
      if (mode === PAIRS) f[tc + n] = c
    }
    u[b + 2] = need
    L.release(from)
    return b
  }

  outstanding (nowMs: number): number {
    this.advance(nowMs)
    return this.pending
  }

  waitFor (count: number, nowMs: number): number {
    this.advance(nowMs)
    let need = count - this.held
    if (need <= 0) return 0
    const b = this.log
    if (b === NO_LOG) return Infinity
    const L = logsOf(this.h.spec)
    const u = L.u
    const cap = u[b] >>> 1
    const pairs = (u[b] & 1) === PAIRS
    const c0 = countsAt(b, cap)
    let at = u[b + 1]
    for (let k = u[b + 2]; k > 0; k--) {
      need -= pairs ? L.f[c0 + at] : 1
      if (need <= 0) return L.time(u[b + META + at]) + this.h.spec.perMs - nowMs
      at = at + 1 === cap ? 0 : at + 1
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const b = this.log
    if (b === NO_LOG) return 0
    const L = logsOf(this.h.spec)
    const perMs = this.h.spec.perMs
    // A spend logged up to a unit after it was made is not reported as back later than one period from now.
    return Math.min(perMs, L.time(L.u[b + META + newestOf(L.u, b)]) + perMs - nowMs)
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

  release (): void {
    const b = this.log
    if (b === NO_LOG) return
    logsOf(this.h.spec).release(b)
    this.log = NO_LOG
  }
}

/** The index of block `b`'s newest entry. */
function newestOf (u: Uint32Array, b: number): number {
  const at = u[b + 1] + u[b + 2] - 1
  const cap = u[b] >>> 1
  return at < cap ? at : at - cap
}

/** Whether every live entry of block `b` has count 1. */
function allOnes (L: LogSlab, b: number): boolean {
  const u = L.u
  if ((u[b] & 1) === UNITS) return true
  const cap = u[b] >>> 1
  const c0 = countsAt(b, cap)
  let at = u[b + 1]
  for (let k = u[b + 2]; k > 0; k--) {
    if (L.f[c0 + at] !== 1) return false
    at = at + 1 === cap ? 0 : at + 1
  }
  return true
}
