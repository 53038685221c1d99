/**
 * Sliding log (exact): a token spent at time s returns to its spender at
 * s + perMs. So at any time t the tokens outstanding are exactly those spent in
 * (t - perMs, t], and no interval of length perMs ever admits more than the
 * share. Never 2x across a boundary.
 *
 * Data structure: a FIFO of (time, count) entries, oldest first, kept in a
 * block of the rule's slab (log-slab.ts: a ring of 24- or 32-bit times, and counts
 * as doubles only while one is not 1). Times are recorded rounded UP to the
 * slab's unit (~16 µs for periods up to ~2.3 h): a token may come back up
 * to one unit late, never early, so the limit stays exact. A spend in the
 * unit of the newest entry merges into it, so the entries are at most
 * min(share, distinct units spent in one period). Every number is added and
 * subtracted in the same order as with one (rounded time, count) pair per
 * entry, so each decision is bit for bit what that log decides.
 *
 * The key has ONE field of its own, `s` (8 bytes a key fewer than a field
 * for the block and one for the held tokens):
 * - while nothing is outstanding there is no block, and `s` is 0 - held
 *   (<= 0: held is never negative there; a negative held, which no caller
 *   makes, is kept in an empty PAIRS block instead). Negation is exact, so
 *   held reads back bit for bit;
 * - else `s` is the block's handle (> 0), and the block keeps held: a word
 *   in UNITS (an integer below 2^32, below 2^22 where times are 3 bytes:
 *   LogSlab.heldFits), a double in PAIRS (a UNITS block whose held no longer
 *   fits is copied to PAIRS).
 * The outstanding tokens (`pending`) are, kept in the same order of
 * additions as a field would be:
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
 * share is all spent, one token at a time in distinct units, 3 per token
 * plus 8 (rounded up to 8 bytes) for periods up to ~3 minutes, 4 per token
 * plus 8 for longer ones: 40 or 48 at a limit of 10.
 */
import type { Bucket, BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'
import { PAGE_BITS, PAIRS, UNITS, logsOf, type LogSlab } from './log-slab.js'

export class SlidingLogBucket extends KeyState implements Bucket {
  /** The log's block handle (> 0), or, with no block, 0 - held (<= 0; see the header). */
  private s: number

  constructor (spec: BucketSpec, share: number) {
    super(spec)
    this.s = 0
    this.setHeld(share)
  }

  /** Spendable tokens: in the block, or in `s` while there is none. */
  get held (): number {
    const b = this.s
    return b <= 0 ? 0 - b : heldOf(logsOf(this.h.spec), b)
  }

  get share (): number { return this.held + this.pending }

  /** Spent tokens not yet returned (see the header: where they are kept). */
  private get pending (): number {
    const b = this.s
    return b <= 0 ? 0 : pendingOf(logsOf(this.h.spec), b)
  }

  advance (nowMs: number): void {
    const b = this.s
    if (b <= 0) return
    const L = logsOf(this.h.spec)
    const last = L.atOrBefore(nowMs - this.h.spec.perMs)
    const size = L.sizeOf(b)
    let at = L.headOf(b)
    // Nothing due: the common case reads no more than this.
    if (size === 0 || L.timeAt(b, at) > last) return
    const cap = L.capOf(b)
    const f = L.dpages[b >>> PAGE_BITS]
    const pairs = L.isPairs(b)
    const p = pairs ? L.pendingAt(b) : 0
    let held = pairs ? f[p + 1] : L.unitsHeld(b)
    let n = size
    while (n > 0 && L.timeAt(b, at) <= last) {
      if (pairs) {
        const c = f[p + 2 + at]
        held += c
        f[p] -= c
      } else {
        held += 1
      }
      n--
      at = at + 1 === cap ? 0 : at + 1
    }
    if (n === 0 && (!pairs || f[p] === 0) && held >= 0) {
      L.release(b)
      this.s = 0 - held
      return
    }
    L.setRing(b, at, n)
    if (pairs) f[p + 1] = held
    else if (L.heldFits(held)) L.setUnitsHeld(b, held)
    else {
      // Past what a word holds (a share that large): pairs keep held as a double.
      this.s = this.copy(L, b, held, n, false, 0)
      return
    }
    if (n * 4 <= cap) this.s = this.copy(L, b, held, pendingOf(L, b), true, 0)
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
    const b = this.s
    if (b > 0) {
      this.append(L, b, count, off)
      return
    }
    // No block: 0 outstanding, so `count` after this spend.
    const held = (0 - b) - count
    const mode = count === 1 && L.heldFits(held) ? UNITS : PAIRS
    const fresh = L.alloc(1, mode, off, off)
    L.setTimeAt(fresh, 0, off)
    if (mode === PAIRS) {
      const f = L.dpages[fresh >>> PAGE_BITS]
      const p = L.pendingAt(fresh)
      f[p] = count
      f[p + 1] = held
      f[p + 2] = count
    } else {
      L.setUnitsHeld(fresh, held)
    }
    L.setRing(fresh, 0, 1)
    this.s = fresh
  }

  /** Add `count` at offset `off` to the log: merged into the newest entry, or a new entry. */
  private append (L: LogSlab, b: number, count: number, off: number): void {
    const f = L.dpages[b >>> PAGE_BITS]
    const cap = L.capOf(b)
    const pairs = L.isPairs(b)
    const n = L.sizeOf(b)
    // The numbers as the fields had them: held less this spend, what was outstanding plus it.
    const held = heldOf(L, b) - count
    const pending = pendingOf(L, b) + count
    let at = L.headOf(b) + n
    if (at >= cap) at -= cap
    const newest = at === 0 ? cap - 1 : at - 1
    if (n > 0 && L.timeAt(b, newest) === off) {
      if (pairs) {
        const p = L.pendingAt(b)
        f[p + 2 + newest] += count
        f[p] = pending
        f[p + 1] = held
      } else {
        const to = this.copy(L, b, held, pending, false, 0)
        L.dpages[to >>> PAGE_BITS][L.pendingAt(to) + 2 + n - 1] = 1 + count
        this.s = to
      }
    } else if (n < cap && (pairs || (count === 1 && L.heldFits(held))) && (L.fits(b, off) || L.rebaseBlock(b, off))) {
      L.setTimeAt(b, at, off)
      if (pairs) {
        const p = L.pendingAt(b)
        f[p + 2 + at] = count
        f[p] = pending
        f[p + 1] = held
      } else {
        L.setUnitsHeld(b, held)
      }
      L.setRing(b, L.headOf(b), n + 1)
    } else {
      // Full, a count or held a UNITS block cannot keep, or times too far apart for a packed block (see log-slab.ts).
      this.s = this.copy(L, b, held, pending, true, 1, off, count)
    }
  }

  /**
   * A new block holding the entries of block `from` (released) and, if
   * `extra` is 1, a new newest entry (`off`, `c`), with room for as many
   * again (but never more entries than the share has tokens, when they fit),
   * `held` and `pending` outstanding. In UNITS if `units` allows it, every
   * count is 1, `pending` is their number exactly (see the header) and
   * `held` fits a word; else PAIRS. Packed if its times fit (log-slab.ts).
   */
  private copy (L: LogSlab, from: number, held: number, pending: number, units: boolean, extra: 0 | 1, off = 0, c = 0): number {
    const n = L.sizeOf(from)
    const need = n + extra
    const bound = Math.ceil(held + pending)
    let cap = 2 * need
    if (need <= bound && cap > bound) cap = bound
    // Only a log emptied to a residue (see the header) is copied with no entries.
    if (cap < 1) cap = 1
    const mode = units && pending === need && (extra === 0 || c === 1) && L.heldFits(held) && allOnes(L, from) ? UNITS : PAIRS
    const fromCap = L.capOf(from)
    const head = L.headOf(from)
    let lo = extra === 1 ? off : NaN
    let hi = lo
    for (let k = 0, at = head; k < n; k++, at = at + 1 === fromCap ? 0 : at + 1) {
      const v = L.timeAt(from, at)
      if (!(v >= lo)) lo = v
      if (!(v <= hi)) hi = v
    }
    const b = L.alloc(cap, mode, lo, hi)
    // Read after alloc: the slab's first page may have grown.
    const ff = L.dpages[from >>> PAGE_BITS]
    const f = L.dpages[b >>> PAGE_BITS]
    const fromPairs = L.isPairs(from)
    const fc = fromPairs ? L.pendingAt(from) + 2 : 0
    const tc = L.pendingAt(b) + 2
    for (let k = 0, at = head; k < n; k++, at = at + 1 === fromCap ? 0 : at + 1) {
      L.setTimeAt(b, k, L.timeAt(from, at))
      if (mode === PAIRS) f[tc + k] = fromPairs ? ff[fc + at] : 1
    }
    if (extra === 1) {
      L.setTimeAt(b, n, off)
      if (mode === PAIRS) f[tc + n] = c
    }
    if (mode === PAIRS) {
      f[tc - 2] = pending
      f[tc - 1] = held
    } else {
      L.setUnitsHeld(b, held)
    }
    L.setRing(b, 0, need)
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
    const b = this.s
    if (b <= 0) return Infinity
    const L = logsOf(this.h.spec)
    const f = L.dpages[b >>> PAGE_BITS]
    const cap = L.capOf(b)
    const pairs = L.isPairs(b)
    const c0 = pairs ? L.pendingAt(b) + 2 : 0
    let at = L.headOf(b)
    for (let k = L.sizeOf(b); k > 0; k--) {
      need -= pairs ? f[c0 + at] : 1
      if (need <= 0) return L.time(L.timeAt(b, at)) + this.h.spec.perMs - nowMs
      at = at + 1 === cap ? 0 : at + 1
    }
    return Infinity
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const b = this.s
    if (b <= 0) return 0
    const L = logsOf(this.h.spec)
    const n = L.sizeOf(b)
    // An empty block (a residue, see the header): nothing is out.
    if (n === 0) return 0
    const cap = L.capOf(b)
    let newest = L.headOf(b) + n - 1
    if (newest >= cap) newest -= cap
    const perMs = this.h.spec.perMs
    // A spend logged up to a unit after it was made is not reported as back later than one period from now.
    return Math.min(perMs, L.time(L.timeAt(b, newest)) + perMs - nowMs)
  }

  forceSpend (count: number, nowMs: number): void {
    this.advance(nowMs)
    const n = Math.min(count, this.held)
    if (n > 0) this.record(n, nowMs)
  }

  credit (count: number): void { this.setHeld(this.held + count) }

  debit (count: number): number {
    const held = this.held
    const n = Math.min(count, held)
    this.setHeld(held - n)
    return n
  }

  release (): void {
    const b = this.s
    if (b <= 0) return
    const L = logsOf(this.h.spec)
    const held = heldOf(L, b)
    L.release(b)
    // Its key is gone: nothing reads it again but `held` (a negative one is not kept).
    this.s = held >= 0 ? 0 - held : 0
  }

  /** Store `held` where it is kept (see the header): in `s` with no block, else in the block, which turns to PAIRS if a word cannot hold it. */
  private setHeld (held: number): void {
    const b = this.s
    const L = b > 0 || !(held >= 0) ? logsOf(this.h.spec) : null
    if (L === null) {
      this.s = 0 - held
    } else if (b <= 0) {
      // A negative (or NaN) held with no block: an empty PAIRS block keeps it, as a residue does.
      const e = L.alloc(1, PAIRS)
      const p = L.pendingAt(e)
      L.dpages[e >>> PAGE_BITS][p] = 0
      L.dpages[e >>> PAGE_BITS][p + 1] = held
      this.s = e
    } else if (L.isPairs(b)) {
      L.dpages[b >>> PAGE_BITS][L.pendingAt(b) + 1] = held
    } else if (L.heldFits(held)) {
      L.setUnitsHeld(b, held)
    } else {
      this.s = this.copy(L, b, held, L.sizeOf(b), false, 0)
    }
  }
}

/** The held tokens of block `b`: a word in UNITS, a double in PAIRS. */
function heldOf (L: LogSlab, b: number): number {
  return L.isPairs(b) ? L.dpages[b >>> PAGE_BITS][L.pendingAt(b) + 1] : L.unitsHeld(b)
}

/** The tokens block `b` has outstanding: its size in UNITS, its total in PAIRS. */
function pendingOf (L: LogSlab, b: number): number {
  return L.isPairs(b) ? L.dpages[b >>> PAGE_BITS][L.pendingAt(b)] : L.sizeOf(b)
}

/** Whether every live entry of block `b` has count 1. */
function allOnes (L: LogSlab, b: number): boolean {
  if (!L.isPairs(b)) return true
  const f = L.dpages[b >>> PAGE_BITS]
  const cap = L.capOf(b)
  const c0 = L.pendingAt(b) + 2
  let at = L.headOf(b)
  for (let k = L.sizeOf(b); k > 0; k--) {
    if (f[c0 + at] !== 1) return false
    at = at + 1 === cap ? 0 : at + 1
  }
  return true
}
