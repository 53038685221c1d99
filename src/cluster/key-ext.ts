/**
 * What the cluster keeps per key, beside the key's bucket: the demand rate,
 * deferred credits, soft-mode debt, pacing while tight, and counters.
 *
 * Deferred credits are tokens received with an `at` (calendar time) later
 * than this node's calendar (a donor whose window already rolled over, or a handed-off token that
 * has not returned yet). They are in transit until `at`: never spendable
 * early, so a token can't be spent twice in one window even with skew.
 */
import type { KeyState } from '../core/limiter.js'
import type { CalendarView } from '../core/calendar.js'
import type { MemberSumLine } from './member-sums.js'
import type { Peer } from './peers.js'

/**
 * The numbers live in one array of doubles (`n`, a slot per field, in the
 * order of the accessors), read and written through the accessors below. A plain
 * object would do, but V8 boxes every field that ever held a fraction,
 * -Infinity or NaN (most of these) in a 16-byte heap number of its own per
 * object; an array of doubles keeps them unboxed, 8 bytes each. A million
 * keys of a cluster node each have one (bench/memory.ts, `cluster` rows).
 * The array never changes length and holds only numbers (so it stays an
 * array of doubles); the value read back is the very double written.
 */
export class KeyExt {
  private readonly n: number[] = [0, 0, 0, -Infinity, -Infinity, -Infinity, 0, -Infinity, 0, 0, 0, -Infinity, 0, 0, 0, 0, 0, NaN, NaN, NaN, NaN, NaN, 0, NaN, -Infinity, 0, 0, -1, -Infinity, 0]
  deferred: Array<[amount: number, at: number]> | null = null
  /** Tightening: cluster-wide remaining below the low-water mark. */
  tight = false
  /**
   * The key's donor candidates from its last walk of the peers (ClusterView:
   * those holding a token or more then, plus those seen to since); null
   * before the first walk. Only they can answer a want, so choosing donors
   * walks them, not every peer (at 200 nodes and 100 keys the walk over
   * every peer per want round was a third of the simulator's time, and the
   * daemon's too). Fields here, not a WeakMap keyed by the key's
   * state: an entry of that cost 120 bytes per cluster key (bench/memory,
   * cluster fixed-window at 100K keys: 726 against 606 B).
   */
  walkPeers: Peer[] | null = null
  /** The rule hash the last walk saw (a reload changes which peers agree). */
  walkHash = ''
  /** At a member: the other members' sums of this key, from a seed's `msums` (member-sums.ts); null: none heard. */
  msum: MemberSumLine | null = null

  /** Tokens requested (allowed or not) since the last rate update. */
  get demand (): number { return this.n[0] }
  set demand (v: number) { this.n[0] = v }
  /** EWMA of demand, tokens per second (half-life `rateHalfLifeMs`): what is gossiped. */
  get rate (): number { return this.n[1] }
  set rate (v: number) { this.n[1] = v }
  /** A fast EWMA (half-life of about two ticks): reacts to a shift at once. */
  get fastRate (): number { return this.n[2] }
  set fastRate (v: number) { this.n[2] = v }
  get lastDemandAt (): number { return this.n[3] }
  set lastDemandAt (v: number) { this.n[3] = v }
  /** When a want for this key was sent (-Infinity: none in flight). */
  get wantSentAt (): number { return this.n[4] }
  set wantSentAt (v: number) { this.n[4] = v }
  /** When the last want was sent (kept after its reply; spaces wants out). */
  get lastWantAt (): number { return this.n[5] }
  set lastWantAt (v: number) { this.n[5] = v }
  /** What alive agreeing peers hold, as last summed (ClusterView.clusterRemaining), and when. */
  get peersHeld (): number { return this.n[6] }
  set peersHeld (v: number) { this.n[6] = v }
  get peersHeldAt (): number { return this.n[7] }
  set peersHeldAt (v: number) { this.n[7] = v }
  /** Soft mode: tokens admitted without holding them, still to repay. */
  get debt (): number { return this.n[8] }
  set debt (v: number) { this.n[8] = v }
  /** Soft mode: all tokens ever overdrawn (reported). */
  get overdraft (): number { return this.n[9] }
  set overdraft (v: number) { this.n[9] = v }
  /**
   * Tokens this node owes to destroy: a rule change lowered its share by
   * more than it held. Paid before anything is spent or given: from held
   * tokens, from tokens as they come back, and from tokens asked of peers
   * for the purpose. Gossiped (`owed`) so that every node keeps as much of
   * its own holding unspent while it is unpaid (caution.ts). Saved.
   */
  get burn (): number { return this.n[10] }
  set burn (v: number) { this.n[10] = v }
  /** When `ks.reserve` (caution.ts) was last computed. */
  get reserveAt (): number { return this.n[11] }
  set reserveAt (v: number) { this.n[11] = v }
  /** Burns owed elsewhere as this node's own view sees them (caution.ts); gossiped. */
  get debts (): number { return this.n[12] }
  set debts (v: number) { this.n[12] = v }
  /** Tokens spendable before the next tick while tight. */
  get pace (): number { return this.n[13] }
  set pace (v: number) { this.n[13] = v }
  get transfersIn (): number { return this.n[14] }
  set transfersIn (v: number) { this.n[14] = v }
  get transfersOut (): number { return this.n[15] }
  set transfersOut (v: number) { this.n[15] = v }
  /** Tokens of this key known lost (grants to a dead epoch, unplaceable credits). */
  get stranded (): number { return this.n[16] }
  set stranded (v: number) { this.n[16] = v }
  /** Values last gossiped, to send only what changed. */
  get sentHeld (): number { return this.n[17] }
  set sentHeld (v: number) { this.n[17] = v }
  get sentOutstanding (): number { return this.n[18] }
  set sentOutstanding (v: number) { this.n[18] = v }
  get sentRate (): number { return this.n[19] }
  set sentRate (v: number) { this.n[19] = v }
  get sentOwed (): number { return this.n[20] }
  set sentOwed (v: number) { this.n[20] = v }
  get sentDebts (): number { return this.n[21] }
  set sentDebts (v: number) { this.n[21] = v }
  /** Until when (monotonic) requests for this key wait for a first transfer (first-use.ts); 0: not in a first use. */
  get firstUseUntil (): number { return this.n[22] }
  set firstUseUntil (v: number) { this.n[22] = v }
  /** held + outstanding + deferred + in transit out, as last gossiped (shortfall.ts). */
  get sentCustody (): number { return this.n[23] }
  set sentCustody (v: number) { this.n[23] = v }
  /** When a node without a share last returned surplus of this key to its lenders (rebalance.ts). */
  get lastReturnAt (): number { return this.n[24] }
  set lastReturnAt (v: number) { this.n[24] = v }
  /** Wants of the current round (rebalance.ts) still unanswered; the round is over at 0 or after wantTimeoutMs. */
  get wantsOut (): number { return this.n[25] }
  set wantsOut (v: number) { this.n[25] = v }
  /** The rates alive agreeing peers gossiped, summed with `peersHeld` (ClusterView.scarcity). */
  get peersRate (): number { return this.n[26] }
  set peersRate (v: number) { this.n[26] = v }
  /** The Peers version the last walk saw (-1: none yet). */
  get walkVersion (): number { return this.n[27] }
  set walkVersion (v: number) { this.n[27] = v }
  /** When the key's line last went out in a gossip (monotonic; -Infinity: never). */
  get sentAt (): number { return this.n[28] }
  set sentAt (v: number) { this.n[28] = v }
  /** Whether `sentRate` went as decaying (gossip `decay`): peers then extrapolate it from `sentAt`. */
  get sentDecays (): number { return this.n[29] }
  set sentDecays (v: number) { this.n[29] = v }
}

/**
 * What a rate gossiped as decaying (`decay`, messages.ts) reads `dtMs`
 * later: the slow average with no demand falls by half every
 * `halfLifeMs` (updateRate), so sender and receivers agree on it without a
 * line. Not decaying: the rate as said.
 */
export function decayed (rate: number, decays: boolean, dtMs: number, halfLifeMs: number): number {
  return decays && dtMs > 0 ? rate * Math.pow(2, -dtMs / halfLifeMs) : rate
}

/**
 * Whether, with no further demand, the rate this node keeps for (`keep`,
 * its `keepRate` now) is its slow average falling at its half-life: it keeps by
 * the slow average now (not the fast one above its noise, not dropped),
 * and no demand came for `quietMs` (DECAY_QUIET_INTERVALS gossip intervals: with one, a node
 * of uniform load at 6/s often said "decaying" between two requests, and
 * peers that read its rate fallen moved uniform load at 200 nodes under the
 * static split on two seeds of three). The fast average then
 * falls faster, so it stays under; the quiet test may later switch the
 * keep to the fast average, which is lower, and the line goes out then.
 */
/** Gossip intervals without demand before a key's rate is said to decay (rateDecays). */
export const DECAY_QUIET_INTERVALS = 4

export function rateDecays (x: KeyExt, keep: number, nowMs: number, quietMs: number): boolean {
  return x.demand === 0 && x.rate > 0 && nowMs - x.lastDemandAt >= quietMs && keep === x.rate
}

export function ext (ks: KeyState): KeyExt {
  let x = ks.ext as KeyExt | null
  if (x === null) ks.ext = x = new KeyExt()
  return x
}

/** Move deferred credits that are due (by calendar time `calMs`) into the bucket. Returns whether any were. */
export function applyDeferred (ks: KeyState, x: KeyExt, calMs: number): boolean {
  const d = x.deferred
  if (d === null) return false
  let moved = false
  let kept = 0
  for (const item of d) {
    if (item[1] <= calMs) { ks.bucket.credit(item[0]); moved = true } else d[kept++] = item
  }
  d.length = kept
  if (kept === 0) x.deferred = null
  return moved
}

/** A key's books: held + outstanding + deferred − burn owed (only transfers, rule changes and reclaims move them). */
export function booksOf (ks: KeyState): number {
  const x = ks.ext as KeyExt | null
  return ks.bucket.share + (x === null ? 0 : deferredTotal(x) - x.burn)
}

export function deferredTotal (x: KeyExt): number {
  let n = 0
  for (const [a] of x.deferred ?? []) n += a
  return n
}

/** Whether the rule's windows are calendar-aligned (so tokens carry a window tag). */
export function windowed (algorithm: string): boolean {
  return algorithm === 'fixed-window' || algorithm === 'sliding-window'
}

/** The start of the calendar window holding calendar time `calMs`. */
export function windowStart (calMs: number, perMs: number): number {
  return Math.floor(calMs / perMs) * perMs
}

/** Update the EWMA with the demand seen over the last `dtMs`. */
export function updateRate (x: KeyExt, dtMs: number, halfLifeMs: number, fastHalfLifeMs: number): void {
  if (dtMs <= 0) return
  const inst = x.demand * 1000 / dtMs
  x.rate += (1 - Math.pow(2, -dtMs / halfLifeMs)) * (inst - x.rate)
  x.fastRate += (1 - Math.pow(2, -dtMs / fastHalfLifeMs)) * (inst - x.fastRate)
  if (x.rate < 1e-3) x.rate = 0
  if (x.fastRate < 1e-3) x.fastRate = 0
  x.demand = 0
}

/**
 * The fast average's noise: demand arrives in whole requests, so over its
 * short memory (a half-life of two ticks, 100 ms by default) a steady
 * Poisson demand of `r` per second reads with a variance of about
 * `r × ln 2 / (2 × half-life)`, 3.5 r at 100 ms. At 6 requests per second
 * that is a standard deviation of 4.6/s: one request in a tick reads as
 * 20/s, none for 150 ms (42% of the time) as 0.
 */
const FAST_VARIANCE = Math.LN2 / (2 * 0.1)
/** How many standard deviations of that noise a change of rate must exceed to count. */
const NOISE_Z = 2
/** A node with no demand for this many of its mean gaps between requests has gone quiet (e^-3: 5% by chance). */
const QUIET_GAPS = 3

/**
 * What a node expects to need: the higher of the two rates, so a surge is
 * asked for at once, but the fast one only for what it reads above its
 * noise. Reading it raw, every node under an even load of 6 requests per
 * second asked for up to three times its rate right after a request, and
 * kept as much as a donor: at 200 nodes the tokens sat at whoever had just
 * been busy, and the cluster admitted 87% of an exact limiter against a
 * static split's 91%. A hot spot's surge (hundreds per second) reads far
 * above its noise, so it is followed as fast as before.
 */
export function needRate (x: KeyExt): number {
  return Math.max(x.rate, x.fastRate - NOISE_Z * Math.sqrt(FAST_VARIANCE * x.fastRate))
}

/**
 * What a donor keeps for itself. While it is busy, what it would ask for
 * (`needRate`): a node that keeps less than it needs gives tokens away and
 * asks for them back a moment later (the simulator showed busy nodes
 * trading tokens back and forth several times a second). Once its demand
 * has clearly dropped, only the fast average, so a node that went quiet
 * gives at once. Clearly: the fast average under half the slow one by more
 * than its noise at the slow rate, or no demand at all for `QUIET_GAPS`
 * mean gaps. Under half alone, a node at 6 requests per second "dropped"
 * whenever 150 ms passed without one, gave all it held and asked again
 * (uniform load at 200 nodes: 88% with the noise-aware need alone, 91%
 * with this too). A hot spot that moved on drops by hundreds per second at
 * once; its slow average's long tail is caught by the quiet test.
 */
export function keepRate (x: KeyExt, nowMs: number): number {
  const dropped = x.fastRate < x.rate / 2 &&
    (x.fastRate + NOISE_Z * Math.sqrt(FAST_VARIANCE * x.rate) < x.rate / 2 || nowMs - x.lastDemandAt > QUIET_GAPS * 1000 / x.rate)
  return dropped ? x.fastRate : needRate(x)
}

/** Destroy owed tokens from what is held now (see `burn`). Returns how many were destroyed. */
export function burnDue (ks: KeyState, x: KeyExt, nowMs: number): number {
  if (x.burn <= 0) return 0
  ks.bucket.advance(nowMs)
  const n = ks.bucket.debit(Math.min(x.burn, Math.max(0, ks.bucket.held)))
  x.burn -= n
  if (x.burn < 1e-9) x.burn = 0
  return n
}

/**
 * How far ahead a node plans, in ms: the tuning horizon, but for a calendar
 * window never past the window's end (its spent tokens come back then, and
 * tokens kept beyond it would only be wasted at the boundary).
 */
export function horizon (ks: KeyState, horizonMs: number, nowMs: number, calendar: CalendarView): number {
  const rule = ks.rule.config
  if (!windowed(rule.algorithm)) return horizonMs
  const cal = calendar.at(nowMs)
  return Math.max(1, Math.min(horizonMs, windowStart(cal, rule.perMs) + rule.perMs - cal))
}
