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
 * nothing is outstanding) and its held tokens; not its outstanding ones
 * (`pending`, a field fewer: 8 bytes a key). They are, kept in the same
 * order of additions as a field would be:
 * - 0 exactly while there is no block;
 * - a UNITS block's size: every entry holds one token and the total was
 *   only ever changed by adding and subtracting 1, an exact integer;
 * - a PAIRS block's own double (`pendingAt`), added to and subtracted from
 *   as the field was. A log turns to UNITS only when that total equals its
 *   size exactly (fractional transfers can leave a total a rounding off), and
 *   a PAIRS log whose entries are all back keeps an empty block while its
 *   total is such a residue, not 0 (the field would have kept it). A fresh log holds one entry; a full one is copied
 * into a block twice as large, up to one entry per token of the share (each
 * entry holds at least one token, so a ring that size is never full when a
 * spend is admitted); one at most a quarter full is copied into a block half
 * its size. A log turns to PAIRS when an entry's count is not 1, and back to
 * UNITS when it is copied and every count is 1 again.
 *
 * So a key with one live spend costs a block of 16 bytes, and a key whose
 * share is all spent, one token at a time in distinct units, 4 per token
 * plus 8 (rounded up to 8 bytes): 48 at a limit of 10.
 */
import type { Bucket, BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'
import { PAIRS, UNITS, countsAt, headOf, logsOf, metaOf, pendingAt, setRing, sizeOf, type LogSlab } from './log-slab.js'

/** `log` when nothing is outstanding. */
const NO_LOG = -1

export class SlidingLogBucket extends KeyState implements Bucket {
  held: number
  /** The log's block in the rule's slab, or NO_LOG. */
  private log: number

  constructor (spec: BucketSpec, share: number) {
    super(spec)
    this.held = share
    this.log = NO_LOG
  }

  get share (): number { return this.held + this.pending }

  /** Spent tokens not yet returned (see the header: where they are kept). */
  private get pending (): number {
    const b = this.log
    return b === NO_LOG ? 0 : pendingOf(logsOf(this.h.spec), b)
  }

  advance (nowMs: number): void {
    const b = this.log
    if (b === NO_LOG) return
    const L = logsOf(this.h.spec)
    const u = L.u
    const f = L.f
    const last = L.atOrBefore(nowMs - this.h.spec.perMs)
    const cap = u[b] >>> 1
    const pairs = (u[b] & 1) === PAIRS
    const t0 = b + metaOf(cap)
    const p = pendingAt(b, cap)
    const size = sizeOf(u, b)
    let at = headOf(u, b)
    let n = size
    while (n > 0 && u[t0 + at] <= last) {
      if (pairs) {
        const c = f[p + 1 + at]
        this.held += c
        f[p] -= c
      } else {
        this.held += 1
      }
      n--
      at = at + 1 === cap ? 0 : at + 1
    }
    if (n === size) return
    if (n === 0 && (!pairs || f[p] === 0)) {
      L.release(b)
      this.log = NO_LOG
      return
    }
    setRing(u, b, at, n)
    if (n * 4 <= cap) this.log = this.copy(L, b, pendingOf(L, b), true, 0)
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
    const b = this.log
    if (b !== NO_LOG) {
      this.append(L, b, count, off)
      return
    }
    // No block: 0 outstanding, so `count` after this spend.
    const mode = count === 1 ? UNITS : PAIRS
    const fresh = L.alloc(1, mode)
    L.u[fresh + metaOf(1)] = off
    if (mode === PAIRS) {
      L.f[pendingAt(fresh, 1)] = count
      L.f[countsAt(fresh, 1)] = count
    }
    setRing(L.u, fresh, 0, 1)
    this.log = fresh
  }

  /** Add `count` at offset `off` to the log: merged into the newest entry, or a new entry. */
  private append (L: LogSlab, b: number, count: number, off: number): void {
    const u = L.u
    const cap = u[b] >>> 1
    const mode = u[b] & 1
    const n = sizeOf(u, b)
    // The total as the field had it: what was outstanding, plus this spend.
    const pending = pendingOf(L, b) + count
    let at = headOf(u, b) + n
    if (at >= cap) at -= cap
    const newest = at === 0 ? cap - 1 : at - 1
    if (n > 0 && u[b + metaOf(cap) + newest] === off) {
      if (mode === PAIRS) {
        L.f[countsAt(b, cap) + newest] += count
        L.f[pendingAt(b, cap)] = pending
      } else {
        const pairs = this.copy(L, b, pending, false, 0)
        L.f[countsAt(pairs, L.u[pairs] >>> 1) + n - 1] = 1 + count
        this.log = pairs
      }
    } else if (n < cap && (mode === PAIRS || count === 1)) {
      u[b + metaOf(cap) + at] = off
      if (mode === PAIRS) {
        L.f[countsAt(b, cap) + at] = count
        L.f[pendingAt(b, cap)] = pending
      }
      setRing(u, b, headOf(u, b), n + 1)
    } else {
      this.log = this.copy(L, b, pending, true, 1, off, count)
    }
  }

  /**
   * A new block holding the entries of block `from` (released) and, if
   * `extra` is 1, a new newest entry (`off`, `c`), with room for as many
   * again (but never more entries than the share has tokens, when they fit),
   * and `pending` outstanding. In UNITS if `units` allows it and every count
   * is 1 and `pending` is their number exactly (see the header), else PAIRS.
   */
  private copy (L: LogSlab, from: number, pending: number, units: boolean, extra: 0 | 1, off = 0, c = 0): number {
    const n = sizeOf(L.u, from)
    const need = n + extra
    const bound = Math.ceil(this.held + pending)
    let cap = 2 * need
    if (need <= bound && cap > bound) cap = bound
    // Only a log emptied to a residue (see the header) is copied with no entries.
    if (cap < 1) cap = 1
    const mode = units && pending === need && (extra === 0 || c === 1) && allOnes(L, from) ? UNITS : PAIRS
    const b = L.alloc(cap, mode)
    // Read after alloc: the slab may have grown.
    const u = L.u
    const f = L.f
    const fromCap = u[from] >>> 1
    const fromPairs = (u[from] & 1) === PAIRS
    const fromT = from + metaOf(fromCap)
    const fc = countsAt(from, fromCap)
    const t = b + metaOf(cap)
    const tc = countsAt(b, cap)
    let at = headOf(u, from)
    for (let k = 0; k < n; k++) {
      u[t + k] = u[fromT + at]
      if (mode === PAIRS) f[tc + k] = fromPairs ? f[fc + at] : 1
      at = at + 1 === fromCap ? 0 : at + 1
    }
    if (extra === 1) {
      u[t + n] = off
      if (mode === PAIRS) f[tc + n] = c
    }
    if (mode === PAIRS) f[tc - 1] = pending
    setRing(u, b, 0, need)
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
    const t0 = b + metaOf(cap)
    let at = headOf(u, b)
    for (let k = sizeOf(u, b); k > 0; k--) {
      need -= pairs ? L.f[c0 + at] : 1
      if (need <= 0) return L.time(u[t0 + at]) + this.h.spec.perMs - nowMs
      at = at + 1 === cap ? 0 : at + 1
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const b = this.log
    if (b === NO_LOG) return 0
    const L = logsOf(this.h.spec)
    const u = L.u
    const n = sizeOf(u, b)
    // An empty block (a residue, see the header): nothing is out.
    if (n === 0) return 0
    const cap = u[b] >>> 1
    let newest = headOf(u, b) + n - 1
    if (newest >= cap) newest -= cap
    const perMs = this.h.spec.perMs
    // A spend logged up to a unit after it was made is not reported as back later than one period from now.
    return Math.min(perMs, L.time(u[b + metaOf(cap) + newest]) + perMs - nowMs)
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

/** The tokens block `b` has outstanding: its size in UNITS, its total in PAIRS. */
function pendingOf (L: LogSlab, b: number): number {
  const u = L.u
  return (u[b] & 1) === PAIRS ? L.f[pendingAt(b, u[b] >>> 1)] : sizeOf(u, b)
}

/** Whether every live entry of block `b` has count 1. */
function allOnes (L: LogSlab, b: number): boolean {
  const u = L.u
  if ((u[b] & 1) === UNITS) return true
  const cap = u[b] >>> 1
  const c0 = countsAt(b, cap)
  let at = headOf(u, b)
  for (let k = sizeOf(u, b); k > 0; k--) {
    if (L.f[c0 + at] !== 1) return false
    at = at + 1 === cap ? 0 : at + 1
  }
  return true
}
