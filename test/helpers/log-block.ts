/**
 * Reads a sliding log's block in its slab (log-slab.ts) for tests: the
 * layout is private to the slab and the bucket, and tests that check it
 * decode it here, in one place.
 */
import { PAGE_BITS, PAGE_MASK, PAIRS, blockWords, capOf, countsAt, headOf, metaOf, pendingAt, sizeOf, type LogSlab } from '../../src/core/algorithms/log-slab.js'

/** Word `i` of block `b` (from its first word). */
export function word (L: LogSlab, b: number, i: number): number {
  return L.pages[b >>> PAGE_BITS][(b & PAGE_MASK) + i]
}

/** Set word `i` of block `b`. */
export function setWord (L: LogSlab, b: number, i: number, v: number): void {
  L.pages[b >>> PAGE_BITS][(b & PAGE_MASK) + i] = v
}

export interface BlockView { mode: 'units' | 'pairs', cap: number, words: number, size: number, held: number, pending: number, entries: number[][] }

/** Block `b` decoded: its mode, capacity, length in words, held and outstanding tokens, and its [time, count] entries, oldest first. */
export function readBlock (L: LogSlab, b: number): BlockView {
  const u = L.pages[b >>> PAGE_BITS]
  const f = L.dpages[b >>> PAGE_BITS]
  const o = b & PAGE_MASK
  const cap = capOf(u[o])
  const pairs = (u[o] & 1) === PAIRS
  const size = sizeOf(u, o)
  const entries: number[][] = []
  let at = headOf(u, o)
  for (let k = 0; k < size; k++) {
    entries.push([L.time(u[o + metaOf(cap) + at]), pairs ? f[countsAt(o, cap) + at] : 1])
    at = at + 1 === cap ? 0 : at + 1
  }
  return {
    mode: pairs ? 'pairs' : 'units',
    cap,
    words: blockWords(cap, u[o] & 1),
    size,
    held: pairs ? f[pendingAt(o, cap) + 1] : u[o + metaOf(cap) - 1],
    pending: pairs ? f[pendingAt(o, cap)] : size,
    entries
  }
}

/** A sliding-log bucket's private state: its block handle (or null: none, held in the field) and its slab. */
export function logOf (bucket: object): { block: number | null, slab: LogSlab } {
  const { s, h } = bucket as { s: number, h: { spec: { logs: LogSlab } } }
  return { block: s > 0 ? s : null, slab: h.spec.logs }
}
