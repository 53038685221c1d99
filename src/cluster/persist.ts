/**
 * What a clean stop saves of a ClusterCore, and how a restart puts it back.
 * Pure (time passed in), so the daemon's driver and the simulator restart
 * nodes with the same code; the file I/O lives in durable-state.ts.
 *
 * Conservation: a key's share is `held + outstanding (+ deferred)`. The save
 * keeps exactly that: held tokens come back spendable, the rest comes back
 * deferred until the last of them would have returned. So a restart neither
 * creates tokens nor returns any early.
 */
import type { ClusterCore } from './cluster-core.js'
import type { SavedKey } from './durable-state.js'
import { deferredTotal, ext } from './key-ext.js'

/** Every key with tokens (or a pre-allocated share) after the handoff: what to save. */
export function snapshotKeys (core: ClusterCore, nowMs: number): SavedKey[] {
  const keys: SavedKey[] = []
  for (const ks of core.limiter.states()) {
    ks.bucket.advance(nowMs)
    const x = ext(ks)
    const held = Math.max(0, ks.bucket.held)
    const tokens = ks.bucket.outstanding(nowMs) + deferredTotal(x)
    if (held + tokens <= 0 && ks.initial === 0) continue
    // Spent tokens come back no earlier than their schedule (conservatively all at the last return).
    let at = nowMs + ks.bucket.resetIn(nowMs)
    for (const [, when] of x.deferred ?? []) at = Math.max(at, when)
    keys.push({ key: ks.key, rule: ks.rule.name, ruleHash: ks.rule.hash, initial: ks.initial, held, tokens, at })
  }
  return keys
}

export interface Restored {
  keys: number
  tokens: number
  /** Saved keys whose rule changed or went away: their tokens stay stranded. */
  dropped: SavedKey[]
}

/** Put saved keys back into a freshly built core (before init and before serving). */
export function restoreKeys (core: ClusterCore, saved: readonly SavedKey[], nowMs: number): Restored {
  const r: Restored = { keys: 0, tokens: 0, dropped: [] }
  for (const k of saved) {
    const rule = core.limiter.rules.find(x => x.name === k.rule)
    if (rule === undefined || rule.hash !== k.ruleHash) { r.dropped.push(k); continue }
    const ks = core.limiter.restore(k.key, k.initial, nowMs)
    const held = k.held ?? 0
    if (held > 0) ks.bucket.credit(held)
    if (k.tokens > 0) (ext(ks).deferred ??= []).push([k.tokens, k.at])
    core.touch(ks)
    r.keys++
    r.tokens += held + k.tokens
  }
  return r
}
