/**
 * Reads a sliding log's block in its slab (log-slab.ts) for tests: the
 * layout is private to the slab and the bucket, and tests that check it
 * decode it here, in one place.
 */
import { PAGE_BITS, PAGE_MASK, metaOf, type LogSlab } from '../../src/core/algorithms/log-slab.js'

/** Word `i` of block `b` (from its first word). */
export function word (L: LogSlab, b: number, i: number): number {
  return L.pages[b >>> PAGE_BITS][(b & PAGE_MASK) + i]
}

/** Set word `i` of block `b`. */
export function setWord (L: LogSlab, b: number, i: number, v: number): void {
  L.pages[b >>> PAGE_BITS][(b & PAGE_MASK) + i] = v
}

/** The word a freed block keeps its free-list link in (its first time word). */
export function linkWord (L: LogSlab, b: number): number {
  return metaOf(L.w0(b))
}

export interface BlockView { mode: 'units' | 'pairs', cap: number, words: number, size: number, held: number, pending: number, wide: boolean, entries: number[][] }

/** Block `b` decoded: its mode, capacity, length in words, held and outstanding tokens, and its [time, count] entries, oldest first. */
export function readBlock (L: LogSlab, b: number): BlockView {
  const f = L.dpages[b >>> PAGE_BITS]
  const cap = L.capOf(b)
  const pairs = L.isPairs(b)
  const size = L.sizeOf(b)
  const entries: number[][] = []
  let at = L.headOf(b)
  for (let k = 0; k < size; k++) {
    entries.push([L.time(L.timeAt(b, at)), pairs ? f[L.pendingAt(b) + 2 + at] : 1])
    at = at + 1 === cap ? 0 : at + 1
  }
  return {
    mode: pairs ? 'pairs' : 'units',
    cap,
    words: L.wordsOf(L.w0(b)),
    size,
    held: pairs ? f[L.pendingAt(b) + 1] : L.unitsHeld(b),
    pending: pairs ? f[L.pendingAt(b)] : size,
    wide: metaOf(L.w0(b)) === 4,
    entries
  }
}

/** A sliding-log bucket's private state: its block handle (or null: none, held in the field) and its slab. */
export function logOf (bucket: object): { block: number | null, slab: LogSlab } {
  const { s, h } = bucket as { s: number, h: { spec: { logs: LogSlab } } }
  return { block: s > 0 ? s : null, slab: h.spec.logs }
}
