/**
 * The limiter's key table: key string -> KeyState, in SHARDS `Map`s instead
 * of one.
 *
 * Why: one `Map` of a million keys keeps its entries in one 28 MB hash table
 * (a V8 large object, replaced by one twice its size each time it fills), and
 * a process holding it had 15-25 MB more resident memory outside the V8 heap
 * than one holding the same keys in 16 `Map`s, run after run
 * (bench/memory.ts, RSS rows; bench/README.md). The heap's own bytes per key
 * are the same either way.
 *
 * A key's shard is a hash of a few of its characters (its length, its first
 * 4 and its last 8), not of all of them: it costs a few nanoseconds on the
 * decision path whatever the key's length. Keys that differ only elsewhere
 * share a shard; at worst every key lands in one shard, which is one `Map`,
 * as before: uneven shards cost memory, never correctness.
 *
 * Iteration (`values`) goes shard by shard, each in insertion order, and is
 * live like a `Map` iterator's: a key added to a shard the iterator has not
 * finished is visited, one deleted before it is reached is not. So the order
 * keys are visited in is not the order they were created in (it never was a
 * promise: sweeps, gossip and status only need each key visited once per
 * pass).
 */
import type { KeyState } from './key-state.js'

/** A power of two (the shard is the hash's low bits). */
const SHARDS = 16
const MASK = SHARDS - 1

export class KeyTable {
  private readonly shards: Array<Map<string, KeyState>> = []
  private count = 0

  constructor () {
    for (let i = 0; i < SHARDS; i++) this.shards.push(new Map())
  }

  get size (): number { return this.count }

  get (key: string): KeyState | undefined {
    return this.shards[shardOf(key)].get(key)
  }

  set (key: string, ks: KeyState): void {
    const m = this.shards[shardOf(key)]
    const before = m.size
    m.set(key, ks)
    this.count += m.size - before
  }

  delete (key: string): boolean {
    const gone = this.shards[shardOf(key)].delete(key)
    if (gone) this.count--
    return gone
  }

  /** Every key's state, shard by shard (see the header). */
  values (): IterableIterator<KeyState> {
    return new TableIterator(this.shards)
  }
}

/** FNV-1a-like mix of the length, the first 4 and the last 8 characters. */
function shardOf (key: string): number {
  const n = key.length
  let h = Math.imul(n ^ 0x811c9dc5, 0x01000193)
  const head = n < 4 ? n : 4
  for (let i = 0; i < head; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  for (let i = n > 12 ? n - 8 : head; i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return (h ^ (h >>> 16)) & MASK
}

/** A `Map` iterator per shard, one after the other (a class, not a generator: gossip walks a million keys with it). */
class TableIterator implements IterableIterator<KeyState> {
  private at = 0
  private it: Iterator<KeyState>

  constructor (private readonly shards: ReadonlyArray<Map<string, KeyState>>) {
    this.it = shards[0].values()
  }

  next (): IteratorResult<KeyState> {
    for (;;) {
      const r = this.it.next()
      if (r.done !== true || this.at === this.shards.length - 1) return r
      this.it = this.shards[++this.at].values()
    }
  }

  [Symbol.iterator] (): IterableIterator<KeyState> { return this }
}
