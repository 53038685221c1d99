/**
 * A seed's denial of a key, kept at the node that forwarded the acquire
 * (protocol version 15). Pure: time comes in as an argument.
 *
 * One of a glob key's two seeds denies an acquire with nothing remaining
 * until the window's end only when it and, as it knows, the other seed are
 * both out (else it sends the acquire on: forward-pair.ts `partnerFor`).
 * That is the cluster out, as a central limiter's count is until its window
 * ends. So a member (or a seed, for what it forwards) denies the key's next
 * acquires itself for a while, each a `fwd` and its answer saved: at
 * keys100 on 50 nodes about one acquire in seven is denied.
 *
 * Invariants:
 * - Kept only for a glob key of a fixed-window rule decided at its two seeds
 *   (`keeps`), and only a denial whose window end the node knows (not the
 *   rule's `per`, guessed when the answer telling it was missed).
 * - Kept at most one gossip interval, and never past the window's end:
 *   within a window tokens come back only through a failure's recovery (a
 *   heir, a restart) or a rule change, and the bound caps how long a node
 *   misses them.
 * - The decision given is the seed's: nothing remaining, a retry at the
 *   window's end.
 */
import type { CompiledRule } from '../core/rules.js'
import type { Decision } from '../core/types.js'

/** Keys whose denials a node keeps at once: past this, it forgets them all (each denial is kept a gossip interval). */
const MAX_KEPT = 4096

/** Whether a node keeps a seed's denial of a rule's keys (see the header). */
export function keeps (rule: CompiledRule): boolean {
  return rule.glob && rule.config.decide === 'seeds' && rule.config.algorithm === 'fixed-window'
}

export class KeptDenials {
  /** Per key: kept until `untilMs`, of a window ending at `resetAtMs` (monotonic). */
  private readonly denied = new Map<string, { untilMs: number, resetAtMs: number }>()

  /** A seed denied `key` until its window ends, `retryAfterMs` from `nowMs`: keep it at most `keepMs`. */
  keep (key: string, retryAfterMs: number, keepMs: number, nowMs: number): void {
    if (this.denied.size >= MAX_KEPT) this.denied.clear()
    this.denied.set(key, { untilMs: nowMs + Math.min(retryAfterMs, keepMs), resetAtMs: nowMs + retryAfterMs })
  }

  /** The denial of an acquire of `key` under `rule` while one is kept; else null. */
  kept (key: string, rule: CompiledRule, nowMs: number): Decision | null {
    const d = this.denied.get(key)
    if (d === undefined) return null
    if (nowMs >= d.untilMs) { this.denied.delete(key); return null }
    const resetMs = Math.max(0, Math.ceil(d.resetAtMs - nowMs))
    return { allowed: false, remaining: 0, limit: rule.stock, resetMs, retryAfterMs: resetMs, rule: rule.name }
  }
}
