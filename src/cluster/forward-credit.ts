/**
 * Credit: a seed spends a few more tokens for a member than the member's
 * forwarded acquire asked, and the member admits its next acquires of that
 * key from them, until the seed's window ends (cluster-protocol.md, "Members and
 * forwarding", forward credit). Pure, like the core: time comes in as `nowMs` (the
 * member's monotonic clock).
 *
 * Why: with `decide: "seeds"` every acquire of a member crosses the network
 * twice. A member that makes 30 acquires of one key a window needs ~6
 * forwards instead of 30, and most of its answers take microseconds.
 *
 * Invariants (hard mode's guarantee is the seed's, as for any forward):
 * - Credit is tokens the seed already spent, in its window, under its own
 *   fence and lease: `ClusterCore.acquire` decided them like any acquire. So
 *   the cluster's count for that window is as if the seed had admitted them
 *   then; the member only hands them to its clients later. Tokens it never
 *   hands out are lost with the window, as a central limiter's are when a
 *   client that got them does not use them.
 * - The member admits from credit only before `untilMs`: the time it SENT
 *   the fwd plus the answer's `resetMs` (the seed's time to its window end
 *   at the moment it decided, which came later), less the most the seed's
 *   calendar may gain on real time (calendar.ts FORWARD_SLEW, taken at
 *   twice that) and 1 ms of rounding. Only monotonic durations are
 *   compared, so no clock of the member's and the seed's need agree: every
 *   credit admission falls within the seed's window in true time.
 * - And within the seed's lease: the answer's `creditMs`, the lease's time
 *   left when the seed decided, bounds it the same way when shorter. So once
 *   a seed cut off from a quorum could be fenced, no member hands out what
 *   it spent (a side without a quorum admits nothing after its leases
 *   lapse: what reclaim relies on).
 * - Only fixed-window rules: their tokens belong to one calendar window and
 *   nothing of them comes back to a bucket. A rule whose hash changed, or
 *   that no longer decides at the seeds, drops its credit (dropping tokens
 *   is always safe). A restart forgets it (memory only).
 * - At most MAX_KEYS keys are tracked; past that a key is forwarded as
 *   before and asks for no credit.
 */
import type { Decision } from '../core/types.js'
import type { CompiledRule } from '../core/rules.js'

/** Keys whose demand and credit a member tracks at once. */
export const MAX_KEYS = 8192

/** The member asks for this fraction of its expected use over the rule's `credit` (within the window): half, so little is stranded. */
const ASK_SHARE = 0.5

/** Credit asked below this many tokens is not worth the bytes of asking: none is asked. */
const MIN_ASK = 2

/** The seed spends at most this fraction of what it has left of the key for one member's credit (it tightens). */
export const GIVE_SHARE = 0.25

/** Margin on the seed's resetMs for its calendar's most gain on true time (500 ppm), taken twice over. */
const SLEW_MARGIN = 0.001

interface Entry {
  /** The rule's hash the credit was given under ('' when none is held). */
  hash: string
  /** The seed that spent it. */
  seed: string
  /** Tokens left to admit. */
  left: number
  /** Admit none at or after this (member mono). */
  untilMs: number
  /** What the seed had left at its answer, for the client's `remaining`. */
  remaining: number
  /** The window's end as last learned from an answer (member mono; 0: none known). */
  windowEndMs: number
  /** Demand: tokens this node's clients asked since `spanMs`, and in the `span` before it (0 if that was long ago). */
  span: number
  spanMs: number
  n: number
  prevN: number
}

/** A rule as the credit needs it (a CompiledRule). */
export interface CreditRule {
  readonly name: string
  readonly hash: string
  readonly stock: number
  readonly config: { readonly perMs: number, readonly creditMs?: number }
}

export class Credits {
  private readonly keys = new Map<string, Entry>()

  get size (): number { return this.keys.size }

  /**
   * A member's acquire of `count` of `key`: counted as demand, then admitted
   * from credit if it holds enough that is still good. Null: forward it.
   */
  take (key: string, count: number, rule: CreditRule, nowMs: number): { seed: string, decision: Decision } | null {
    const e = this.entry(key, rule, nowMs)
    if (e === undefined) return null
    e.n += count
    if (e.left < count || e.hash !== rule.hash) return null
    e.left -= count
    return {
      seed: e.seed,
      decision: { allowed: true, remaining: e.remaining + e.left, limit: rule.stock, resetMs: Math.max(0, e.untilMs - nowMs), retryAfterMs: 0, rule: rule.name }
    }
  }

  /**
   * How much credit to ask with a forward of `key` now (0: none): half of
   * what this node is expected to ask for over the rule's `creditMs`, or the
   * rest of the window if that is shorter, at its rate over the last one to
   * two spans (a span is `creditMs`). The horizon bounds what is lost
   * when the demand moves to another node: the credit held here then.
   */
  ask (key: string, rule: CreditRule, nowMs: number): number {
    const e = this.keys.get(key)
    const creditMs = rule.config.creditMs
    if (e === undefined || e.windowEndMs <= nowMs || creditMs === undefined) return 0
    // The rate over this span so far and the whole one before: a request or two early in a span is no rate.
    const rate = (e.n + e.prevN) / (nowMs - e.spanMs + e.span)
    const want = Math.floor(rate * Math.min(e.windowEndMs - nowMs, creditMs) * ASK_SHARE) - e.left
    return want >= MIN_ASK ? Math.min(want, rule.stock) : 0
  }

  /**
   * A seed's answer to a forward of `key` sent at `sentMs`: learn the
   * window's end, and keep any credit until it, or until `creditMs` after
   * `sentMs` if sooner (the seed's lease's time left; see the invariants).
   */
  answered (key: string, seed: string, resetMs: number, remaining: number, credit: number, rule: CreditRule, sentMs: number, nowMs: number, creditMs = resetMs): void {
    const e = this.entry(key, rule, nowMs)
    if (e === undefined || resetMs <= 0) return
    e.windowEndMs = sentMs + resetMs
    e.remaining = remaining
    if (credit <= 0) return
    const until = sentMs + Math.floor(Math.min(resetMs, creditMs) * (1 - SLEW_MARGIN)) - 1
    if (e.left > 0 && e.hash === rule.hash) {
      // Both are good until the earlier end: never later than either seed's window.
      e.left += credit
      e.untilMs = Math.min(e.untilMs, until)
    } else {
      e.left = credit
      e.untilMs = until
    }
    e.seed = seed
    e.hash = rule.hash
  }

  /** The key's entry, its demand span and window rolled to `nowMs`; undefined when the table is full of live keys. */
  private entry (key: string, rule: CreditRule, nowMs: number): Entry | undefined {
    let e = this.keys.get(key)
    if (e === undefined) {
      if (this.keys.size >= MAX_KEYS && !this.prune(nowMs)) return undefined
      e = { hash: rule.hash, seed: '', left: 0, untilMs: 0, remaining: 0, windowEndMs: 0, span: spanOf(rule), spanMs: nowMs, n: 0, prevN: 0 }
      this.keys.set(key, e)
      return e
    }
    // A span is the rule's credit horizon; the one before counts only if it ended just now.
    const span = e.span = spanOf(rule)
    const elapsed = nowMs - e.spanMs
    if (elapsed >= span) {
      e.prevN = elapsed < 2 * span ? e.n : 0
      e.n = 0
      e.spanMs = nowMs
    }
    if (nowMs >= e.untilMs) e.left = 0
    if (e.windowEndMs > 0 && nowMs >= e.windowEndMs) {
      // Windows are calendar-aligned, so the next ends perMs after this one (until an answer says).
      e.windowEndMs += (Math.floor((nowMs - e.windowEndMs) / rule.config.perMs) + 1) * rule.config.perMs
    }
    return e
  }

  /** Forget keys with no credit good now and no demand for two spans; true if that made room. */
  private prune (nowMs: number): boolean {
    for (const [k, e] of this.keys) {
      // No credit good now, and its span over twice (its rate would read 0 at the next acquire anyway).
      if ((e.left === 0 || nowMs >= e.untilMs) && nowMs - e.spanMs >= 2 * e.span) this.keys.delete(k)
    }
    return this.keys.size < MAX_KEYS
  }
}

function spanOf (rule: CreditRule): number { return rule.config.creditMs ?? rule.config.perMs }

/**
 * Whether a rule's keys take credit: it says `credit`, is fixed-window (its
 * tokens belong to one calendar window and none comes back to a bucket) and
 * is decided at the seeds (validate.ts allows `credit` only so).
 */
export function creditable (rule: CompiledRule): boolean {
  return rule.config.creditMs !== undefined && rule.config.decide === 'seeds' && rule.config.algorithm === 'fixed-window'
}
