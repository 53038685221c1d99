/**
 * The limiter's key table: key string -> KeyState, in SHARDS open-addressing
 * tables of our own instead of `Map`s.
 *
 * Why not a `Map`: V8's ordered hash table keeps three words per entry (key,
 * value, chain) and half a word of buckets, in a table that doubles when
 * full: 28 to 56 bytes a key (29.4 at 1M keys in 16 shards, 36.7 at 100k).
 * A key's state already holds its key (`ks.key`), so a table of states
 * alone finds a key by comparing `ks.key`: 8 bytes a slot, and one byte of
 * the key's hash per slot (a fingerprint) so that a probe reads no state
 * whose fingerprint differs. Slots are at most 80% used (live and deleted),
 * and a table grows to twice its size while it is more than 40% live: 9
 * bytes a slot, 11 to 28 bytes a key (bench/memory.ts).
 *
 * Why shards: one table of a million keys is one large object, replaced by
 * one twice its size each time it fills; a process holding one such `Map`
 * had 15-25 MB more resident memory outside the V8 heap than one holding
 * the same keys in 16 (bench/memory.ts, RSS rows; bench/README.md). The
 * shard is the top 4 bits of the key's hash, the slot its low bits.
 *
 * The hash is our own, of every character of the key, with a seed drawn at
 * startup (as V8 seeds its own): keys chosen to collide in one process do
 * not collide in another. Invariant: a state is stored under its own key
 * (`set` checks it).
 *
 * Iteration (`values`) goes shard by shard, slot by slot, and is live like a
 * `Map` iterator's, with one difference: a key added during a pass may or may
 * not be visited. Guaranteed: every key the table held when the pass began
 * and still holds when the pass reaches it is visited once, a key deleted
 * before the pass reaches it is not, and no state is visited twice. Deletes
 * and inserts work in place, so positions do not move; a shard that is
 * rebuilt (grown, shrunk or cleared of deleted slots) gets new arrays, and
 * an iterator in the middle of it then skips, in the new arrays, every state
 * it already passed in the old ones (a set it makes only then).
 */
import { fmix32 } from './hash.js'
import type { KeyState } from './key-state.js'

/** A power of two (the shard is the hash's top bits). */
const SHARDS = 16
const SHARD_SHIFT = 28
const MIN_SLOTS = 16
/** Fingerprints: 0 an empty slot (ends a probe), 1 a deleted one (does not), 2-255 a state. */
const EMPTY = 0
const GONE = 1
/** Per process (see the header). */
const SEED = Math.floor(Math.random() * 2 ** 32) >>> 0

class Shard {
  fps: Uint8Array
  slots: Array<KeyState | undefined>
  /** States held. */
  live = 0
  /** Slots not empty: states and deleted slots. */
  used = 0

  constructor (n: number) {
    this.fps = new Uint8Array(n)
    this.slots = new Array<KeyState | undefined>(n).fill(undefined)
  }
}

export class KeyTable {
  private readonly shards: Shard[] = []
  private count = 0

  constructor () {
    for (let i = 0; i < SHARDS; i++) this.shards.push(new Shard(MIN_SLOTS))
  }

  get size (): number { return this.count }

  get (key: string): KeyState | undefined {
    const h = hashOf(key)
    const s = this.shards[h >>> SHARD_SHIFT]
    const i = find(s, key, h)
    return i < 0 ? undefined : s.slots[i]
  }

  set (key: string, ks: KeyState): void {
    if (ks.key !== key) throw new Error(`key table: a state of key "${ks.key}" stored under "${key}"`)
    const h = hashOf(key)
    const s = this.shards[h >>> SHARD_SHIFT]
    const at = find(s, key, h)
    if (at >= 0) {
      s.slots[at] = ks
      return
    }
    const mask = s.fps.length - 1
    let i = h & mask
    while (s.fps[i] > GONE) i = (i + 1) & mask
    if (s.fps[i] === EMPTY) s.used++
    s.fps[i] = fingerprint(h)
    s.slots[i] = ks
    s.live++
    this.count++
    // At most 80% used: grown while more than 40% live, else only rebuilt without its deleted slots.
    if (s.used * 5 > s.fps.length * 4) this.rebuild(h >>> SHARD_SHIFT, s.live * 5 > s.fps.length * 2 ? 2 * s.fps.length : s.fps.length)
  }

  delete (key: string): boolean {
    const h = hashOf(key)
    const s = this.shards[h >>> SHARD_SHIFT]
    const i = find(s, key, h)
    if (i < 0) return false
    s.fps[i] = GONE
    s.slots[i] = undefined
    s.live--
    this.count--
    // A shard mostly emptied (keys evicted) gives its memory back: halved while under 1/8 live.
    let n = s.fps.length
    while (n > MIN_SLOTS && s.live * 8 < n) n >>= 1
    if (n < s.fps.length) this.rebuild(h >>> SHARD_SHIFT, n)
    return true
  }

  /** Every key's state, shard by shard (see the header). */
  values (): IterableIterator<KeyState> {
    return new TableIterator(this.shards)
  }

  /** Shard `k` in new arrays of `n` slots, without deleted slots; the old arrays are not written again (iterators may hold them). */
  private rebuild (k: number, n: number): void {
    const old = this.shards[k]
    const s = new Shard(n)
    const mask = n - 1
    for (let j = 0; j < old.fps.length; j++) {
      if (old.fps[j] <= GONE) continue
      const ks = old.slots[j] as KeyState
      let i = hashOf(ks.key) & mask
      while (s.fps[i] !== EMPTY) i = (i + 1) & mask
      s.fps[i] = old.fps[j]
      s.slots[i] = ks
    }
    s.live = s.used = old.live
    this.shards[k] = s
  }
}

/** The slot of `key` (hash `h`) in shard `s`, or -1. */
function find (s: Shard, key: string, h: number): number {
  const fps = s.fps
  const mask = fps.length - 1
  const fp = fingerprint(h)
  // Ends: a shard is never full (at most 80% used).
  for (let i = h & mask; ; i = (i + 1) & mask) {
    const f = fps[i]
    if (f === EMPTY) return -1
    if (f === fp && (s.slots[i] as KeyState).key === key) return i
  }
}

/** A 32-bit hash of every character of `key`, seeded (see the header). */
function hashOf (key: string): number {
  let h = SEED ^ key.length
  for (let i = 0; i < key.length; i++) {
    h = Math.imul(h ^ key.charCodeAt(i), 0x5bd1e995)
    h ^= h >>> 15
  }
  // Every bit of the key reaches the shard bits and the slot bits.
  return fmix32(h)
}

/** A state's fingerprint: 2-255, from hash bits the slot index of a shard under 2^20 slots does not use. */
function fingerprint (h: number): number {
  return 2 + ((h >>> 20) & 0xFF) % 254
}

/** Shard by shard, slot by slot (a class, not a generator: gossip walks a million keys with it). */
class TableIterator implements IterableIterator<KeyState> {
  private at = 0
  private fps: Uint8Array | null = null
  private slots: Array<KeyState | undefined> = []
  private pos = 0
  /** States already passed in this shard, made only when the shard is rebuilt under the iterator (see the header). */
  private passed: Set<KeyState> | null = null
  /** Done stays done, as a `Map` iterator's (a shard rebuilt after the pass must not restart it). */
  private finished = false

  constructor (private readonly shards: readonly Shard[]) {}

  next (): IteratorResult<KeyState> {
    while (!this.finished) {
      const s = this.shards[this.at]
      if (this.fps !== s.fps) {
        if (this.fps !== null) {
          // Rebuilt since: every state before `pos` in the old arrays was visited (or added during the pass).
          this.passed ??= new Set()
          for (let i = 0; i < this.pos; i++) if (this.fps[i] > GONE) this.passed.add(this.slots[i] as KeyState)
        }
        this.fps = s.fps
        this.slots = s.slots
        this.pos = 0
      }
      const fps = this.fps
      while (this.pos < fps.length) {
        const i = this.pos++
        if (fps[i] <= GONE) continue
        const ks = this.slots[i] as KeyState
        if (this.passed !== null) {
          if (this.passed.has(ks)) continue
          this.passed.add(ks)
        }
        return { value: ks, done: false }
      }
      if (this.at === this.shards.length - 1) {
        this.finished = true
      } else {
        this.at++
        this.fps = null
        this.passed = null
      }
    }
    this.passed = null
    return { value: undefined, done: true }
  }

  [Symbol.iterator] (): IterableIterator<KeyState> { return this }
}
