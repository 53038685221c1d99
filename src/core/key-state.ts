/**
 * The per-key state the Limiter keeps, and its waiting acquires. Shared by
 * the limiter and the layer above it (the cluster reads buckets and keeps its
 * own per-key data in `ext`).
 *
 * Memory layout (bench/memory.ts measures it): a million keys must fit in a
 * small heap, so a key costs ONE object beside its table entry and key
 * string, and that object has two fields of its own beside the algorithm's:
 * the key and a `KeyHead`. Every bucket class extends KeyState, and the
 * limiter's key state is the bucket it creates (`bucket` returns the object
 * itself).
 *
 * The head holds what keys share (the rule, the bucket spec, the share the
 * key was created with) and what a key keeps only while it is set (waiters,
 * reserve, the cluster's `ext`, a bucket that replaced the original one on a
 * rule change). Keys whose rare fields are all at their defaults point to a
 * SHARED head, one per (spec, rule, initial): it is never written. The first
 * write of a rare field gives the key a head of its own (copy on write); once
 * every rare field is back at its default, the key goes back to the shared
 * head. The accessors below read all of it as if it were fields.
 *
 * Invariants that keep the object small and its hidden class stable:
 * - the constructor initializes every field, in one order, and nothing adds
 *   fields later (V8 keeps them in-object);
 * - no field of the common path holds a non-integer number unless it must
 *   (V8 boxes a double field in a 16-byte heap number of its own), see
 *   FixedWindowBucket.
 *
 * A bucket made on its own (`createBucket`: tests, a rule change's
 * replacement bucket) is also a KeyState, with its key fields unused.
 */
import type { Bucket, BucketSpec } from './algorithms/bucket.js'
import type { CompiledRule } from './rules.js'
import type { Decision } from './types.js'

/** What keys of one rule share, and what a key keeps only while it is set (see above). */
export class KeyHead {
  rule: CompiledRule
  /** The bucket's per-rule parameters; a key keeps its spec when its rule object is replaced. */
  readonly spec: BucketSpec
  /** The share the key was created with (what eviction must be able to recreate). */
  initial: number
  /** Shared by many keys: never written (KeyState copies it first). */
  readonly shared: boolean
  waiters: Waiter[] | null = null
  queued = 0
  wakeAt = Infinity
  reserve = 0
  /** A token bucket's refill reserve (Bucket.setReserve); kept apart from `reserve`, as the bucket may be a replacement. */
  bucketReserve = 0
  ext: unknown = null
  /** A bucket that replaced the key's own (a rule change); null: the key is its own bucket. */
  bucket: Bucket | null = null

  constructor (rule: CompiledRule, spec: BucketSpec, initial: number, shared: boolean) {
    this.rule = rule
    this.spec = spec
    this.initial = initial
    this.shared = shared
  }

  get idle (): boolean {
    return this.waiters === null && this.queued === 0 && this.wakeAt === Infinity && this.reserve === 0 &&
      this.bucketReserve === 0 && this.ext === null && this.bucket === null
  }
}

/** Shared heads per spec, by initial share. A few values occur in practice; past the cap, heads are not cached. */
const sharedHeads = new WeakMap<BucketSpec, Map<number, KeyHead>>()
const MAX_SHARED_PER_SPEC = 64

/** The shared head for (rule, spec, initial). */
function sharedHead (rule: CompiledRule, spec: BucketSpec, initial: number): KeyHead {
  let byInitial = sharedHeads.get(spec)
  if (byInitial === undefined) sharedHeads.set(spec, byInitial = new Map())
  const h = byInitial.get(initial)
  // A reload replaces rule objects: a cached head of an older rule object is replaced.
  if (h !== undefined && h.rule === rule) return h
  const fresh = new KeyHead(rule, spec, initial, true)
  if (h !== undefined || byInitial.size < MAX_SHARED_PER_SPEC) byInitial.set(initial, fresh)
  return fresh
}

/** Placeholder rule of a bucket made on its own (never read: such a bucket has no key). */
const NO_RULE = null as unknown as CompiledRule

export abstract class KeyState {
  /** The key ('' for a bucket made on its own). Set once, by the limiter. */
  key: string
  /** Shared parameters and rare fields (see above); read through the accessors. */
  protected h: KeyHead

  constructor (spec: BucketSpec) {
    this.key = ''
    this.h = sharedHead(NO_RULE, spec, 0)
  }

  /** Give a freshly made bucket its key (the limiter's `create`). */
  bind (key: string, rule: CompiledRule, initial: number): this {
    this.key = key
    this.h = sharedHead(rule, this.h.spec, initial)
    return this
  }

  /** The head to write to: the key's own, made on first use. */
  private own (): KeyHead {
    const h = this.h
    if (!h.shared) return h
    return (this.h = new KeyHead(h.rule, h.spec, h.initial, false))
  }

  /** Go back to the shared head once every rare field is at its default. */
  private trim (): void {
    const h = this.h
    if (!h.shared && h.idle) this.h = sharedHead(h.rule, h.spec, h.initial)
  }

  get rule (): CompiledRule { return this.h.rule }
  set rule (r: CompiledRule) {
    const h = this.h
    if (h.shared) this.h = sharedHead(r, h.spec, h.initial)
    else h.rule = r
  }

  /** The share this key was created with (what eviction must be able to recreate). */
  get initial (): number { return this.h.initial }
  set initial (n: number) {
    const h = this.h
    if (h.shared) this.h = sharedHead(h.rule, h.spec, n)
    else h.initial = n
  }

  /** This node's holding of the key: the object itself unless a rule change replaced it. */
  get bucket (): Bucket {
    const b = this.h.bucket
    return b === null ? this as unknown as Bucket : b
  }

  set bucket (b: Bucket) {
    const v = b === this as unknown as Bucket ? null : b
    if (!this.h.shared) { this.h.bucket = v; this.trim() } else if (v !== null) this.own().bucket = v
  }

  /**
   * Held tokens that may not be spent (0 on a lone node). Set by the cluster
   * while burns owed elsewhere after a rule change are unpaid.
   */
  get reserve (): number { return this.h.reserve }
  set reserve (r: number) {
    if (!this.h.shared) { this.h.reserve = r; this.trim() } else if (r !== 0) this.own().reserve = r
  }

  /** A token bucket's refill reserve (see TokenBucket.setReserve). */
  protected get bucketReserve (): number { return this.h.bucketReserve }
  protected set bucketReserve (r: number) {
    if (!this.h.shared) { this.h.bucketReserve = r; this.trim() } else if (r !== 0) this.own().bucketReserve = r
  }

  get waiters (): Waiter[] | null { return this.h.waiters }
  set waiters (ws: Waiter[] | null) {
    if (!this.h.shared) { this.h.waiters = ws; this.trim() } else if (ws !== null) this.own().waiters = ws
  }

  /** Sum of the counts of queued waiters. */
  get queued (): number { return this.h.queued }
  set queued (n: number) {
    if (!this.h.shared) { this.h.queued = n; this.trim() } else if (n !== 0) this.own().queued = n
  }

  /** When this key next needs `poll` (Infinity: never). */
  get wakeAt (): number { return this.h.wakeAt }
  set wakeAt (t: number) {
    if (!this.h.shared) { this.h.wakeAt = t; this.trim() } else if (t !== Infinity) this.own().wakeAt = t
  }

  /** Per-key data of the layer above (the cluster); opaque here. */
  get ext (): unknown { return this.h.ext }
  set ext (e: unknown) {
    if (!this.h.shared) { this.h.ext = e; this.trim() } else if (e !== null) this.own().ext = e
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
