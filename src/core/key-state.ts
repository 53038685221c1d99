/**
 * The per-key state the Limiter keeps, and its waiting acquires. Shared by
 * the limiter and the layer above it (the cluster reads buckets and keeps its
 * own per-key data in `ext`).
 *
 * Memory layout (bench/memory.ts measures it): a million keys must fit in a
 * small heap, so a key costs ONE object beside its table entry and key
 * string. Every bucket class extends KeyState, and the limiter's key state
 * is the bucket it creates (`bucket` returns the object itself). Fields
 * that are rarely set (waiters, reserve, the cluster's `ext`, a bucket that
 * replaced the original one on a rule change) live in a `KeyRare` allocated
 * on first use; the accessors below read them as if they were fields.
 *
 * Invariants that keep the object small and its hidden class stable:
 * - the constructor initializes every field, in one order, and nothing adds
 *   fields later (V8 keeps them in-object);
 * - no field of the common path holds a non-integer number (V8 boxes a
 *   double field in a 16-byte heap number of its own), see FixedWindowBucket.
 *
 * A bucket made on its own (`createBucket`: tests, a rule change's
 * replacement bucket) is also a KeyState, with its key fields unused.
 */
import type { Bucket } from './algorithms/bucket.js'
import type { CompiledRule } from './rules.js'
import type { Decision } from './types.js'

/** What a KeyState keeps only while it is set; all at its default, the object is dropped. */
class KeyRare {
  waiters: Waiter[] | null = null
  queued = 0
  wakeAt = Infinity
  reserve = 0
  ext: unknown = null
  /** A bucket that replaced the key's own (a rule change); null: the key is its own bucket. */
  bucket: Bucket | null = null

  get idle (): boolean {
    return this.waiters === null && this.queued === 0 && this.wakeAt === Infinity && this.reserve === 0 && this.ext === null && this.bucket === null
  }
}

/** Placeholder rule of a bucket made on its own (never read: such a bucket has no key). */
const NO_RULE = null as unknown as CompiledRule

export abstract class KeyState {
  /** The key ('' for a bucket made on its own). Set once, by the limiter. */
  key: string
  rule: CompiledRule
  /** The share this key was created with (what eviction must be able to recreate). */
  initial: number
  private x: KeyRare | null

  constructor () {
    this.key = ''
    this.rule = NO_RULE
    this.initial = 0
    this.x = null
  }

  /** Give a freshly made bucket its key (the limiter's `create`). */
  bind (key: string, rule: CompiledRule, initial: number): this {
    this.key = key
    this.rule = rule
    this.initial = initial
    return this
  }

  private rare (): KeyRare {
    let x = this.x
    if (x === null) this.x = x = new KeyRare()
    return x
  }

  /** Drop the rare part once everything in it is back at its default. */
  private trim (): void {
    if (this.x !== null && this.x.idle) this.x = null
  }

  /** This node's holding of the key: the object itself unless a rule change replaced it. */
  get bucket (): Bucket {
    const b = this.x?.bucket
    return b === undefined || b === null ? this as unknown as Bucket : b
  }

  set bucket (b: Bucket) {
    if (b === this as unknown as Bucket) { if (this.x !== null) { this.x.bucket = null; this.trim() } } else this.rare().bucket = b
  }

  /**
   * Held tokens that may not be spent (0 on a lone node). Set by the cluster
   * while burns owed elsewhere after a rule change are unpaid.
   */
  get reserve (): number { return this.x === null ? 0 : this.x.reserve }
  set reserve (r: number) {
    if (this.x !== null) { this.x.reserve = r; this.trim() } else if (r !== 0) this.rare().reserve = r
  }

  get waiters (): Waiter[] | null { return this.x === null ? null : this.x.waiters }
  set waiters (ws: Waiter[] | null) {
    if (this.x !== null) { this.x.waiters = ws; this.trim() } else if (ws !== null) this.rare().waiters = ws
  }

  /** Sum of the counts of queued waiters. */
  get queued (): number { return this.x === null ? 0 : this.x.queued }
  set queued (n: number) {
    if (this.x !== null) { this.x.queued = n; this.trim() } else if (n !== 0) this.rare().queued = n
  }

  /** When this key next needs `poll` (Infinity: never). */
  get wakeAt (): number { return this.x === null ? Infinity : this.x.wakeAt }
  set wakeAt (t: number) {
    if (this.x !== null) { this.x.wakeAt = t; this.trim() } else if (t !== Infinity) this.rare().wakeAt = t
  }

  /** Per-key data of the layer above (the cluster); opaque here. */
  get ext (): unknown { return this.x === null ? null : this.x.ext }
  set ext (e: unknown) {
    if (this.x !== null) { this.x.ext = e; this.trim() } else if (e !== null) this.rare().ext = e
  }
}

export interface Waiter {
  readonly count: number
  readonly deadline: number
  readonly ref: unknown
  keyState: KeyState
  done: boolean
}

export interface Resolution {
  ref: unknown
  decision: Decision
}

export interface KeySnapshot { key: string, rule: string, held: number, outstanding: number, resetMs: number, waiters: number }

/** Up to `max` key states as plain data (for `status`), rounded for display. */
export function snapshotKeys (states: Iterable<KeyState>, now: number, max: number): KeySnapshot[] {
  const out: KeySnapshot[] = []
  for (const ks of states) {
    if (out.length >= max) break
    const b = ks.bucket
    b.advance(now)
    out.push({
      key: ks.key,
      rule: ks.rule.name,
      held: Math.round(b.held * 1000) / 1000,
      outstanding: Math.round(b.outstanding(now) * 1000) / 1000,
      resetMs: Math.ceil(b.resetIn(now)),
      waiters: ks.waiters?.length ?? 0
    })
  }
  return out
}
