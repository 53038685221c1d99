/**
 * The lease settings of the `cluster` section (cluster-protocol.md, "Leases and fencing", "Configuration"):
 * their defaults, and the combinations `check-config` (and every start)
 * refuses because they are unsafe together.
 *
 * The one rule safety rests on is `reclaimMs > leaseMs + maxClockSkewMs`: a
 * node that lost its lease has stopped spending (within the skew) before any
 * voter may give up on it. The other refusals keep a cluster usable: a lease
 * shorter than four gossip intervals fences a node after a few lost echoes,
 * and a skew below what clock drift alone adds over a lease and a reclaim is
 * no bound at all.
 *
 * Defaults follow the gossip interval when it is long (a 3 s lease with a
 * 1 s gossip would fence on every lost message): leaseMs is the larger of
 * 3000 and 12 gossip intervals; maxClockSkewMs the larger of 500 and 0.3% of
 * the lease; reclaimMs the larger of 5000 and leaseMs + maxClockSkewMs +
 * 1500. At the shipped 250 ms gossip they are exactly 3000, 500 and 5000.
 */
import type { ConfigIssue } from '../errors.js'

export interface LeaseSettings {
  /** T_lease: a node spends `hard` tokens only while a quorum of voters echoed a gossip of its own younger than this. */
  leaseMs: number
  /** T_reclaim: how long a voter waits, from its last echo of a node, before it may give up on it. */
  reclaimMs: number
  /** δ: bounds clock drift over a lease and a reclaim, plus the longest pause between a lease check and its effect. */
  maxClockSkewMs: number
  /** Leases on (the default) or off (no fencing: the behaviour before leases). */
  leases: boolean
  /**
   * How many seeds vote (quorum.ts `voterSet`): the first this many in name
   * order. Every voter echoes every node three times a lease, and every node
   * receives every gossip, so echoes grow with voters x nodes: at 200 seeds
   * that all voted they were 40% of every gossip. @default 15
   */
  voters: number
}

export const DEFAULT_LEASE_MS = 3000
/** Seeds that vote, at most: 15 tolerate the loss of 7 of them, and at 200 nodes echo 13 times less than 200 voters. */
export const DEFAULT_VOTERS = 15
export const DEFAULT_RECLAIM_MS = 5000
export const DEFAULT_MAX_CLOCK_SKEW_MS = 500
/** The least skew anyone may claim: event-loop stalls and GC pauses alone reach tens of ms. */
export const MIN_CLOCK_SKEW_MS = 50
/** Two monotonic clocks drifting 500 ppm each apart: 0.1% of any interval. */
export const DRIFT = 0.001

/** How long a peer stays alive without gossip (tuning.ts's aliveTimeoutMs, from the gossip interval). */
export function aliveTimeoutFor (gossipIntervalMs: number): number {
  return Math.max(1000, 4 * gossipIntervalMs)
}

/** The settings with defaults filled in for the fields not given. */
export function leaseSettings (gossipIntervalMs: number, given: Partial<LeaseSettings> = {}): LeaseSettings {
  const leaseMs = given.leaseMs ?? Math.max(DEFAULT_LEASE_MS, 12 * gossipIntervalMs)
  const maxClockSkewMs = given.maxClockSkewMs ?? Math.max(DEFAULT_MAX_CLOCK_SKEW_MS, Math.ceil(0.003 * leaseMs))
  const reclaimMs = given.reclaimMs ?? Math.max(DEFAULT_RECLAIM_MS, leaseMs + maxClockSkewMs + 1500, aliveTimeoutFor(gossipIntervalMs))
  return { leaseMs, reclaimMs, maxClockSkewMs, leases: given.leases ?? true, voters: given.voters ?? DEFAULT_VOTERS }
}

/** Why these settings are unsafe or unusable together, one issue per field (empty: fine). */
export function leaseIssues (s: LeaseSettings, gossipIntervalMs: number): ConfigIssue[] {
  const out: ConfigIssue[] = []
  if (s.leaseMs < 4 * gossipIntervalMs) {
    out.push({ path: 'cluster.leaseMs', message: `must be at least 4 x gossipIntervalMs (${4 * gossipIntervalMs}): a few lost gossips would fence a node, got ${s.leaseMs}` })
  }
  const alive = aliveTimeoutFor(gossipIntervalMs)
  if (s.reclaimMs <= s.leaseMs + s.maxClockSkewMs) {
    out.push({
      path: 'cluster.reclaimMs',
      message: `must be more than leaseMs + maxClockSkewMs (${s.leaseMs} + ${s.maxClockSkewMs} = ${s.leaseMs + s.maxClockSkewMs}): ` +
        `a node must have stopped spending before its tokens may be reclaimed, got ${s.reclaimMs}`
    })
  } else if (s.reclaimMs < alive) {
    out.push({ path: 'cluster.reclaimMs', message: `must be at least the peer alive timeout (${alive} ms at this gossip interval), got ${s.reclaimMs}` })
  }
  const drift = Math.ceil(DRIFT * (s.reclaimMs + s.leaseMs))
  if (s.maxClockSkewMs < MIN_CLOCK_SKEW_MS) {
    out.push({ path: 'cluster.maxClockSkewMs', message: `must be at least ${MIN_CLOCK_SKEW_MS} (pauses of the process alone reach that), got ${s.maxClockSkewMs}` })
  } else if (s.maxClockSkewMs < drift) {
    out.push({ path: 'cluster.maxClockSkewMs', message: `must be at least 0.1% of reclaimMs + leaseMs (${drift}: clock drift alone over those), got ${s.maxClockSkewMs}` })
  }
  return out
}
