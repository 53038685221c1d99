/**
 * The sliding logs of one rule's keys, in one slab of 32-bit words shared by
 * them all (one per BucketSpec), instead of an array per key.
 *
 * Why: a JS array costs 48 bytes before its first element (the array and
 * its store's header), and a double 8 bytes a time; a field of the key's
 * object 8 bytes. Here a key's log is a block of the slab: one word of ring
 * state, one of the key's held tokens, and 3 or 4 bytes per entry's time
 * (while every entry has count 1); once a count is not 1, a double per entry
 * for the counts, and doubles for their total and for the held tokens. The
 * key keeps only the block's handle, a small integer (no heap number), in
 * one field (sliding-log.ts).
 *
 * Times are kept as 32-bit offsets, in `unit`s, from the slab's `base`, and
 * every time is rounded UP to the unit as it is recorded: a spend at t is
 * logged at quantize(t) >= t, so its tokens return at most one unit later
 * than at t + perMs, never earlier. The limit stays exact as a hard limit (no
 * interval of perMs admits more than the share); answers may be one unit
 * late. The unit is a power of two of ms: 2^-6 ms (~16 µs), or coarser for
 * periods over ~2.3 hours, so that 2^29 units always cover a period. Being
 * a power of two, quantize(t) and every stored time are exact doubles, and
 * every answer is bit for bit that of a log of (quantize(t), count) pairs
 * (test/sliding-log-layout.test.ts checks it against one).
 *
 * Packed times (3 bytes): in a slab whose period is at most 3 * 2^22 units
 * (~3 minutes at the finest unit: `packed`), a narrow block keeps each time
 * as 24 bits above a base of its own, a multiple of STEP = 2^22 units kept
 * in the top 10 bits of its second word (so its held tokens there are 22
 * bits: a larger held is kept as a double, in PAIRS). Invariant: every live
 * time of a packed block is in [base, base + 2^24). The live times of a log
 * lie within one period of the newest (older ones are given back before a
 * spend is recorded), so a block whose base is the oldest time rounded down
 * to STEP holds them; a time that does not fit moves the base (rebaseBlock),
 * and if the times still span more than 2^24 units (a clock that ran back
 * in a bucket the limiter does not clamp) the log is copied to a wide block,
 * which keeps 32-bit times. So the 3-byte form is a layout only: every time
 * reads back exactly as its 32-bit offset.
 *
 * Rebasing: a time whose offset falls outside 32 bits moves the base to 2^31
 * units before it, rounded down to STEP (~9 hours at the finest unit, 4
 * periods or more in any case), and every live entry of the slab is
 * shifted, in one pass over it (a packed block shifts its base only).
 * Entries that would fall below the new base are older than 4 periods before
 * the newest time, so expired (the limiter's clock never runs back): they are
 * kept at the base, still expired and still in order, until their key is next
 * touched and gives their tokens back.
 *
 * Blocks. A block's first word holds its mode (bit 0: UNITS, every count is
 * 1 and not stored; PAIRS, counts as doubles), whether it is wide (bit 1),
 * and its capacity; a narrow block (capacity up to 1023) also its ring's
 * head (oldest entry's index) and size, 10 bits each; a wide one (any
 * capacity) keeps them in the next two words. Then one word of held tokens
 * (UNITS; a PAIRS block keeps them as a double and uses this word for its
 * base only), then the times, `metaOf` words from the start. A PAIRS block
 * goes on, 8-byte aligned, with doubles: the outstanding total, the held
 * tokens, one count per entry. So a packed block of 10 units is 10 words
 * (40 bytes) and holds all of its key's numbers. Blocks start at even words.
 * A freed block keeps its first word, has size 0 and its first time word
 * holds the next free block of its length (free lists by length, reused
 * first).
 *
 * Pages: the slab's memory is a list of pages (slab-pages.ts), and a
 * block's handle its word in their page-major address space, > 0.
 */
import type { BucketSpec } from './bucket.js'
import { FIRST, PAGE_BITS, PAGE_MASK, SlabPages } from './slab-pages.js'

export { PAGE_BITS, PAGE_MASK, PAGE_WORDS } from './slab-pages.js'

export const UNITS = 0
export const PAIRS = 1
/** Bit 1 of a block's first word: head and size are in words of their own, times are 32 bits. */
const WIDE = 2
/** The largest capacity of a narrow block (head and size in its first word). */
const NARROW = 0x3FF


const SPAN = 2 ** 32
const HALF = 2 ** 31
/** A packed block's base is a multiple of STEP units; its times are below base + PACKED_SPAN. */
export const STEP = 2 ** 22
export const PACKED_SPAN = 2 ** 24
/** A packed block's held tokens (UNITS) are below this; the base takes the word's top 10 bits. */
const HELD_BITS = 0x3FFFFF
/** The end of a free list. */
const NONE = 0xFFFFFFFF

/** The time unit for a period: a power of two of ms, at least 2^-6, such that 2^29 units cover the period. */
export function unitFor (perMs: number): number {
  let e = -6
  while (2 ** (e + 29) < perMs) e++
  return 2 ** e
}

/** `t` rounded up to a multiple of `unit` (a power of two: exact). */
export function quantize (t: number, unit: number): number {
  return Math.ceil(t / unit) * unit
}

/** The capacity of the block whose first word is `w0`. */
export function capOf (w0: number): number {
  return (w0 & WIDE) === 0 ? (w0 >>> 2) & NARROW : w0 >>> 2
}

/** Words before the times of the block whose first word is `w0`: the ring state (1 word narrow, 3 wide), then held. */
export function metaOf (w0: number): number {
  return (w0 & WIDE) === 0 ? 2 : 4
}

/** The slab of a spec's sliding logs, made on first use. */
export function logsOf (spec: BucketSpec): LogSlab {
  return spec.logs ?? (spec.logs = new LogSlab(spec.perMs))
}

export class LogSlab extends SlabPages {
  readonly unit: number
  /** Whether narrow blocks keep 3-byte times (see the header): a period of at most 3 * STEP units. */
  readonly packed: boolean
  /** The time of offset 0, in units; NaN until the first time. */
  private base = NaN
  /** The first free block of each length in words. */
  private readonly free = new Map<number, number>()

  constructor (perMs: number) {
    super()
    this.unit = unitFor(perMs)
    this.packed = perMs / this.unit <= PACKED_SPAN - STEP
  }

  /** The offset of `t` rounded up to the unit; rebases first if it falls outside 32 bits. */
  offset (t: number): number {
    const q = Math.ceil(t / this.unit)
    const off = q - this.base
    if (off >= 0 && off < SPAN) return off
    const base = Math.floor((q - HALF) / STEP) * STEP
    this.rebase(base)
    return q - base
  }

  /** The time at an offset (exact: an integer number of units). */
  time (off: number): number {
    return (this.base + off) * this.unit
  }

  /** Entries at or below this offset have times at or before `t` (may be out of 32 bits). */
  atOrBefore (t: number): number {
    return Math.floor(t / this.unit) - this.base
  }

  /** Whether held tokens `v` fit a UNITS block's word: an integer below 2^32, below 2^22 in a packed slab. */
  heldFits (v: number): boolean {
    return v >>> 0 === v && (!this.packed || v <= HELD_BITS)
  }

  /** Words a block of `cap` entries takes in `mode`, wide or not (PAIRS: a double per count, one for their total and one for held). */
  words (cap: number, mode: number, wide: boolean): number {
    const times = wide ? cap : this.packed ? (3 * cap + 3) >>> 2 : cap
    return (((wide ? 4 : 2) + times + 1) & ~1) + (mode === PAIRS ? 2 * cap + 4 : 0)
  }

  /** Words of the block whose first word is `w0`. */
  wordsOf (w0: number): number {
    return this.words(capOf(w0), w0 & 1, (w0 & WIDE) !== 0)
  }

  /** The first word of block `b`. */
  w0 (b: number): number {
    return this.pages[b >>> PAGE_BITS][b & PAGE_MASK]
  }

  capOf (b: number): number { return capOf(this.w0(b)) }

  isPairs (b: number): boolean { return (this.w0(b) & 1) === PAIRS }

  /** The ring index of block `b`'s oldest entry. */
  headOf (b: number): number {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    return (u[o] & WIDE) === 0 ? (u[o] >>> 12) & NARROW : u[o + 1]
  }

  /** How many entries block `b` holds. */
  sizeOf (b: number): number {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    return (u[o] & WIDE) === 0 ? u[o] >>> 22 : u[o + 2]
  }

  /** Set block `b`'s head and size (head < capacity, size <= capacity). */
  setRing (b: number, head: number, size: number): void {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    if ((u[o] & WIDE) === 0) {
      u[o] = (u[o] & 0xFFF) | (head << 12) | (size << 22)
    } else {
      u[o + 1] = head
      u[o + 2] = size
    }
  }

  /** Whether block `b` keeps 3-byte times. */
  private isPacked (b: number): boolean {
    return this.packed && (this.w0(b) & WIDE) === 0
  }

  /** The offset of the time in ring slot `i` of block `b`. */
  timeAt (b: number, i: number): number {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    if ((u[o] & WIDE) !== 0 || !this.packed) return u[o + metaOf(u[o]) + i]
    const x = this.bpages[b >>> PAGE_BITS]
    const k = 4 * (o + 2) + 3 * i
    return (u[o + 1] >>> 22) * STEP + (x[k] | (x[k + 1] << 8) | (x[k + 2] << 16))
  }

  /** Store offset `off` in ring slot `i` of block `b`; it must fit (`fits`). */
  setTimeAt (b: number, i: number, off: number): void {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    if ((u[o] & WIDE) !== 0 || !this.packed) {
      u[o + metaOf(u[o]) + i] = off
      return
    }
    const r = off - (u[o + 1] >>> 22) * STEP
    const x = this.bpages[b >>> PAGE_BITS]
    const k = 4 * (o + 2) + 3 * i
    x[k] = r & 0xFF
    x[k + 1] = (r >>> 8) & 0xFF
    x[k + 2] = r >>> 16
  }

  /** Whether offset `off` can be stored in block `b` as it is (always, unless packed: within its window). */
  fits (b: number, off: number): boolean {
    if (!this.isPacked(b)) return true
    const r = off - (this.pages[b >>> PAGE_BITS][(b & PAGE_MASK) + 1] >>> 22) * STEP
    return r >= 0 && r < PACKED_SPAN
  }

  /**
   * Move packed block `b`'s base so that its live times and `off` all fit,
   * rewriting its times. False (nothing changed) if they span too much: the
   * caller copies the log to a wide block.
   */
  rebaseBlock (b: number, off: number): boolean {
    const cap = this.capOf(b)
    const n = this.sizeOf(b)
    let lo = off
    let hi = off
    for (let k = 0, at = this.headOf(b); k < n; k++, at = at + 1 === cap ? 0 : at + 1) {
      const v = this.timeAt(b, at)
      if (v < lo) lo = v
      if (v > hi) hi = v
    }
    const base = Math.floor(lo / STEP)
    if (hi - base * STEP >= PACKED_SPAN) return false
    this.moveBase(b, base, 0)
    return true
  }

  /** Set packed block `b`'s base to `base` steps, its times kept (each first shifted by `shift` units, clamped at 0). */
  private moveBase (b: number, base: number, shift: number): void {
    const cap = this.capOf(b)
    const n = this.sizeOf(b)
    const times: number[] = []
    for (let k = 0, at = this.headOf(b); k < n; k++, at = at + 1 === cap ? 0 : at + 1) times.push(Math.max(0, this.timeAt(b, at) + shift))
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    u[o + 1] = (u[o + 1] & HELD_BITS) | (base << 22)
    for (let k = 0, at = this.headOf(b); k < n; k++, at = at + 1 === cap ? 0 : at + 1) this.setTimeAt(b, at, times[k])
  }

  /** A UNITS block's held tokens. */
  unitsHeld (b: number): number {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    const w = u[o + metaOf(u[o]) - 1]
    return this.isPacked(b) ? w & HELD_BITS : w
  }

  /** Set a UNITS block's held tokens (`heldFits`), keeping a packed block's base. */
  setUnitsHeld (b: number, v: number): void {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    const i = o + metaOf(u[o]) - 1
    u[i] = this.isPacked(b) ? (u[i] & ~HELD_BITS) | v : v
  }

  /** The index (in its page's doubles) of a PAIRS block's total of counts; held is the next double, the counts follow. */
  pendingAt (b: number): number {
    const w0 = this.w0(b)
    return ((b & PAGE_MASK) + this.words(capOf(w0), UNITS, (w0 & WIDE) !== 0)) >>> 1
  }

  /**
   * A block of `cap` entries in `mode`, empty (head 0, size 0, held unset),
   * able to hold offsets `lo` to `hi` (NaN: none yet): packed with its base
   * at `lo` if they fit (see the header), else wide. Returns its handle (> 0).
   */
  alloc (cap: number, mode: number, lo = NaN, hi = NaN): number {
    const base = lo >= 0 ? Math.floor(lo / STEP) : 0
    const wide = cap > NARROW || (this.packed && hi - base * STEP >= PACKED_SPAN)
    const w = this.words(cap, mode, wide)
    let b = this.free.get(w)
    if (b !== undefined) {
      // The link is where the freed block's own layout puts it: one of another capacity and mode may have this length.
      const u = this.pages[b >>> PAGE_BITS]
      const o = b & PAGE_MASK
      const next = u[o + metaOf(u[o])]
      if (next === NONE) this.free.delete(w)
      else this.free.set(w, next)
    } else {
      b = this.place(w)
    }
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    u[o] = wide ? mode | WIDE | (cap << 2) : mode | (cap << 2)
    this.setRing(b, 0, 0)
    if (!wide) u[o + 1] = this.packed ? base << 22 : 0
    return b
  }

  /** Give a block back (its key no longer needs it). */
  release (b: number): void {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    const w = this.wordsOf(u[o])
    this.setRing(b, 0, 0)
    u[o + metaOf(u[o])] = this.free.get(w) ?? NONE
    this.free.set(w, b)
  }

  /** Move the base to `base` (in units, a multiple of STEP), shifting every live entry (see the header). */
  private rebase (base: number): void {
    const shift = this.base - base
    for (let p = 0; p < this.pages.length; p++) {
      const u = this.pages[p]
      const top = this.tops[p]
      for (let o = p === 0 ? FIRST : 0; o < top; o += this.wordsOf(u[o])) {
        const b = (p << PAGE_BITS) + o
        if (this.isPacked(b)) {
          // Whole steps: a base that stays at or above 0 moves alone; else the times move to base 0.
          const to = (u[o + 1] >>> 22) + shift / STEP
          if (to >= 0) u[o + 1] = (u[o + 1] & HELD_BITS) | (to << 22)
          else this.moveBase(b, 0, shift)
          continue
        }
        const cap = capOf(u[o])
        const t0 = o + metaOf(u[o])
        let at = this.headOf(b)
        for (let k = this.sizeOf(b); k > 0; k--) {
          const v = u[t0 + at] + shift
          // Below 0: expired long ago (see the header); kept at the base, in order.
          u[t0 + at] = v < 0 ? 0 : v
          at = at + 1 === cap ? 0 : at + 1
        }
      }
    }
    this.base = base
  }
}
