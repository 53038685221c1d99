/** The cluster's tunables, with defaults. All durations in ms, measured on the monotonic clock. */
import { leaseSettings, type LeaseSettings } from '../config/lease-options.js'

export interface ClusterTuning extends LeaseSettings {
  /** Gossip publish interval. @default 250 (the cluster file's gossipIntervalMs) */
  gossipIntervalMs: number
  /** How often the state machine ticks (rates, rebalancing, retransmits). @default 50 */
  tickMs: number
  /** A peer is alive while its last gossip is younger than this. @default max(1000, 4 x gossip) */
  aliveTimeoutMs: number
  /**
   * How often a member that needs no lease gossips (member-gossip.ts
   * `needsLease`: it decides no rule itself and holds nothing), instead of
   * every `gossipIntervalMs`: its gossip only says that it lives, and the
   * seeds hear every member's. Peers read such a member alive for 4 times
   * this after its last gossip. It gossips at the usual interval again as
   * soon as it needs a lease. Also the pace of a seed's members' copies
   * that say nothing new to them (member-copies.ts). @default aliveTimeoutMs
   */
  quietGossipMs: number
  /** A node asks for tokens when it would run out within this horizon at its rate. @default 1000 */
  horizonMs: number
  /** Half-life of the demand-rate EWMA. @default 500 */
  rateHalfLifeMs: number
  /** Tightening starts when the cluster-wide remaining is below this fraction of the stock. @default 0.2 */
  lowWater: number
  /** While tight, donors give at most this fraction of their surplus per request. @default 0.25 */
  tightenFraction: number
  /** A want with no answer may be retried (at another donor) after this. @default 1000 */
  wantTimeoutMs: number
  /** A node asks for a key's tokens at most once per this (so want traffic grows with keys, not requests). @default min(100, gossip interval) */
  wantGapMs: number
  /**
   * Most donors asked at once for one key (rebalance.ts): a node short of
   * tokens asks the peers with the largest surplus together, as many as it
   * takes to cover its deficit. At 200 nodes a share is 5 of 1000 tokens,
   * and one donor at a time, one per tick, took seconds to gather a hot
   * spot's tokens. @default 32
   */
  maxWantFanout: number
  /** Unacked grants are resent after this. @default 1000 */
  retransmitMs: number
  /** A glob key idle this long at a node that is not its home goes back home. @default 10000 */
  idleReturnMs: number
  /** Most keys per gossip message; the rest spills into the next. @default 512 */
  maxGossipKeys: number
  /** Every this many gossips, every active key is re-announced (anti-entropy). @default 20 */
  fullSyncEvery: number
  /** A peer that announced it was leaving, silent this long, is forgotten (its owed burns are kept). @default 60000 */
  forgetAfterMs: number
  /** How long a stopping node waits for its handoff grants to be acked. @default 3000 */
  handoffTimeoutMs: number
  /**
   * A request with no `waitMs` for a key this node has never held (a glob key
   * homed elsewhere, or any key at a member that joined with nothing) waits
   * up to this long for a want's grant, instead of a denial while tokens are
   * reachable. 0 turns it off. @default 100
   */
  firstUseWaitMs: number
  /**
   * How long a member waits for a seed's answer to a forwarded acquire (a
   * `decide: "seeds"` rule, forward.ts) before it answers denied; a request's
   * own longer `waitMs` extends it. @default 500
   */
  forwardTimeoutMs: number
  /**
   * A member sends an acquire of a rule it decides itself to a seed that
   * holds enough when it holds too few tokens for it (forward-overflow.ts),
   * and returns a token it expects not to use under contention
   * (rebalance.ts RETURN_ROUND). Off: such an acquire is denied at the
   * member, and it returns whole surplus tokens only (the simulator's
   * comparison). @default true
   */
  overflow: boolean
  /**
   * A seed that holds a share sends its books journal to the other seeds,
   * and a grant it gives leaves only once the give is durable at a quorum of
   * seeds (replication.ts): what a heir reads if the seed dies for good.
   * Needs leases. Off: a grant waits for this node's disk only. @default true
   */
  replicateJournal: boolean
  /**
   * Seeds with a share are attested like members and inherited by their
   * heir (heir.ts, reclaim.ts settleSeed). Needs leases, more than one seed
   * and replicateJournal. The cluster file's `cluster.inheritSeeds`. @default true
   */
  inheritSeeds: boolean
}

export function defaultTuning (gossipIntervalMs = 250): ClusterTuning {
  return {
    gossipIntervalMs,
    tickMs: Math.min(50, gossipIntervalMs),
    aliveTimeoutMs: Math.max(1000, 4 * gossipIntervalMs),
    quietGossipMs: Math.max(1000, 4 * gossipIntervalMs),
    horizonMs: 1000,
    rateHalfLifeMs: 500,
    lowWater: 0.2,
    tightenFraction: 0.25,
    wantTimeoutMs: 1000,
    wantGapMs: Math.min(100, gossipIntervalMs),
    maxWantFanout: 32,
    retransmitMs: 1000,
    idleReturnMs: 10_000,
    maxGossipKeys: 512,
    fullSyncEvery: 20,
    forgetAfterMs: 60_000,
    handoffTimeoutMs: 3000,
    replicateJournal: true,
    inheritSeeds: true,
    forwardTimeoutMs: 500,
    overflow: true,
    firstUseWaitMs: 100,
    // leases, leaseMs, reclaimMs, maxClockSkewMs: the cluster file's (config/lease-options.ts)
    ...leaseSettings(gossipIntervalMs)
  }
}
