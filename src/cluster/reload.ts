/**
 * A reload changed a key's rule, in a cluster.
 *
 * The key's tokens stay where they are: this node keeps what it holds and
 * what it has outstanding (spent again now, so nothing returns early), and
 * adds or destroys only the change in its own pre-allocated share. Summed
 * over the seeds, the cluster's tokens move by exactly the change in the
 * rule's stock, wherever they had travelled. (Rebuilding from the new share,
 * as a lone node may, would re-create tokens that had moved to other nodes.)
 * What cannot be destroyed now, because this node holds too little, is
 * burned as tokens come back (`burn`).
 */
import { createBucket } from '../core/algorithms/index.js'
import type { KeyState } from '../core/limiter.js'
import type { CompiledRule } from '../core/rules.js'
import { initialShare } from '../core/share.js'
import { ext } from './key-ext.js'

export function carryOver (ks: KeyState, next: CompiledRule, node: string, seeds: readonly string[], nowMs: number): void {
  const b = ks.bucket
  b.advance(nowMs)
  const held = Math.max(0, b.held)
  const out = b.outstanding(nowMs)
  const old = ks.rule
  const delta = initialShare(next.stock, next.glob, ks.key, node, seeds) - initialShare(old.stock, old.glob, ks.key, node, seeds)
  const total = held + out + delta
  const c = next.config
  const fresh = createBucket(c.algorithm, { limit: c.limit, perMs: c.perMs, burst: next.stock, share: Math.max(0, total) }, nowMs)
  fresh.forceSpend(Math.min(out, Math.max(0, total)), nowMs)
  ks.bucket = fresh
  ks.initial = Math.max(0, ks.initial + delta)
  if (total < 0) ext(ks).burn += -total
}
