/**
 * Pre-allocated shares: where a key's stock starts when the cluster forms.
 *
 * - An exact-key rule's stock is split over the seed nodes (the cluster file's
 *   `nodes`, sorted by name, so every node computes the same split):
 *   floor(stock / n) each, and the first `stock mod n` get one more.
 * - A glob rule's key starts whole at its home node, chosen by rendezvous
 *   (highest-random-weight) hashing of (node, key) over the seeds.
 * - A node that is not a seed starts with nothing.
 * - A seed that died for good is inherited by a heir (cluster/heir.ts): its
 *   glob keys are homed at the heir from then on (`homes`: dead seed ->
 *   heir). Exact-key shares never move: the heir credits the dead seed's.
 *
 * The shares of all seeds sum to exactly the stock: the split creates nothing.
 */
import { fmix32 } from './hash.js'

/** 32-bit FNV-1a over UTF-16 code units, then a murmur3 finalizer for spread. */
export function hash32 (s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return fmix32(h)
}

/**
 * Per seed list (by identity: a node's list never changes once built), the
 * homes found so far and each seed's position. A glob key's home is asked
 * for on every view of a peer without a line for it (cluster-view.ts) and
 * by the simulator's audit for every node and key: hashing every seed each
 * time made that O(seeds) per question, O(N^2) per key at 200 nodes. The
 * home map is bounded: cleared when it reaches HOME_CACHE_MAX keys.
 */
const homes = new WeakMap<readonly string[], Map<string, string | undefined>>()
const positions = new WeakMap<readonly string[], Map<string, number>>()
const HOME_CACHE_MAX = 8192

/** The seed that owns `key` under rendezvous hashing. Ties break by name. */
export function homeNode (key: string, seeds: readonly string[]): string | undefined {
  // One seed (a lone node's list) is every key's home: the scan below would
  // pick it too. Not cached: a lone limiter asks once per key it creates, so
  // the map only filled to its bound and was cleared, every 8,192 new keys.
  // At 1M keys that left ~28 MB of dead tables in large-object space and ~19
  // MB in old space for the next gc, whose freed pages V8 unmaps on a
  // background thread: the memory bench's RSS, read right after its gc,
  // counted ~10 MB of them (192 -> 204 MB as launched, since a0e3bf4).
  if (seeds.length === 1) return seeds[0]
  let cache = homes.get(seeds)
  if (cache === undefined) homes.set(seeds, cache = new Map())
  const known = cache.get(key)
  if (known !== undefined || cache.has(key)) return known
  let best: string | undefined
  let bestScore = -1
  for (const node of seeds) {
    const score = hash32(node + '\u0000' + key)
    if (score > bestScore || (score === bestScore && best !== undefined && node < best)) {
      best = node
      bestScore = score
    }
  }
  if (cache.size >= HOME_CACHE_MAX) cache.clear()
  cache.set(key, best)
  return best
}

/** A seed's position in the list (-1: not a seed), without a scan per question. */
function seedIndex (node: string, seeds: readonly string[]): number {
  let m = positions.get(seeds)
  if (m === undefined) {
    m = new Map()
    for (let i = seeds.length - 1; i >= 0; i--) m.set(seeds[i], i)
    positions.set(seeds, m)
  }
  return m.get(node) ?? -1
}

/** Dead seed -> the seed that inherited it (heir.ts). */
export type Homes = ReadonlyMap<string, string>

/** The seed that owns `key` now: its rendezvous home, or the heir of a home that died (followed along a chain of heirs). */
export function homeOf (key: string, seeds: readonly string[], homes?: Homes): string | undefined {
  let h = homeNode(key, seeds)
  if (homes === undefined || homes.size === 0) return h
  for (let i = 0; i < seeds.length && h !== undefined && homes.has(h); i++) h = homes.get(h)
  return h
}

/** This node's starting share of `stock` for a key (`homes`: the dead seeds' heirs, for glob keys). */
export function initialShare (stock: number, glob: boolean, key: string, node: string, seeds: readonly string[], homes?: Homes): number {
  const i = seedIndex(node, seeds)
  if (i < 0) return 0
  if (glob) return homeOf(key, seeds, homes) === node ? stock : 0
  const n = seeds.length
  return Math.floor(stock / n) + (i < stock % n ? 1 : 0)
}

/** Sorted, de-duplicated seed names: the order every node agrees on. */
export function seedOrder (names: readonly string[]): string[] {
  return [...new Set(names)].sort()
}

/**
 * The seeds that vote: the first `max` in seed order. A seed beyond them
 * still holds its share, gives and inherits like any seed; it only neither
 * echoes (lease.ts) nor attests (reclaim.ts), and its own lease needs the
 * voters' echoes like a member's. Every node computes the same set from the
 * cluster file (the count is in the cluster hash when it leaves seeds out).
 */
export function voterSet (seeds: readonly string[], max: number): string[] {
  return seedOrder(seeds).slice(0, Math.max(1, max))
}
