/**
 * The sliding logs of one rule's keys, in one slab of 32-bit words shared by
 * them all (one per BucketSpec), instead of an array per key.
 *
 * Why: a JS array costs 48 bytes before its first element (the array and
 * its store's header), and a double 8 bytes a time; a field of the key's
 * object 8 bytes. Here a key's log is a block of the slab: one word of ring
 * state, one of the key's held tokens, and one 32-bit word per entry's time
 * (4 bytes a token while every entry has count 1); once a count is not 1, a
 * double per entry for the counts, and doubles for their total and for the
 * held tokens. The key keeps only the block's handle, a small integer (no
 * heap number), in one field (sliding-log.ts).
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
 * Blocks. A block's first word holds its mode (bit 0: UNITS, every count is
 * 1 and not stored; PAIRS, counts as doubles), whether it is wide (bit 1),
 * and its capacity; a narrow block (capacity up to 1023) also its ring's
 * head (oldest entry's index) and size, 10 bits each; a wide one keeps them
 * in the next two words. Then one word of held tokens (UNITS: an integer
 * below 2^32; a PAIRS block keeps them as a double and leaves this word
 * unused), then the times: `metaOf(cap)` words from the start. A PAIRS
 * block goes on, 8-byte aligned, with doubles: the outstanding total, the
 * held tokens, one count per entry. So a block of 10 units is 12 words (48
 * bytes) and holds all of its key's numbers. Blocks start at even words. A
 * freed block keeps its first word, has size 0 and its first time slot holds
 * the next free block of its length (free lists by length, reused first).
 *
 * Pages: the slab is a list of pages of PAGE_WORDS words (256 KiB), not one
 * buffer. A block's handle is its word in a page-major address space: page
 * `b >>> PAGE_BITS`, word `b & PAGE_MASK` of it. Why: one buffer grown by a
 * quarter when full left up to a fifth of it unused (~5 bytes a key at 1M
 * keys) and copied all of it at each growth (~50 MB, a pause of
 * milliseconds, at 1M full logs of 10). Pages are never copied and leave at
 * most one block's words unused at their end. The first page starts small
 * and doubles up to a full page (a rule changed in cluster mode gives each
 * key a spec, and slab, of its own: a slab must start small), copied as it
 * grows; a block larger than a page gets a buffer of its own, whose handle
 * reserves as many page slots as it spans. Word 0 of page 0 is never a
 * block: handles are > 0, so a key can tell a handle from its held tokens
 * (sliding-log.ts). The slab never shrinks: memory a burst of logs used is
 * reused by later logs of the rule, not given back while the rule's spec
 * lives (a reload that changes the rule lets it go with the old keys).
 */
import type { BucketSpec } from './bucket.js'

export const UNITS = 0
export const PAIRS = 1
/** Bit 1 of a block's first word: head and size are in words of their own. */
const WIDE = 2
/** The largest capacity of a narrow block (head and size in its first word). */
const NARROW = 0x3FF

export const PAGE_BITS = 16
export const PAGE_WORDS = 1 << PAGE_BITS
export const PAGE_MASK = PAGE_WORDS - 1

const SPAN = 2 ** 32
const HALF = 2 ** 31
/** The end of a free list. */
const NONE = 0xFFFFFFFF
/** Words of page 0 before its first block (so that no handle is 0). */
const FIRST = 2
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

/** Whether `v` fits a held-tokens word (an integer in [0, 2^32)). */
export function isWord (v: number): boolean {
  return v >>> 0 === v
}

/** Words before the times of a block of `cap` entries: the ring state (1 word narrow, 3 wide), then held. */
export function metaOf (cap: number): number {
  return cap <= NARROW ? 2 : 4
}

/** Words a block of `cap` entries takes in `mode` (PAIRS: a double per count, one for their total and one for held). */
export function blockWords (cap: number, mode: number): number {
  return ((metaOf(cap) + cap + 1) & ~1) + (mode === PAIRS ? 2 * cap + 4 : 0)
}

/** The capacity of the block whose first word is `w0`. */
export function capOf (w0: number): number {
  return (w0 & WIDE) === 0 ? (w0 >>> 2) & NARROW : w0 >>> 2
}

/** The index (in its page's doubles) of a PAIRS block's total of counts; held is the next double, the counts follow. `o`: the block's word in its page. */
export function pendingAt (o: number, cap: number): number {
  return (o + metaOf(cap) + cap + 1) >>> 1
}

/** The index (in its page's doubles) of the count of a PAIRS block's entry 0. */
export function countsAt (o: number, cap: number): number {
  return pendingAt(o, cap) + 2
}

/** The index of the oldest entry of the block at word `o` of page `u`. */
export function headOf (u: Uint32Array, o: number): number {
  return (u[o] & WIDE) === 0 ? (u[o] >>> 12) & NARROW : u[o + 1]
}

/** How many entries the block at word `o` of page `u` holds. */
export function sizeOf (u: Uint32Array, o: number): number {
  return (u[o] & WIDE) === 0 ? u[o] >>> 22 : u[o + 2]
}

/** Set a block's head and size (head < capacity, size <= capacity). */
export function setRing (u: Uint32Array, o: number, head: number, size: number): void {
  if ((u[o] & WIDE) === 0) {
    u[o] = (u[o] & 0xFFF) | (head << 12) | (size << 22)
  } else {
    u[o + 1] = head
    u[o + 2] = size
  }
}

/** The slab of a spec's sliding logs, made on first use. */
export function logsOf (spec: BucketSpec): LogSlab {
  return spec.logs ?? (spec.logs = new LogSlab(spec.perMs))
}

export class LogSlab {
  /** The pages' words, by page; page 0 is replaced while it grows (read it again after `alloc`). */
  readonly pages: Uint32Array[] = []
  /** The same memory as doubles (PAIRS counts, totals and held). */
  readonly dpages: Float64Array[] = []
  readonly unit: number
  /** Words of each page handed out from its start (0 for the slots a large block spans past its first). */
  private readonly tops: number[] = []
  /** The page small blocks are cut from. */
  private cur = 0
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

  /** A block of `cap` entries in `mode`, empty (head 0, size 0, held unset). Returns its handle (> 0). */
  alloc (cap: number, mode: number): number {
    const w = blockWords(cap, mode)
    let b = this.free.get(w)
    if (b !== undefined) {
      // The link is where the freed block's own layout puts it: one of another capacity and mode may have this length.
      const u = this.pages[b >>> PAGE_BITS]
      const o = b & PAGE_MASK
      const next = u[o + metaOf(capOf(u[o]))]
      if (next === NONE) this.free.delete(w)
      else this.free.set(w, next)
    } else {
      b = this.place(w)
    }
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    u[o] = cap <= NARROW ? mode | (cap << 2) : mode | WIDE | (cap << 2)
    setRing(u, o, 0, 0)
    return b
  }

  /** Give a block back (its key no longer needs it). */
  release (b: number): void {
    const u = this.pages[b >>> PAGE_BITS]
    const o = b & PAGE_MASK
    const cap = capOf(u[o])
    const w = blockWords(cap, u[o] & 1)
    setRing(u, o, 0, 0)
    u[o + metaOf(cap)] = this.free.get(w) ?? NONE
    this.free.set(w, b)
  }

  /** Words the slab has handed out (blocks in use and free ones). */
  get used (): number {
    let n = 0
    for (const t of this.tops) n += t
    return n - (this.tops.length > 0 ? FIRST : 0)
  }

  /** A handle for `w` new words: cut from the current page, or a new page, or a buffer of its own. */
  private place (w: number): number {
    if (this.pages.length === 0) {
      // Page 0 first, small (see the header), whatever the first block's size: no handle is 0.
      this.addPage(MIN_WORDS)
      this.tops[0] = FIRST
      this.cur = 0
    }
    if (w > PAGE_WORDS - FIRST) {
      // A block larger than a page: a buffer of its own at a page slot, reserving the slots it spans.
      const p = this.pages.length
      this.addPage(w)
      for (let k = PAGE_WORDS; k < w; k += PAGE_WORDS) this.addPage(0)
      this.tops[p] = w
      return p << PAGE_BITS
    }
    let p = this.cur
    if (this.tops[p] + w > PAGE_WORDS) {
      // The rest of this page (fewer words than this block) stays unused.
      p = this.cur = this.pages.length
      this.addPage(PAGE_WORDS)
    }
    const o = this.tops[p]
    if (o + w > this.pages[p].length) this.growFirst(o + w)
    this.tops[p] = o + w
    return (p << PAGE_BITS) + o
  }

  private addPage (words: number): void {
    const buf = new ArrayBuffer(4 * (words + (words & 1)))
    this.pages.push(new Uint32Array(buf))
    this.dpages.push(new Float64Array(buf))
    this.tops.push(0)
  }

  /** Page 0, while it is smaller than a page: doubled (at least), copied, up to a full page. */
  private growFirst (need: number): void {
    const old = this.pages[0]
    const words = Math.min(PAGE_WORDS, Math.max(need, 2 * old.length))
    const buf = new ArrayBuffer(4 * (words + (words & 1)))
    const u = new Uint32Array(buf)
    u.set(old.subarray(0, this.tops[0]))
    this.pages[0] = u
    this.dpages[0] = new Float64Array(buf)
  }

  /** Move the base to `base` (in units), shifting every live entry (see the header). */
  private rebase (base: number): void {
    const shift = this.base - base
    for (let p = 0; p < this.pages.length; p++) {
      const u = this.pages[p]
      const top = this.tops[p]
      for (let o = p === 0 ? FIRST : 0; o < top; o += blockWords(capOf(u[o]), u[o] & 1)) {
        const cap = capOf(u[o])
        const t0 = o + metaOf(cap)
        let at = headOf(u, o)
        for (let k = sizeOf(u, o); k > 0; k--) {
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
