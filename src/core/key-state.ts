/**
 * The per-key state the Limiter keeps, and its waiting acquires. Shared by
 * the limiter and the layer above it (the cluster reads buckets and keeps its
 * own per-key data in `ext`).
 */
import type { Bucket } from './algorithms/index.js'
import type { CompiledRule } from './rules.js'
import type { Decision } from './types.js'

export interface KeyState {
  readonly key: string
  rule: CompiledRule
  bucket: Bucket
  /** The share this key was created with (what eviction must be able to recreate). */
  initial: number
  waiters: Waiter[] | null
  /** Sum of the counts of queued waiters. */
  queued: number
  /** When this key next needs `poll` (Infinity: never). */
  wakeAt: number
  /** Per-key data of the layer above (the cluster); opaque here. */
  ext: unknown
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
