/**
 * Local admission policies that sit in front of the bucket, per key:
 *
 * - Soft mode, while the node is cut off from every peer or fenced: `fail-closed`
 *   denies, `fail-open` admits everything, `local-share` spends what is held
 *   and then overdraws up to `maxDebt`. Overdrawn tokens are debt, repaid
 *   from held tokens after healing (they count as spent then, and return on
 *   the rule's schedule), and reported as `overdraft`.
 * - Tightening: when the cluster-wide remaining falls below the low-water
 *   fraction of the stock, a calendar-window key's held tokens are paced
 *   evenly over the rest of the window instead of being burned at once.
 *
 * Both only ever deny more (hard mode) or, for soft rules by the user's
 * choice, admit beyond the holding with the overdraft accounted.
 */
import type { KeyState } from '../core/limiter.js'
import type { Decision } from '../core/types.js'
import type { ClusterCore } from './cluster-core.js'
import { windowed, windowStart, type KeyExt } from './key-ext.js'

export type Verdict = 'allow' | 'deny' | 'bucket'

/**
 * Stopped, soft-mode failure policies (isolated, or fenced: the core's
 * `fenced` was brought to this moment by its prepare step) and tightening
 * pacing; undefined: the bucket decides.
 */
export function admissionPolicy (c: ClusterCore, ks: KeyState, x: KeyExt, count: number, nowMs: number): Decision | undefined {
  if (c.phase === 'stopped') return c.limiter.decide(ks, false, count, nowMs)
  const fenced = c.fence.fenced
  if (ks.rule.config.mode === 'soft' && (fenced || c.isolated(nowMs))) {
    return notBefore(c.limiter.decide(ks, softVerdict(ks, x, count, nowMs, fenced) === 'allow', count, nowMs), c.tuning.aliveTimeoutMs)
  }
  // Pacing is the rule's choice (`pace`); by default a request is allowed while tokens remain, like an exact limiter.
  if (x.tight && ks.rule.config.pace === true && count > x.pace) return notBefore(c.limiter.decide(ks, false, count, nowMs), c.tuning.tickMs)
  return undefined
}

/** A denial by policy while tokens are held: say when to try again rather than "now". */
function notBefore (d: Decision, ms: number): Decision {
  if (!d.allowed && d.retryAfterMs === 0) d.retryAfterMs = ms
  return d
}

/**
 * Soft-mode verdict for a cut-off or fenced node; spends from the bucket
 * when it can. A fenced node counts even what it spends of its holding as
 * overdraft: without a lease its held tokens may be reclaimed and spent
 * again elsewhere (cluster-protocol.md, "Leases and fencing").
 */
export function softVerdict (ks: KeyState, x: KeyExt, count: number, nowMs: number, fenced = false): Verdict {
  const rule = ks.rule.config
  if (rule.onPartition === 'fail-closed') return 'deny'
  // Held tokens above the reserve are spent first; anything beyond is overdraft, and counted.
  ks.bucket.advance(nowMs)
  if (ks.bucket.held - ks.reserve >= count && ks.bucket.trySpend(count, nowMs)) {
    if (fenced) x.overdraft += count
    return 'allow'
  }
  if (rule.onPartition === 'fail-open' || x.debt + count <= rule.maxDebt) {
    x.debt += count
    x.overdraft += count
    return 'allow'
  }
  return 'deny'
}

/** Repay soft-mode debt from held tokens: they count as spent now. */
export function repayDebt (ks: KeyState, x: KeyExt, nowMs: number): void {
  ks.bucket.advance(nowMs)
  const n = Math.min(x.debt, Math.floor(ks.bucket.held))
  if (n <= 0) return
  ks.bucket.forceSpend(n, nowMs)
  x.debt -= n
}

/** Update the tight flag and the pacing budget for the time `dt` since the last tick. */
export function updatePacing (ks: KeyState, x: KeyExt, tight: boolean, dt: number, nowMs: number): void {
  const rule = ks.rule.config
  if (!tight || !windowed(rule.algorithm)) { x.tight = false; return }
  const held = ks.bucket.held
  if (!x.tight) { x.tight = true; x.pace = Math.min(held, 1) }
  const rest = windowStart(nowMs, rule.perMs) + rule.perMs - nowMs
  x.pace = Math.min(held, x.pace + held * dt / Math.max(dt, rest))
}
