/**
 * The fence: whether this node holds a lease (lease.ts) at each moment it
 * decides, and what changes when that flips. Pure; owned by the core.
 *
 * Fenced (leases on, no lease), a node
 * - spends nothing of a `hard` rule: caution.ts makes every hard key's
 *   reserve Infinity, and the reserves of the active keys are recomputed at
 *   the transition (the others are before their next spend: acquire, peek
 *   and the limiter's waiter service all refresh first);
 * - gives nothing: wants are answered `none`, and no push (return home,
 *   handoff) is made; grants already debited are still resent;
 * - still applies grants, pays burns and gossips, with `fenced: true`;
 * - for `soft` rules, follows `onPartition` as an isolated node does, and
 *   counts everything it admits as overdraft.
 *
 * The check is made where a decision is taken, on the `nowMs` of that
 * decision; what happens between the check and the effect (a pause) is
 * what `maxClockSkewMs` bounds (cluster-protocol.md, "Invariants", I4).
 *
 * A node is fenced too while its calendar is skewed: a quorum of voters is
 * heard, but fewer than a quorum (this node counted, if a voter) read
 * within `maxClockSkewMs` of its calendar (`judgeSkew`). Its windows would
 * open and close at other real times than the cluster's, and its spent
 * tokens come back early: a node 10 s ahead admitted 600 in a real 20 s
 * window of a 300 per 20 s rule. Each voter's offset is known as bounds:
 * at least the largest of its recent readings (peers.ts: a message's delay
 * only lowers one), at most a reading plus the time since the voter applied
 * a gossip of ours it echoed (intake.ts). A voter disagrees only when the
 * whole interval is more than maxClockSkewMs off: a starved or slow network
 * widens the bounds and never makes a node look skewed (on a loaded machine
 * every node read the others over 500 ms "behind" from delay alone, and all
 * five fenced themselves: chaos seed 2). A voter that surely disagrees lends
 * no lease either (lease.ts `exclude`): otherwise the voters that lease a
 * node and the voters that might agree with it could be two sets that
 * together make it look fine (one voter's echoes never came, the others
 * disagreed: skew-procs under a busy core).
 *
 * A calendar can be off while the wall clock is right: a process started
 * while its wall clock was wrong reads the wrong time into its calendar,
 * and when the clock is set right the calendar follows it only at a safe
 * slew (calendar.ts: 10% back, 500 ppm forward), which takes from minutes
 * to hours. Such a node would stay fenced all that time (or, a voter whose
 * weight is a quorum with any one other, fence the others: two seeds). So
 * when a node's calendar has been more than maxClockSkewMs off its own wall
 * clock for `leaseMs`, and a quorum of voters, one other at least, reads
 * within maxClockSkewMs / 2 of that wall clock, the fence asks for a new
 * incarnation in-process (`realign`): the driver stops the cluster
 * layer cleanly and starts it again from its disk (daemon.ts renew), whose
 * calendar reads the wall clock. The clean stop saves spent tokens' return
 * times moved by the calendar's lag (persist.ts), so none returns early.
 */
import type { KeyState } from '../core/limiter.js'
import { updateReserve, type CautionInput } from './caution.js'
import { ext } from './key-ext.js'
import { EchoSchedule, Lease } from './lease.js'
import { voterSet } from '../core/share.js'
import { Quorum } from './quorum.js'
import type { ClusterTuning } from './tuning.js'

export type FenceChange = 'fenced' | 'unfenced'

/** A voter's clock offset (its calendar minus this node's), ms: [at least, at most]. */
export type OffsetBounds = readonly [lo: number, hi: number]

export class Fence {
  readonly quorum: Quorum
  readonly lease: Lease
  /** A voter's echoes of its peers (null: not a voter). */
  readonly echoes: EchoSchedule | null
  /** As of the last check. */
  fenced: boolean
  /** Since when (monotonic) this node has been fenced; null while it holds its lease. */
  since: number | null
  /** Times it was fenced since start (the first, at start, included). */
  count = 0
  /**
   * Fenced for its calendar: a quorum of voters reads it as off by more than
   * maxClockSkewMs (judgeSkew), or the lease would hold but for the echoes of
   * voters that surely disagree (as of the last check).
   */
  skewed = false
  /** A quorum of voters is heard and fewer than a quorum might agree (judgeSkew). */
  private judgedSkewed = false
  /** The median offset of the voters heard (their calendar minus this one's), ms; 0 when none. */
  skewOffsetMs = 0
  /** Since when (monotonic) the calendar has been off a wall clock that a quorum agrees with; null while not. */
  private offSince: number | null = null
  /** The calendar has been off for leaseMs from a wall clock a quorum agrees with: a new incarnation realigns it (see the header). */
  realign = false

  /** `startLease`: a seed's first start, which holds a lease for leaseMs from `startMs` (lease.ts). */
  constructor (node: string, seeds: readonly string[], tuning: ClusterTuning, startMs: number, startLease = false) {
    this.quorum = new Quorum(voterSet(seeds, tuning.voters))
    const graceUntil = startLease ? startMs + tuning.leaseMs : -Infinity
    this.lease = new Lease({ me: node, quorum: this.quorum, leaseMs: tuning.leaseMs, enabled: tuning.leases, graceUntil })
    this.echoes = this.quorum.isVoter(node) ? new EchoSchedule(tuning.leaseMs, tuning.gossipIntervalMs) : null
    this.fenced = !this.lease.valid(startMs)
    this.since = this.fenced ? startMs : null
    if (this.fenced) this.count++
  }

  /**
   * Fenced at `nowMs`? Keeps `caution.fenced` current; at a change, the
   * reserves of `active` keys are recomputed at once (the others are before
   * their next spend).
   */
  at (nowMs: number, caution: CautionInput, active: Iterable<KeyState>): boolean {
    if (this.check(nowMs) === null && caution.fenced === this.fenced) return this.fenced
    caution.fenced = this.fenced
    for (const ks of active) {
      ext(ks).reserveAt = -Infinity
      updateReserve(caution, ks, nowMs)
    }
    return this.fenced
  }

  /**
   * Judge this node's calendar against the voters': `offsets`, each heard
   * voter's but this node's (their calendar minus this one's). Skewed when a
   * quorum is heard and fewer than a quorum agree within `maxSkewMs`. With
   * leases off, never (nothing is fenced then).
   */
  judgeSkew (me: string, offsets: ReadonlyMap<string, OffsetBounds>, maxSkewMs: number, nowMs: number, wallGapMs: number): void {
    const judged = this.lease.enabled && this.heardQuorum(me, offsets)
    this.judgedSkewed = judged && !this.agreeing(me, offsets, 0, maxSkewMs, false)
    // The voters that surely disagree lend no lease, heard a quorum or not (lease.ts `excluded`); one that reads
    // off with no echo yet to bound its offset voids the start lease (a one-way reading only bounds it below).
    const off = new Set<string>()
    let doubt = false
    for (const [n, [lo, hi]] of offsets) {
      if (lo > maxSkewMs || hi < -maxSkewMs) off.add(n)
      else if (hi === Infinity && lo < -maxSkewMs) doubt = true
    }
    this.lease.exclude(off, doubt)
    const sorted = [...offsets.values()].map(b => b[0]).sort((a, b) => a - b)
    this.skewOffsetMs = sorted.length === 0 ? 0 : sorted[Math.floor(sorted.length / 2)]
    // Offsets to this node's wall clock: (voter's calendar - this calendar) - (this wall - this calendar).
    const wallOff = judged && Math.abs(wallGapMs) > maxSkewMs && offsets.size > 0 && this.agreeing(me, offsets, wallGapMs, maxSkewMs / 2, true)
    if (!wallOff) this.offSince = null
    else if (this.offSince === null) this.offSince = nowMs
    this.realign = wallOff && nowMs - (this.offSince ?? nowMs) >= this.lease.leaseMs
  }

  private heardQuorum (me: string, offsets: ReadonlyMap<string, OffsetBounds>): boolean {
    const heard = [...offsets.keys()]
    if (this.quorum.isVoter(me)) heard.push(me)
    return this.quorum.isQuorum(heard)
  }

  /**
   * Whether a quorum of voters (this node counted, if a voter) reads within `maxMs` of this node's calendar moved
   * by `shiftMs`: `surely`, their whole offset interval; otherwise some part of it (not surely off).
   */
  private agreeing (me: string, offsets: ReadonlyMap<string, OffsetBounds>, shiftMs: number, maxMs: number, surely: boolean): boolean {
    const agree: string[] = []
    for (const [n, [lo, hi]] of offsets) {
      const ok = surely ? lo - shiftMs >= -maxMs && hi - shiftMs <= maxMs : lo - shiftMs <= maxMs && hi - shiftMs >= -maxMs
      if (ok) agree.push(n)
    }
    if (this.quorum.isVoter(me)) agree.push(me)
    return this.quorum.isQuorum(agree)
  }

  /** Bring the state to `nowMs`; returns the change, if any. */
  check (nowMs: number): FenceChange | null {
    this.skewed = this.judgedSkewed || this.lease.heldByExcluded(nowMs)
    const fenced = !this.lease.valid(nowMs) || this.skewed
    if (fenced === this.fenced) return null
    this.fenced = fenced
    if (fenced) {
      // It lapsed when the last quorum's echo got too old, which may be before this check.
      const lapsed = this.lease.validUntil
      this.since = Number.isFinite(lapsed) && lapsed < nowMs ? lapsed : nowMs
      this.count++
      return 'fenced'
    }
    this.since = null
    return 'unfenced'
  }

  /** For status: the lease as of `nowMs`. */
  status (nowMs: number): Record<string, unknown> {
    return {
      enabled: this.lease.enabled,
      valid: this.lease.valid(nowMs),
      fencedForMs: this.since === null ? 0 : Math.round(nowMs - this.since),
      leaseMs: this.lease.leaseMs,
      validForMs: this.lease.enabled ? Math.max(0, Math.round(Math.min(this.lease.validUntil, 1e15) - nowMs)) : null,
      voters: [...this.quorum.voters],
      echoAgeMs: this.lease.echoAges(nowMs),
      fences: this.count,
      skewed: this.skewed,
      skewOffsetMs: Math.round(this.skewOffsetMs)
    }
  }
}
