/**
 * A member's overflow (rules decided locally, the default): an acquire this
 * member holds too few tokens for goes to a seed that says it holds enough,
 * and is decided there, as a `decide: "seeds"` rule's every acquire is
 * (forward.ts). Pure, like the core: time comes in as an argument.
 *
 * Why: a member decides from the part it holds, and asks the seeds for more
 * ahead of its demand (rebalance.ts). At 200 nodes, 195 of them members, a
 * member's part of a 1000-a-second key is 5 tokens a window: at the window's
 * end about 100 tokens sat at some 75 members as remnants of one or two,
 * while other members' requests were denied, and uniform load was under a
 * static split (89.2 against 90.0%). No want can move a token there in time
 * for a request that asks now. A request sent to the seeds can reach what
 * they hold: so the window's last tokens are reachable from every member, as
 * at a central limiter, and a member need not hold tokens it may not use
 * (`returnToLenders`).
 *
 * Invariants:
 * - Only when this node may spend fewer than `count` (a member decides
 *   what it can cover itself, in microseconds; a fenced one can cover
 *   nothing of a hard key), and only to a seed alive, agreeing
 *   on the rule, not leaving nor fenced, not routed around, that says it
 *   holds `count` or more (or, never having said, would create the key with
 *   that much).
 * - The seed decides it as its own request (hard mode's guarantee is the
 *   seed's), and counts it in its demand, as any member's forward: so it
 *   keeps stock for the overflow it serves. The member counts it too, and
 *   asks for its part of the next windows by it. (With the member's count
 *   alone, moving-hot at 200 nodes was 87.3% against 91.3%; with the seed's
 *   alone, 96% of all requests went to the seeds.)
 * - An answer that does not come is a denial, as for any forward.
 */
import { fmix32 } from '../core/hash.js'
import { hash32 } from '../core/share.js'
import type { CompiledRule } from '../core/rules.js'
import type { ClusterCore } from './cluster-core.js'
import { shortOf, upSeeds } from './forward-pair.js'
import { ext } from './key-ext.js'

/** How much longer each overflow timeout in a row stops a member's overflow, doubling up to this many times (see `Overflow`). */
const MAX_BACKOFFS = 4

/** A request answered in time lets a member overflow freely for this many `aliveTimeoutMs` (see `Overflow`). */
const FRESH_ALIVES = 4

/**
 * At a member: where its overflow goes, and whether it may go now. A
 * forward answered after the member's timeout may have spent a token at
 * the seed for a client already told no. Where answers come that late
 * (messages between nodes 300 ms slower than gossip: slow-streams),
 * forwards sent freely spent most of the window's last tokens so:
 * utilization fell from 63 to 47% at 50 nodes of which 5 seeds. So:
 * - while a seed answered one of this member's requests within half of
 *   `forwardTimeoutMs` in the last FRESH_ALIVES × `aliveTimeoutMs` (a
 *   forward, or a want), overflow goes freely;
 * - else one at a time (a probe: the next waits for its answer or timeout);
 * - after a forward went unanswered, none for `aliveTimeoutMs`, doubled for
 *   each such in a row (up to MAX_BACKOFFS times), until one is answered.
 *   For the member, not per seed: slow answers are the network's, and a
 *   member learning each seed by a probe of its own lost more (100 nodes of
 *   which 3 seeds, slow-streams).
 * A seed that died is routed around as for any forward (forward.ts
 * `suspect`). Memory only.
 */
export class Overflow {
  /** When a request of this member's was last answered in time. */
  private okMs = -Infinity
  /** When the last forward sent without that went (a probe), while its answer is awaited. */
  private probeMs = -Infinity
  private fails = 0
  private untilMs = -Infinity

  /**
   * Whether this node is a member, looked up once (the seeds are fixed for a
   * core's life): `to` is asked for every acquire. Not in the constructor:
   * the core makes its Forwarding before it sets its seeds.
   */
  private member: boolean | undefined

  constructor (private readonly c: ClusterCore) {}

  /**
   * The seed to send an acquire of `key` to (`overflowTo`), counted as this
   * member's demand; null: decide it here. `skip`: the seeds any forward
   * routes around (forward.ts).
   */
  to (key: string, count: number, rule: CompiledRule, turn: number, nowMs: number, skip: (seed: string, heardMs: number) => boolean): string | null {
    const t = this.c.tuning
    this.member ??= !this.c.seeds.includes(this.c.node)
    if (!this.member || !t.overflow || nowMs < this.untilMs) return null
    const vouched = nowMs - this.okMs <= FRESH_ALIVES * t.aliveTimeoutMs
    if (!vouched && nowMs - this.probeMs < t.forwardTimeoutMs) return null
    const to = overflowTo(this.c, key, count, rule, turn, nowMs, skip)
    if (to === null) return null
    if (!vouched) this.probeMs = nowMs
    this.c.noteDemand(key, count, nowMs)
    return to
  }

  /** A forward was answered in time. */
  answered (nowMs: number): void {
    this.okMs = nowMs
    this.probeMs = -Infinity
    this.fails = 0
    this.untilMs = -Infinity
  }

  /** A want of `key`, sent at the key's `wantSentAt`, was answered now (intake.ts): a round trip (`roundTrip`). */
  wantAnswered (key: string, nowMs: number): void {
    this.member ??= !this.c.seeds.includes(this.c.node)
    const ks = this.member ? this.c.limiter.existing(key) : undefined
    if (ks !== undefined) this.roundTrip(nowMs - ext(ks).wantSentAt, nowMs)
  }

  /** A want was answered after `rttMs`: in time if within half the forward timeout. */
  roundTrip (rttMs: number, nowMs: number): void {
    if (rttMs >= 0 && 2 * rttMs <= this.c.tuning.forwardTimeoutMs) this.okMs = nowMs
  }

  /** A forward went unanswered (a timeout, or its session failed). */
  unanswered (nowMs: number): void {
    this.untilMs = nowMs + this.c.tuning.aliveTimeoutMs * 2 ** Math.min(this.fails, MAX_BACKOFFS)
    this.fails++
    this.okMs = -Infinity
    this.probeMs = -Infinity
  }
}

/**
 * At a member, for a key of a rule it decides locally: the seed to send an
 * acquire of `count` to, when this node holds fewer than that and a seed
 * (not one `skip` names) says it holds enough; else null (decide here).
 * `turn` varies the choice among such seeds from one acquire to the next,
 * so that members do not all send to the one that held most at its last
 * gossip.
 */
export function overflowTo (c: ClusterCore, key: string, count: number, rule: CompiledRule, turn: number, nowMs: number, skip: (seed: string, heardMs: number) => boolean): string | null {
  if (!c.tuning.overflow || rule.config.decide === 'seeds' || c.seeds.includes(c.node)) return null
  // What it may spend, less its reserve (a fenced member reserves all of a hard key), as the last acquire here left it:
  // one decided here brings it up to date, so a change shows from the next. A key it cannot hold: decided here.
  const ks = shortOf(c, key, count, nowMs, true)
  if (ks === null) return null
  const able: string[] = []
  for (const s of upSeeds(c, rule, nowMs, skip).seeds) {
    const p = c.peers.get(s)
    if (p !== undefined && c.view.peerHeld(p, ks) >= count) able.push(s)
  }
  if (able.length === 0) return null
  return able[fmix32(hash32(key) ^ hash32(c.node) ^ turn) % able.length]
}
