/**
 * The cluster state machine. Pure: it handles events (a local acquire, a
 * tick, a gossip, a want, a grant, a reply or a failed request, a rule
 * change, a stop) with monotonic `nowMs` passed in, and returns the messages
 * to send. It does no I/O and reads no clock; the daemon's driver carries its
 * messages over libp2p, and the simulator over a virtual network. Both run
 * this same code, stop and rule changes included.
 *
 * Safety (hard mode never admits more than the exact limiter): a node admits
 * only by spending tokens its own bucket holds (Limiter.acquireOn), never
 * into its reserve (caution.ts). Tokens leave a bucket only by `debit` into a
 * grant or a burn, and enter only by a grant the Ledger accepts exactly once,
 * or by a rule change raising this node's share. So the sum over buckets,
 * grants in flight and deferred credits never exceeds the stock plus the
 * burns still owed, and no node spends into what is owed.
 */
import type { RuleConfig } from '../config/types.js'
import { Calendar } from '../core/calendar.js'
import { Limiter, type KeyState, type Resolution, type Waiter } from '../core/limiter.js'
import { seedOrder } from '../core/share.js'
import type { Decision } from '../core/types.js'
import { updateReserve, type CautionInput } from './caution.js'
import { agrees, ClusterView } from './cluster-view.js'
import { GossipSchedule } from './gossip-schedule.js'
import { applyDeferred, burnDue, ext, type KeyExt } from './key-ext.js'
import { Fence, type OffsetBounds } from './fence.js'
import { Ledger } from './ledger.js'
import { MemberSums } from './member-sums.js'
import { StopMachine, type Phase } from './lifecycle.js'
import { admissionPolicy } from './local-policy.js'
import { CLUSTER_VERSION, type Ack, type Gossip, type Grant, type Hb, type None, type Want } from './messages.js'
import { Peers, type Peer } from './peers.js'
import { Positions } from './positions.js'
import { Membership, type Verdict } from './membership.js'
import { carryOver, stampOf, Transitions } from './rule-change.js'
import { saveState } from './persist.js'
import type { SavedState } from './durable-state.js'
import { Transfers } from './transfers.js'
import { TickBatch } from './tick-batch.js'
import { firstUseWaitMs } from './first-use.js'
import { Forwarding } from './forward.js'
import { tickKey } from './key-tick.js'
import { Reclaim } from './reclaim.js'
import { BooksJournal } from './journal.js'
import { gossipOut } from './member-gossip.js'
import { Recovery } from './recovery.js'
import { Heir } from './heir.js'
import { forgetDeparted, freeSilentSlots, journalAck, onAck, onGossip, onGrant, onJournalWrite, onReply, onRequestFailed, onWant } from './intake.js'
import { defaultTuning, type ClusterTuning } from './tuning.js'
import { JournalReplication, RELEASE_AFTER_INTERVALS } from './replication.js'
import { ReplicaStore, type ReplicaChange } from './replica-store.js'
import type { Jack, Jcopy, Jget, Jrep } from './replica-messages.js'

import type { ClusterCoreOptions, Outbound } from './core-options.js'
import { mayAsk } from './no-relay.js'
export type { ClusterCoreOptions, Outbound }

export class ClusterCore {
  readonly node: string
  readonly epoch: string
  readonly incarnation: number
  readonly carries: readonly string[]
  /** How many of `carries`, from the first, a quorum might still attest (core-options.ts). */
  readonly carriedAtRisk: number
  readonly cluster: string
  readonly clusterHash: string
  /** Which peer id may speak for which name (membership.ts). */
  readonly membership: Membership
  readonly limiter: Limiter
  readonly calendar: Calendar
  readonly ledger: Ledger
  readonly peers: Peers
  readonly tuning: ClusterTuning
  /** Where tokens are and should go, as this node sees the cluster. */
  readonly view: ClusterView
  readonly transitions = new Transitions()
  /** Net tokens taken from each other account by transfer, per key (positions.ts): what a reclaim counts. */
  readonly positions = new Positions()
  readonly seeds: string[]
  /** Changes of this node's books, made durable by the driver before any grant leaves (journal.ts). */
  readonly journal = new BooksJournal()
  /** A seed with a share: its journal, made durable at a quorum of seeds before a grant leaves (replication.ts). */
  readonly replication: JournalReplication
  /** A seed: its copies of the other seeds' journals (replica-store.ts). */
  readonly replicas: ReplicaStore | null
  /** Set when this start recovered a crashed predecessor's books (recovery.ts). */
  readonly recovery: Recovery | null
  /** Keys with something to do on ticks (rate decay, wants, deferred, burns, debt, gossip). */
  readonly active = new Set<KeyState>()
  /** Serving wants, crediting grants, replies (transfers.ts); intake.ts routes messages to it. */
  readonly transfers: Transfers
  /** This tick's wants and pushes, one message per peer at the tick's end (tick-batch.ts). */
  readonly batch = new TickBatch()
  private readonly stopper: StopMachine
  /** What reserves are computed from (caution.ts; key-tick.ts reads it too). */
  readonly caution: CautionInput
  /** The lease and whether this node is fenced (fence.ts, lease.ts). */
  readonly fence: Fence
  /** Attestations, settlements of dead accounts without a share, and the no-relay cap (reclaim.ts). */
  readonly reclaim: Reclaim
  /** A seed: inherits the seeds that die for good after it in name order (heir.ts). */
  readonly heir: Heir
  readonly gossip: GossipSchedule
  /** A seed sums the members' lines for them; a member reads those sums (member-sums.ts). */
  readonly msums: MemberSums
  private lastTick = -Infinity
  private lastHousekeeping = -Infinity
  /** Requests sent and not yet answered or failed (stop waits for them). */
  inflight = 0
  /** What the stop saved; set in the step that ends the stop. */
  snapshot: SavedState | null = null
  /** Counters for status and metrics. */
  /** Members' acquires decided at a seed (forward.ts). */
  readonly forwarding = new Forwarding(this)
  readonly counters = { badMessages: 0, wantsSent: 0, wantsServed: 0, grantsApplied: 0, grantsRejected: 0, tokensIn: 0, tokensOut: 0, tokensBurned: 0, handedOff: 0, grantsRefused: 0, tokensRefused: 0, handoffsFenced: 0, acksIn: 0 }
  /** Why the last grant was refused (status). */
  lastRefusal: string | null = null
  /** Per key: tokens in grants this node refused, and tokens of its own refused pushes it took back (the audit reads them). */
  readonly refusedTokens = new Map<string, number>()
  readonly takenBackTokens = new Map<string, number>()

  constructor (opts: ClusterCoreOptions) {
    this.node = opts.node
    this.epoch = opts.epoch
    this.incarnation = opts.incarnation ?? 1
    this.carries = opts.carries ?? []
    this.carriedAtRisk = Math.min(this.carries.length, opts.carriedAtRisk ?? this.carries.length)
    this.cluster = opts.cluster ?? ''
    this.clusterHash = opts.clusterHash ?? ''
    this.seeds = seedOrder(opts.seeds)
    this.membership = new Membership({
      me: opts.node,
      listed: opts.listed ?? new Map(this.seeds.map(n => [n, undefined])),
      seeds: this.seeds,
      maxMembers: opts.maxMembers ?? 256,
      ...(opts.maxMembersPerHost === undefined ? {} : { maxMembersPerHost: opts.maxMembersPerHost })
    })
    this.tuning = { ...defaultTuning(opts.tuning?.gossipIntervalMs), ...opts.tuning }
    this.calendar = new Calendar(opts.wallMs, opts.monoMs, opts.wallResolutionMs)
    this.recovery = opts.recovered === true ? new Recovery(this.calendar.at(opts.monoMs), this.tuning.maxClockSkewMs) : null
    this.ledger = new Ledger(opts.node, opts.epoch, this.incarnation)
    this.peers = new Peers(this.tuning.aliveTimeoutMs, {
      cfg: this.clusterHash,
      known: k => this.limiter.existing(k) !== undefined,
      maxKeys: opts.limits.maxKeys,
      seeds: new Set(this.seeds)
    }, 4 * this.tuning.quietGossipMs)
    this.view = new ClusterView(this.node, this.seeds, this.peers, this.tuning, this.calendar)
    this.heir = new Heir(this, opts.inherited ?? [], opts.estates ?? [])
    this.view.homes = this.heir.homes
    this.msums = new MemberSums(this)
    // A member gives only what it holds of the asker's tokens (reclaim.ts): ask it only when it owes us some.
    this.view.mayAsk = (p, key) => mayAsk(this, p, key)
    this.peers.onLine = (key, p, old, line, nowMs) => {
      const ks = this.limiter.existing(key)
      if (ks !== undefined) this.view.lineChanged(ks, p, old, line, nowMs)
    }
    this.stopper = new StopMachine(this.tuning)
    // A seed's first start (it allocates and carries nothing) holds a start lease (lease.ts).
    this.fence = new Fence(this.node, this.seeds, this.tuning, opts.monoMs, opts.allocate && this.carries.length === 0 && this.seeds.includes(this.node))
    this.reclaim = new Reclaim(this, opts.monoMs)
    this.replication = JournalReplication.forNode(this.node, this.epoch, this.incarnation, this.seeds, opts.allocate, this.tuning)
    this.replicas = this.seeds.includes(this.node) ? new ReplicaStore(opts.replicas, opts.superseded) : null
    this.caution = { node: this.node, seeds: this.seeds, peers: this.peers, transitions: this.transitions, refreshMs: this.tuning.gossipIntervalMs / 2, now: 0, fenced: true, homes: this.heir.homes }
    this.limiter = new Limiter({
      node: opts.node,
      seeds: this.seeds,
      homes: this.heir.homes,
      rules: opts.rules,
      limits: opts.limits,
      allocate: opts.allocate,
      calendar: this.calendar,
      canEvict: (ks) => this.canEvict(ks),
      // Waiters are served on the limiter's own timer: the lease may have lapsed since the key was last used.
      beforeServe: (ks, nowMs) => { this.fenced(nowMs); updateReserve(this.caution, ks, nowMs) },
      onCreate: (ks, nowMs) => {
        const cal = this.calendar.at(nowMs)
        if (this.recovery?.materialized(ks, cal) === true || this.heir.materialized(ks, cal)) this.active.add(ks)
      },
      onRuleChange: (ks, next, nowMs) => {
        const before = ks.rule
        carryOver(ks, next, this.node, this.seeds, this.limiter.allocate, nowMs, this.calendar, this.heir.homes)
        if (ext(ks).burn > 0) this.active.add(ks)
        this.transitions.changed(stampOf(before), next)
        this.active.add(ks)
      }
    })
    this.transfers = new Transfers(this)
    this.gossip = new GossipSchedule(this, this.limiter.rules.map(r => r.name))
  }

  /** Materialize the exact-key rules' shares at start, so peers learn of them from the first gossip. */
  init (nowMs: number): void {
    for (const r of this.limiter.rules) {
      if (!r.glob) this.touch(this.limiter.keyState(r.config.match, 1, nowMs))
    }
  }

  get phase (): Phase { return this.stopper.phase }
  get leaving (): boolean { return this.stopper.phase !== 'running' }

  /**
   * The wall clock, as the driver read it (with `monoMs`): the calendar
   * follows it within safe bounds (calendar.ts), unless it is more than
   * maxClockSkewMs / 2 off the median of the wall clocks of this node and
   * of the voters heard, once those are a quorum. A voter's wall clock is
   * placed on this calendar by its offset (the middle of its bounds, used
   * only when they are within maxClockSkewMs) plus its `wg`. Then the
   * calendar holds: it runs on the monotonic clock. So one node's wall clock
   * stepped back leaves its calendar on the cluster's time, where following
   * it slowed the calendar to 90% until the fence caught it: meanwhile its
   * windows ended up to maxClockSkewMs late, past the δ/2 the spec allows,
   * and a lowered window's tail was spent in the next true window (chaos 3+2
   * seed 20, sim clock-step-back-lower). A step that a quorum's wall clocks
   * share (an NTP correction everywhere) is followed as before. The median
   * only ever stops the calendar from following: steering toward it let
   * the offsets' noise (a midpoint may be off by half their bounds) move
   * calendars, and even 1 ms ahead moves a saturated window's first burst
   * into the true window before it (sim), 270 ms behind its tail into the
   * next (two of three seeds of chaos 3+2 seed 20, both steered).
   *
   * And a calendar that a quorum of voters' calendars are surely ahead of
   * (by their offsets' lower bounds, which a message's delay only lowers)
   * jumps forward to them, where the slew would take 500 ppm: a calendar
   * held behind ended its windows late for minutes (chaos 3+2 seed 20 after
   * this fix's first form: b, back from a 9 s step, held 250 ms behind, and
   * three windows later each saw a late tail). Never past them, so never
   * ahead of the cluster's time; the offsets move with it. Only within
   * maxClockSkewMs: a calendar further behind is a clock the spec calls
   * wrong, fenced and reported as skewed until its wall clock is set right
   * (fence.ts realign), as before.
   */
  observeWall (wallMs: number, monoMs: number): void {
    const offsets = this.voterOffsets(monoMs)
    this.calendar.sync(wallMs, monoMs, this.followsWall(wallMs, monoMs, offsets))
    const behind = this.surelyBehind(offsets)
    if (behind >= Math.max(5, this.tuning.maxClockSkewMs / 50) && behind <= this.tuning.maxClockSkewMs) {
      this.calendar.advance(behind)
      this.peers.shiftOffsets(-behind)
    }
  }

  /** How far a quorum of voters' calendars (this one's counted at 0, if a voter) are surely ahead of this one, ms; 0 if not. */
  private surelyBehind (offsets: ReadonlyMap<string, OffsetBounds>): number {
    const ahead: Array<[string, number]> = this.fence.quorum.isVoter(this.node) ? [[this.node, 0]] : []
    for (const [v, [lo]] of offsets) ahead.push([v, lo])
    ahead.sort((a, b) => b[1] - a[1])
    const names: string[] = []
    for (const [n, lo] of ahead) {
      names.push(n)
      if (this.fence.quorum.isQuorum(names)) return Math.max(0, lo)
    }
    return 0
  }

  /** This node's wall clock is more than maxClockSkewMs / 2 off a quorum's (or stepped back, no quorum placed yet), and the calendar does not follow it (observeWall): status and a log line say so. */
  wallClockOff = false
  /** The wall clock minus the calendar at the last observeWall (null before the first). */
  private lastWallGap: number | null = null
  /** The wall clock stepped back since a quorum last agreed with it: held until one does (observeWall). */
  private steppedBack = false

  /** Whether the calendar follows the wall clock now (else it holds: observeWall). */
  private followsWall (wallMs: number, monoMs: number, offsets: ReadonlyMap<string, OffsetBounds>): boolean {
    const own = wallMs - this.calendar.at(monoMs)
    const half = this.tuning.maxClockSkewMs / 2
    // A step back (the gap moves at most 10% of the time between two calls while the calendar follows): not followed
    // until a quorum's wall clocks agree with it, heard or not. Followed while the voters could not be placed (cut
    // off, or their offsets' bounds too wide), b of chaos 3+2 seed 20 fell 400 ms behind during a partition.
    if (this.lastWallGap !== null && own - this.lastWallGap < -half) this.steppedBack = true
    this.lastWallGap = own
    // This node's own wall clock is one of the clocks the median is taken over: with one other voter heard (its
    // offset bounded), that voter's word alone would steer this calendar (chaos 3+2 seed 20: a, just restarted,
    // heard only c, whose wall clock was 6 s back, and slowed its calendar to follow c's).
    const gaps: number[] = [own]
    const heard: string[] = [this.node]
    for (const [v, [lo, hi]] of offsets) {
      if (!Number.isFinite(hi) || hi - lo > this.tuning.maxClockSkewMs) continue
      gaps.push((lo + hi) / 2 + (this.peers.get(v)?.wallGapMs ?? 0))
      heard.push(v)
    }
    let agrees: boolean
    if (!this.fence.quorum.isQuorum(heard)) agrees = !this.steppedBack
    else {
      gaps.sort((a, b) => a - b)
      const mid = gaps.length >> 1
      // Of two middle values, the one nearer this calendar: the least move.
      const median = gaps.length % 2 === 1 || Math.abs(gaps[mid]) < Math.abs(gaps[mid - 1]) ? gaps[mid] : gaps[mid - 1]
      agrees = Math.abs(own - median) <= half
      if (agrees) this.steppedBack = false
    }
    this.wallClockOff = !agrees
    return agrees
  }

  // ---- local decisions -------------------------------------------------

  /** `demand`: count it in the key's demand here (not for a request another seed sent on: forward-pair.ts). */
  acquire (key: string, count: number, nowMs: number, demand = true): Decision {
    const ks = this.limiter.keyState(key, count, nowMs)
    const x = this.prepare(ks, demand ? count : 0, nowMs)
    const special = admissionPolicy(this, ks, x, count, nowMs)
    if (special !== undefined) return special
    const d = this.limiter.acquireOn(ks, count, nowMs)
    if (d.allowed && x.tight) x.pace -= count
    return d
  }

  acquireOrWait (key: string, count: number, waitMs: number, nowMs: number, ref: unknown): Decision | Waiter {
    const ks = this.limiter.keyState(key, count, nowMs)
    const x = this.prepare(ks, count, nowMs)
    const special = admissionPolicy(this, ks, x, count, nowMs)
    if (special !== undefined) return special
    // Tokens held elsewhere can come by transfer: wait for them, even when this node's own schedule can't deliver in time.
    const elsewhere = this.seeds.length > 1 && this.view.clusterRemaining(ks, nowMs) - ks.bucket.held >= count
    return this.limiter.acquireOrWait(key, count, waitMs, nowMs, ref, elsewhere)
  }

  /** How long a request without `waitMs` may wait for tokens of a key new here (first-use.ts; 0: answer now). */
  firstUseWaitMs (key: string, count: number, nowMs: number): number { return firstUseWaitMs(this, key, count, nowMs) }

  peek (key: string, count: number, nowMs: number): Decision {
    const ks = this.limiter.keyState(key, count, nowMs)
    applyDeferred(ks, ext(ks), this.calendar.at(nowMs))
    this.fenced(nowMs)
    updateReserve(this.caution, ks, nowMs)
    return this.limiter.peek(key, count, nowMs)
  }

  /** Replace the rules (SIGHUP, or a restart with a changed file): keys carry over (rule-change.ts). */
  setRules (rules: RuleConfig[], nowMs: number): Resolution[] {
    const before = new Map(this.limiter.rules.map(r => [r.name, r.hash]))
    const out = this.limiter.setRules(rules, nowMs)
    // The journal's checkpoint names the rules its deltas are relative to.
    this.journal.checkpointNeeded = true
    // A fresh pass announces every key under the new versions; until it ends they are pending.
    this.gossip.rulesChanged(this.limiter.rules.filter(r => before.get(r.name) !== r.hash).map(r => r.name))
    return out
  }

  /** A request for `count` of `key` this seed sent on to the key's other seed (forward-pair.ts): demand here all the same. */
  noteDemand (key: string, count: number, nowMs: number): void {
    const ks = this.limiter.existing(key)
    if (ks !== undefined) this.demanded(ks, ext(ks), count, nowMs)
  }

  /** `count` more demand for a key (none for 0), which is active here from now. */
  private demanded (ks: KeyState, x: KeyExt, count: number, nowMs: number): void {
    if (count > 0) {
      x.demand += count
      x.lastDemandAt = nowMs
    }
    this.active.add(ks)
  }

  private prepare (ks: KeyState, count: number, nowMs: number): KeyExt {
    const x = ext(ks)
    if (x.deferred !== null) applyDeferred(ks, x, this.calendar.at(nowMs))
    if (x.burn > 0) this.burn(ks, x, nowMs)
    this.fenced(nowMs)
    updateReserve(this.caution, ks, nowMs)
    this.demanded(ks, x, count, nowMs)
    return x
  }

  burn (ks: KeyState, x: KeyExt, nowMs: number): void {
    this.counters.tokensBurned += burnDue(ks, x, nowMs)
  }

  /** Whether this node is fenced at `nowMs` (no lease, leases on); a change recomputes the active keys' reserves (fence.ts). */
  fenced (nowMs: number): boolean {
    return this.fence.at(nowMs, this.caution, this.active)
  }

  /** No peer alive in a cluster that has others: the condition soft-mode policies apply to. */
  isolated (nowMs: number): boolean {
    if (this.seeds.length <= 1 && this.peers.size === 0) return false
    // Asked on every soft-mode decision: stop at the first alive peer, build no list.
    return !this.peers.anyAlive(nowMs)
  }

  // ---- ticks -------------------------------------------------------------

  tick (nowMs: number): Outbound[] {
    const out: Outbound[] = []
    if (this.phase === 'stopped') return out
    const dt = this.lastTick === -Infinity ? this.tuning.tickMs : nowMs - this.lastTick
    this.lastTick = nowMs
    const cal = this.calendar.at(nowMs)
    const isolated = this.isolated(nowMs)
    const running = this.phase === 'running'
    // Judged every tick (a few voters' offsets): a skewed node is fenced from the first quorum it hears.
    this.judgeSkew(nowMs)
    // A fenced node gives nothing (no return home) and asks for nothing: donors skip it.
    const fenced = this.fenced(nowMs)
    const frame = { nowMs, dt, cal, isolated, moving: running && !isolated && !fenced }
    for (const ks of this.active) if (tickKey(this, ks, frame)) this.active.delete(ks)
    this.batch.flush(this, out, nowMs)
    for (const g of this.ledger.due(nowMs, this.tuning.retransmitMs, to => this.receiverAlive(to, nowMs))) this.request(out, g.to, g)
    for (const g of this.reclaim.marks.probes(nowMs, this.tuning.retransmitMs)) this.request(out, g.to, g)
    for (const g of this.reclaim.returns.probes(nowMs, this.tuning.retransmitMs)) this.request(out, g.to, g)
    this.replication.expire(nowMs)
    for (const r of this.replication.outbound(nowMs, true)) out.push({ kind: 'replicate', to: r.to, msg: r.msg, z: r.z })
    for (const r of this.heir.update(nowMs)) out.push({ kind: 'jget', to: r.to, msg: r.msg })
    const g = this.gossip.due(nowMs)
    if (g !== null) {
      out.push(gossipOut(this, g, nowMs))
      // The marks that moved go to their givers alone, with the gossip's interval (gossip-schedule.ts directAcks).
      for (const [giver, toEpoch, applied] of this.gossip.directAcks(this.gossip.ackMarks())) {
        if (this.receiverAlive(giver, nowMs)) this.request(out, giver, { v: CLUSTER_VERSION, t: 'ack', node: this.node, epoch: this.epoch, inc: this.incarnation, applied, toEpoch })
      }
    }
    if (nowMs - this.lastHousekeeping >= this.tuning.gossipIntervalMs) {
      this.lastHousekeeping = nowMs
      this.transitions.settle(this.limiter.rules, this.seeds, this.node, n => this.peers.get(n))
      forgetDeparted(this, nowMs)
      this.reclaim.update(nowMs)
      if (this.seeds.includes(this.node)) freeSilentSlots(this, nowMs)
      this.replication.release(this.journal, nowMs, RELEASE_AFTER_INTERVALS * this.tuning.gossipIntervalMs)
    }
    if (!running) this.stopper.step(this, nowMs, out)
    return out
  }

  /**
   * The voters' clock offsets as now read, each a lower and an upper bound (peers.ts, intake.ts), judged by the fence
   * (fence.ts `judgeSkew`). A voter counts while its echoes may still lend a lease (heard within leaseMs), not only
   * while alive: a voter that reads us off lends no lease until then, though a starved process hears it late (sim
   * scenario skewed-node-deaf; skew-procs in CI spent 18 of 50 after it was judged skewed).
   */
  judgeSkew (nowMs: number): void {
    this.fence.judgeSkew(this.node, this.voterOffsets(nowMs), this.tuning.maxClockSkewMs, nowMs, this.calendar.wallGapMs)
  }

  /** Each other voter heard within leaseMs whose offset has a lower bound: [at least, at most] (at most Infinity: no echo yet). */
  private voterOffsets (nowMs: number): Map<string, OffsetBounds> {
    const offsets = new Map<string, OffsetBounds>()
    for (const v of this.fence.quorum.voters) {
      const p = v === this.node ? undefined : this.peers.get(v)
      if (p === undefined || nowMs - p.lastHeard > this.fence.lease.leaseMs) continue
      const lo = Math.max(p.offsetCur, p.offsetPrev)
      if (Number.isFinite(lo)) offsets.set(v, [lo, Math.max(lo, Math.min(p.offsetUpCur, p.offsetUpPrev))])
    }
    return offsets
  }

  /**
   * Why this incarnation must give way to a new one, started in-process from
   * its disk by the driver (daemon.ts `renew`, and the simulator the same),
   * or null: `reclaimed`, a quorum of seeds attested it dead (reclaim.ts);
   * `calendar`, its calendar is off from a quorum while its wall clock is
   * not (fence.ts, the header), and a start reads the wall clock again.
   */
  get renewal (): 'reclaimed' | 'calendar' | null {
    if (this.reclaim.reclaimed) return 'reclaimed'
    if (this.fence.realign && this.phase === 'running') return 'calendar'
    return null
  }

  /** Grants to a receiver not alive are resent less often (Ledger.due) and counted apart in status: they wait for reclaim. */
  receiverAlive (to: string, nowMs: number): boolean {
    const p = this.peers.get(to)
    return p !== undefined && this.peers.isAlive(p, nowMs)
  }

  /** Each known peer's current epoch (for the ack list). */
  currentEpochs (): Map<string, string> {
    const m = new Map<string, string>()
    for (const p of this.peers.all()) m.set(p.name, p.epoch)
    return m
  }

  /** Queue a request; every one is answered by exactly one onReply or onRequestFailed from the driver. */
  request (out: Outbound[], to: string, msg: Want | Grant | Ack): void {
    this.inflight++
    out.push({ kind: 'request', to, msg })
  }

  // ---- messages in -------------------------------------------------------

  /** A gossip signed by peer id `from` (intake.ts). */
  onGossip (g: Gossip | Hb, from: string, nowMs: number): Verdict { return onGossip(this, g, from, nowMs) }
  /** A want from peer id `from` (intake.ts). */
  onWant (w: Want, from: string, nowMs: number): Grant | None { return onWant(this, w, from, nowMs) }
  /** A pushed grant from peer id `from` (intake.ts). */
  onGrant (g: Grant, from: string, nowMs: number): Ack { return onGrant(this, g, from, nowMs) }
  /** An ack sent as a request by peer id `from`: its grants' marks (intake.ts). Answered `none`. */
  onAck (a: Ack, from: string, nowMs: number): None { return onAck(this, a, from, nowMs) }
  /** The reply to a request this node sent (intake.ts). */
  onReply (req: Want | Grant | Ack, reply: Grant | Ack | None, nowMs: number): void { onReply(this, req, reply, nowMs) }
  /** A request got no reply (intake.ts). */
  onRequestFailed (req: Want | Grant | Ack, to: string, nowMs: number): void { onRequestFailed(this, req, to, nowMs) }

  /** A jrep from peer id `from` (intake.ts): what it changes in this seed's copies, or null if refused. */
  onJournalWrite (m: Jrep, from: string): { change: ReplicaChange | null } | null { return onJournalWrite(this, m, from) }
  /** The answer to a jrep, once its change (if any) is on disk. */
  journalAck (writer: string): Jack { return journalAck(this, writer) }
  /** A jget from peer id `from`: this seed's copy of a dead seed's journal (heir.ts), or null if refused. */
  onJget (m: Jget, from: string): Jcopy | null { return this.seeds.includes(m.node) && this.membership.check(m.node, from) === 'ok' ? this.heir.serve(m) : null }

  /** A peer sent something malformed: counted, dropped. */
  onBadMessage (): void { this.counters.badMessages++ }

  // ---- stopping (lifecycle.ts) ----------------------------------------------

  /** Start a graceful stop: announce leaving at once. Keep ticking until `snapshot` is set. */
  beginStop (nowMs: number): Outbound[] {
    if (!this.stopper.begin(nowMs)) return []
    return [gossipOut(this, this.gossip.now(nowMs), nowMs)]
  }

  /** The state file's content as of now (persist.ts). */
  save (nowMs: number, status: 'running' | 'stopped'): SavedState {
    return saveState(this, nowMs, status)
  }

  /** Only glob keys are evicted (exact keys are bounded by the rules); never with cluster work pending. */
  private canEvict (ks: KeyState): boolean {
    const x = ks.ext as KeyExt | null
    return ks.rule.glob && (x === null || (x.debt === 0 && x.deferred === null && x.burn === 0 && !this.active.has(ks)))
  }

  /** Mark a key for the next gossip. */
  touch (ks: KeyState): void {
    ext(ks)
    this.active.add(ks)
  }

  agrees (p: Peer, ks: KeyState): boolean { return agrees(p, ks) }
}
