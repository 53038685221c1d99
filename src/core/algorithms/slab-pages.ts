/**
 * The memory of a sliding-log slab (log-slab.ts): a list of pages of
 * PAGE_WORDS words (256 KiB), not one buffer. A block's handle is its word in a page-major address space: page
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

export const PAGE_BITS = 16
export const PAGE_WORDS = 1 << PAGE_BITS
export const PAGE_MASK = PAGE_WORDS - 1

/** Words of page 0 before its first block (so that no handle is 0). */
export const FIRST = 2
const MIN_WORDS = 16

export class SlabPages {
  /** The pages' words, by page; page 0 is replaced while it grows (read it again after `place`). */
  readonly pages: Uint32Array[] = []
  /** The same memory as doubles. */
  readonly dpages: Float64Array[] = []
  /** The same memory as bytes. */
  readonly bpages: Uint8Array[] = []
  /** Words of each page handed out from its start (0 for the slots a large block spans past its first). */
  protected readonly tops: number[] = []
  /** The page small blocks are cut from. */
  private cur = 0

  /** Words the slab has handed out (blocks in use and free ones). */
  get used (): number {
    let n = 0
    for (const t of this.tops) n += t
    return n - (this.tops.length > 0 ? FIRST : 0)
  }

  /** A handle for `w` new words: cut from the current page, or a new page, or a buffer of its own. */
  protected place (w: number): number {
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
    this.bpages.push(new Uint8Array(buf))
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
    this.bpages[0] = new Uint8Array(buf)
  }
}
