/**
 * The sliding logs of one rule's keys, in one slab of 32-bit words shared by
 * them all (one per BucketSpec), instead of an array per key.
 *
 * Why: a JS array costs 48 bytes before its first element (the array and
 * its store's header), and a double 8 bytes a time. Here a key's log is a
 * block of the slab: 2 words of ring state and one 32-bit word per entry's
 * time (4 bytes a token while every entry has count 1), plus a double per
 * entry for the counts, and one for their total, once one is not 1. The key keeps the block's offset,
 * a small integer (no heap number).
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
 * Rebasing: a time whose offset falls outside 32 bits moves the base to 2^31
 * units before it (~9 hours at the finest unit, 4 periods or more in any
 * case), and every live entry of the slab is shifted, in one pass over it.
 * Entries that would fall below the new base are older than 4 periods before
 * the newest time, so expired (the limiter's clock never runs back): they are
 * kept at the base, still expired and still in order, until their key is next
 * touched and gives their tokens back.
 *
 * Blocks: a block's first word is its capacity (entries) times 2 plus its
 * mode (UNITS: every count is 1, not stored; PAIRS: counts as doubles after
 * the times, 8-byte aligned, preceded by the log's outstanding total), then
 * the ring's head (its oldest entry's index) and size: in ONE word, 16 bits
 * each, while the capacity fits 16 bits (every block a limit under 65,536
 * makes), else in two; then the times. `metaOf(cap)` is where the times
 * start. So a block of 10 units is 12 words (48 bytes), not 14. Blocks start
 * at even words. A freed block keeps its first word, has size 0 and its
 * first time slot holds the next free block of its length (free lists by
 * length, reused first). The slab grows by a quarter
 * when full (copied once), and never shrinks: memory a burst of logs used is
 * reused by later logs of the rule, not given back while the rule's spec
 * lives (a reload that changes the rule lets it go with the old keys).
 */
import type { BucketSpec } from './bucket.js'

export const UNITS = 0
export const PAIRS = 1
/** The largest capacity whose head and size share one word (16 bits each). */
const NARROW = 0xFFFF

const SPAN = 2 ** 32
const HALF = 2 ** 31
/** The end of a free list. */
const NONE = 0xFFFFFFFF
/** Where a slab starts: a rule changed in cluster mode gives each key a spec (and slab) of its own, so a slab starts small. */
const EMPTY_U32 = new Uint32Array(0)
const EMPTY_F64 = new Float64Array(0)
const MIN_WORDS = 16

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

/** Words of ring state before the times of a block of `cap` entries: capacity and mode, then head and size (one word while both fit 16 bits, else two). */
export function metaOf (cap: number): number {
  return cap <= NARROW ? 2 : 3
}

/** Words a block of `cap` entries takes in `mode` (PAIRS: a double per count and one for their total). */
export function blockWords (cap: number, mode: number): number {
  return ((metaOf(cap) + cap + 1) & ~1) + (mode === PAIRS ? 2 * cap + 2 : 0)
}

/** The index (in the slab's doubles) of a PAIRS block's total of counts (its key's outstanding tokens). */
export function pendingAt (b: number, cap: number): number {
  return (b + metaOf(cap) + cap + 1) >>> 1
}

/** The index (in the slab's doubles) of the count of a PAIRS block's entry 0. */
export function countsAt (b: number, cap: number): number {
  return pendingAt(b, cap) + 1
}

/** The index of block `b`'s oldest entry. */
export function headOf (u: Uint32Array, b: number): number {
  return (u[b] >>> 1) <= NARROW ? u[b + 1] & 0xFFFF : u[b + 1]
}

/** How many entries block `b` holds. */
export function sizeOf (u: Uint32Array, b: number): number {
  return (u[b] >>> 1) <= NARROW ? u[b + 1] >>> 16 : u[b + 2]
}

/** Set block `b`'s head and size (head < capacity, size <= capacity). */
export function setRing (u: Uint32Array, b: number, head: number, size: number): void {
  if ((u[b] >>> 1) <= NARROW) {
    u[b + 1] = head | (size << 16)
  } else {
    u[b + 1] = head
    u[b + 2] = size
  }
}

/** The slab of a spec's sliding logs, made on first use. */
export function logsOf (spec: BucketSpec): LogSlab {
  return spec.logs ?? (spec.logs = new LogSlab(spec.perMs))
}

export class LogSlab {
  /** The words; replaced when the slab grows (read it again after `alloc`). */
  u = EMPTY_U32
  /** The same memory as doubles (PAIRS counts). */
  f = EMPTY_F64
  readonly unit: number
  /** Words in use from the start (past it, never used). */
  private top = 0
  /** The time of offset 0, in units; NaN until the first time. */
  private base = NaN
  /** The first free block of each length in words. */
  private readonly free = new Map<number, number>()

  constructor (perMs: number) {
    this.unit = unitFor(perMs)
  }

  /** The offset of `t` rounded up to the unit; rebases first if it falls outside 32 bits. */
  offset (t: number): number {
    const q = Math.ceil(t / this.unit)
    const off = q - this.base
    if (off >= 0 && off < SPAN) return off
    this.rebase(q - HALF)
    return HALF
  }

  /** The time at an offset (exact: an integer number of units). */
  time (off: number): number {
    return (this.base + off) * this.unit
  }

  /** Entries at or below this offset have times at or before `t` (may be out of 32 bits). */
  atOrBefore (t: number): number {
    return Math.floor(t / this.unit) - this.base
  }

  /** A block of `cap` entries in `mode`, empty (head 0, size 0). */
  alloc (cap: number, mode: number): number {
    const w = blockWords(cap, mode)
    let b = this.free.get(w)
    if (b !== undefined) {
      // The link is where the freed block's own layout puts it: one of another capacity and mode may have this length.
      const next = this.u[b + metaOf(this.u[b] >>> 1)]
      if (next === NONE) this.free.delete(w)
      else this.free.set(w, next)
    } else {
      b = this.top
      if (b + w > this.u.length) this.grow(b + w)
      this.top = b + w
    }
    const u = this.u
    u[b] = cap * 2 + mode
    setRing(u, b, 0, 0)
    return b
  }

  /** Give a block back (its key no longer needs it). */
  release (b: number): void {
    const u = this.u
    const cap = u[b] >>> 1
    const w = blockWords(cap, u[b] & 1)
    setRing(u, b, 0, 0)
    u[b + metaOf(cap)] = this.free.get(w) ?? NONE
    this.free.set(w, b)
  }

  /** Words the slab has handed out (blocks in use and free ones). */
  get used (): number { return this.top }

  private grow (need: number): void {
    const words = Math.max(need, Math.ceil(this.u.length * 1.25), MIN_WORDS)
    const buf = new ArrayBuffer(4 * (words + (words & 1)))
    const u = new Uint32Array(buf)
    u.set(this.u.subarray(0, this.top))
    this.u = u
    this.f = new Float64Array(buf)
  }

  /** Move the base to `base` (in units), shifting every live entry (see the header). */
  private rebase (base: number): void {
    const shift = this.base - base
    const u = this.u
    for (let b = 0; b < this.top; b += blockWords(u[b] >>> 1, u[b] & 1)) {
      const cap = u[b] >>> 1
      const t0 = b + metaOf(cap)
      let at = headOf(u, b)
      for (let k = sizeOf(u, b); k > 0; k--) {
        const o = u[t0 + at] + shift
        // Below 0: expired long ago (see the header); kept at the base, in order.
        u[t0 + at] = o < 0 ? 0 : o
        at = at + 1 === cap ? 0 : at + 1
      }
    }
    this.base = base
  }
}
