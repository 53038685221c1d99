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
  /**
   * Held tokens that may not be spent (0 on a lone node). Set by the cluster
   * while burns owed elsewhere after a rule change are unpaid.
   */
  reserve: number
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
