/**
 * The reclaim log (design §3.5): reclaims decided by the voters as entries
 * of a log, one single-decree Paxos instance per slot, applied in slot
 * order. Pure: no I/O, no clock; time comes in as `nowMs` (monotonic) and
 * randomness as a `Random`. This file joins the three roles of a node:
 *
 * - acceptor (voters only, reclaim-acceptor.ts): promises and acceptances,
 *   durable before any reply that reveals them;
 * - proposer (reclaim-proposer.ts): one per slot this node leads;
 * - learner (reclaim-learner.ts): which slots are chosen, in order.
 *
 * Every call returns a `Step`. Its contract with the driver:
 *   1. if `persist` is not null, write it (reclaim-votes.ts `writeVotes`,
 *      atomic and fsynced) and wait for the write;
 *   2. then send `reply` to the sender of the message handled, and `send`.
 * `persist` is the whole votes file; a later one (higher `gen`) covers an
 * earlier one, so a driver may coalesce writes, but it must not send a
 * reply before a snapshot at least as new as the one returned with it is
 * on disk. A driver that crashes before writing simply never sends the
 * reply: the voter then never revealed the vote, and the old file is
 * consistent with everything it said.
 *
 * Chosen entries come out of `take()` in slot order, each once; applying
 * them is reclaim-apply.ts's job (a later step), as is deciding what to
 * propose: D, the heir and the listed accounts (§3.5 step 2).
 */
import { Acceptor, type AcceptorLimits, type VotesState } from './reclaim-acceptor.js'
import { Learner, type Conflict, type LearnerLimits } from './reclaim-learner.js'
import { CLUSTER_VERSION } from './messages.js'
import type { Attested, GossipLog, ReclaimBody, ReclaimMessage } from './reclaim-messages.js'
import { DEFAULT_PROPOSER_TIMING, SlotProposer, type PromiseSummary, type ProposerPhase, type ProposerSend, type ProposerTiming } from './reclaim-proposer.js'
import { valueDigest, type Ballot, type ChosenEntry, type Quorum, type Random, type ReclaimValue } from './reclaim-value.js'

export { emptyVotes, type VotesState } from './reclaim-acceptor.js'
export * from './reclaim-value.js'

export interface ReclaimLogOptions {
  node: string
  epoch: string
  /** Every voter, in seed order (prepares and accepts go to all of them). */
  voters: readonly string[]
  quorum: Quorum
  /** This node's votes file if it is a voter (`readVotes`, or `emptyVotes` on a first start); absent for a member. */
  votes?: VotesState
  /** The last slot this node has applied; `take()` starts after it. @default votes.through, else 0 */
  applied?: number
  timing?: Partial<ProposerTiming>
  limits?: Partial<AcceptorLimits & LearnerLimits>
  /** The accounts this voter attests, for its promises (attest.ts). @default none */
  attested?: () => Attested[]
  /** Most entries per `log` reply and per gossip list. @default 16 */
  maxEntries?: number
}

export interface Outbound { to: string, msg: ReclaimMessage }

export interface Step {
  /** Write this votes file, and wait for it, before sending anything in this step. */
  persist: VotesState | null
  /** The answer to the message handled, if any. */
  reply: ReclaimMessage | null
  send: Outbound[]
}

export interface ProposalStatus { slot: number, phase: ProposerPhase, ballot: Ballot, chosen?: ReclaimValue }

export class ReclaimLog {
  readonly node: string
  private readonly acceptor?: Acceptor
  private readonly learner: Learner
  private readonly proposers = new Map<number, SlotProposer>()
  private readonly voterSet: ReadonlySet<string>
  private readonly timing: ProposerTiming
  private readonly maxEntries: number
  private readonly cluster: string
  private gen: number
  private dirty = false
  /** A voter known to have chosen further than us, and when we last asked it. */
  private ahead?: { voter: string, through: number, askedAt: number }

  constructor (private readonly opts: ReclaimLogOptions) {
    this.node = opts.node
    this.voterSet = new Set(opts.voters)
    this.timing = { ...DEFAULT_PROPOSER_TIMING, ...opts.timing }
    this.maxEntries = opts.maxEntries ?? 16
    const v = opts.votes
    if (v !== undefined && !this.voterSet.has(opts.node)) throw new Error(`reclaim log: ${opts.node} has votes but is not a voter`)
    this.cluster = v?.cluster ?? ''
    this.gen = v?.gen ?? 0
    if (v !== undefined) this.acceptor = new Acceptor(v, opts.limits)
    this.learner = new Learner(opts.quorum, this.voterSet,
      { through: v?.through ?? 0, chosen: v?.chosen ?? [], taken: opts.applied ?? v?.through ?? 0 }, opts.limits)
  }

  get isVoter (): boolean { return this.acceptor !== undefined }
  /** Every slot ≤ through is chosen and known here. */
  get through (): number { return this.learner.through }
  /** Evidence of a broken Paxos (two values learned for one slot): empty, always. */
  get conflicts (): readonly Conflict[] { return this.learner.conflicts }

  chosen (slot: number): ReclaimValue | undefined { return this.learner.chosen(slot) }

  /** Chosen entries not handed out yet, in slot order. */
  take (): ChosenEntry[] { return this.learner.take() }

  /** The votes file as it stands (for a first write, or a test). */
  votes (): VotesState | undefined {
    if (this.acceptor === undefined) return undefined
    return { version: 1, node: this.node, cluster: this.cluster, gen: this.gen, ...this.acceptor.snapshot(), chosen: this.learner.tail(this.maxEntries) }
  }

  private step (reply: ReclaimBody | null, sends: ProposerSend[] | Outbound[] = []): Step {
    let persist: VotesState | null = null
    if (this.dirty && this.acceptor !== undefined) {
      this.gen++
      persist = this.votes()!
    }
    this.dirty = false
    const send = sends.map(s => 'msg' in s ? s : { to: s.to, msg: this.wrap(s.body) })
    return { persist, reply: reply === null ? null : this.wrap(reply), send }
  }

  private wrap (body: ReclaimBody): ReclaimMessage {
    return { v: CLUSTER_VERSION, node: this.opts.node, epoch: this.opts.epoch, ...body }
  }

  /** After anything was learned: close the acceptor's slots, tell the proposers. */
  private learned (): void {
    if (this.acceptor?.close(this.learner.through) === true) this.dirty = true
    for (const [slot, p] of this.proposers) {
      const v = this.learner.chosen(slot)
      if (v !== undefined) p.learned(v)
    }
    this.prune()
  }

  /** Finished proposals stay visible (`proposal`) while their slot is in the recent window. */
  private prune (): void {
    const keepAbove = this.learner.through - this.learner.limits.keepChosen
    for (const [slot, p] of this.proposers) if (slot <= keepAbove && p.done) this.proposers.delete(slot)
  }

  private learn (slot: number, value: ReclaimValue): void {
    const before = this.learner.through
    if (this.learner.learn(slot, value) || this.learner.through !== before) this.dirty = true
    this.learned()
  }

  private noteAhead (voter: string, through: number): void {
    if (through > this.learner.through && (this.ahead === undefined || through > this.ahead.through)) {
      this.ahead = { voter, through, askedAt: -Infinity }
    }
  }

  /** A message from `from` (its name, bound to its peer id by the transport). */
  handle (from: string, m: ReclaimMessage, nowMs: number, rng: Random): Step {
    switch (m.t) {
      case 'prepare': {
        if (this.acceptor === undefined) return this.step(null)
        const r = this.acceptor.onPrepare(m)
        if (r.changed) this.dirty = true
        if (r.reply?.t === 'promise' && this.opts.attested !== undefined) r.reply.attested = this.opts.attested()
        return this.step(r.reply)
      }
      case 'accept': {
        if (this.acceptor === undefined) return this.step(null)
        const r = this.acceptor.onAccept(m)
        if (r.changed) this.dirty = true
        if (r.reply?.t === 'accepted') {
          this.learner.report(this.node, m.slot, m.ballot, m.value)
          this.learned()
        }
        return this.step(r.reply)
      }
      case 'promise': {
        const p = this.proposers.get(m.slot)
        return this.step(null, p === undefined ? [] : p.onPromise(from, m, nowMs))
      }
      case 'accepted': {
        const p = this.proposers.get(m.slot)
        const v = p?.onAccepted(from, m)
        if (v !== undefined) this.learn(m.slot, v)
        return this.step(null)
      }
      case 'nack': {
        const p = this.proposers.get(m.slot)
        p?.onNack(from, m, nowMs, rng)
        if (m.through !== undefined && this.voterSet.has(from)) this.noteAhead(from, m.through)
        return this.step(null, this.catchUp(nowMs))
      }
      case 'log?':
        return this.step({ t: 'log', from: m.from, through: this.learner.through, entries: this.learner.entriesFrom(m.from, this.maxEntries) })
      case 'log': {
        if (!this.voterSet.has(from)) return this.step(null)
        for (const e of m.entries) this.learn(e.slot, e.value)
        this.noteAhead(from, m.through)
        if (this.ahead !== undefined && this.ahead.through <= this.learner.through) this.ahead = undefined
        else if (this.ahead !== undefined && this.ahead.voter === from) this.ahead.askedAt = -Infinity // ask for the next page
        return this.step(null, this.catchUp(nowMs))
      }
    }
  }

  private catchUp (nowMs: number): Outbound[] {
    const a = this.ahead
    if (a === undefined) return []
    if (a.through <= this.learner.through) { this.ahead = undefined; return [] }
    if (nowMs - a.askedAt < this.timing.resendMs) return []
    a.askedAt = nowMs
    return [{ to: a.voter, msg: this.wrap({ t: 'log?', from: this.learner.through + 1 }) }]
  }

  /**
   * Lead `slot` (the next open one, normally `through + 1`): with `value`, propose it unless a promise
   * carries an accepted one; without, `needsValue(slot)` asks for one once a quorum has promised.
   * A proposer already running for the slot is kept (its ballot stays), and the value replaced.
   */
  propose (slot: number, value: ReclaimValue | undefined, nowMs: number, rng: Random): Step {
    if (!Number.isSafeInteger(slot) || slot <= this.learner.through) throw new Error(`reclaim log: slot ${slot} is already chosen (through ${this.learner.through})`)
    if (slot > this.learner.through + this.learner.limits.maxOpenSlots) throw new Error(`reclaim log: slot ${slot} is beyond the open window (through ${this.learner.through})`)
    if (value !== undefined && value.slot !== slot) throw new Error(`reclaim log: value for slot ${value.slot} proposed in slot ${slot}`)
    const old = this.proposers.get(slot)
    if (old !== undefined && !old.done) return this.step(null)
    const minRound = this.acceptor?.roundIn(slot) ?? 0
    const p = new SlotProposer(slot, this.node, this.opts.voters, this.opts.quorum, value, minRound, this.timing, nowMs)
    if (old !== undefined) p.seeRound(old.currentBallot.round)
    this.proposers.set(slot, p)
    return this.step(null, p.tick(nowMs, rng))
  }

  needsValue (slot: number): PromiseSummary | undefined {
    return this.proposers.get(slot)?.needsValue()
  }

  supply (slot: number, ballot: Ballot, value: ReclaimValue, nowMs: number): Step {
    if (value.slot !== slot) throw new Error(`reclaim log: value for slot ${value.slot} supplied in slot ${slot}`)
    const p = this.proposers.get(slot)
    return this.step(null, p === undefined ? [] : p.supply(ballot, value, nowMs))
  }

  proposal (slot: number): ProposalStatus | undefined {
    const p = this.proposers.get(slot)
    if (p === undefined) return undefined
    return { slot, phase: p.phase, ballot: p.currentBallot, ...(p.chosen === undefined ? {} : { chosen: p.chosen }) }
  }

  /** Stop leading a slot (this node is no longer the leader). Its votes are unaffected. */
  abandon (slot: number): void {
    this.proposers.delete(slot)
  }

  /** Time passes: proposers retry and resend, a lagging learner asks for the log. */
  tick (nowMs: number, rng: Random): Step {
    const sends: Outbound[] = []
    for (const [slot, p] of this.proposers) {
      for (const s of p.tick(nowMs, rng)) sends.push({ to: s.to, msg: this.wrap(s.body) })
      if (p.phase === 'closed' && p.closedBy !== undefined) this.noteAhead(p.closedBy, slot)
    }
    this.prune()
    sends.push(...this.catchUp(nowMs))
    return this.step(null, sends)
  }

  /** A voter's gossip section: its acceptances in open slots and the chosen tail (bounded). */
  gossip (): GossipLog {
    const accepted = (this.acceptor?.acceptances() ?? []).slice(0, this.maxEntries)
      .map(a => ({ slot: a.slot, ballot: a.ballot, digest: valueDigest(a.value), value: a.value }))
    return { accepted, chosen: this.isVoter ? this.learner.tail(this.maxEntries) : [] }
  }

  /** A voter's gossip section (parseGossipLog), from `from`. Non-voters' are ignored. */
  learnGossip (from: string, g: GossipLog, nowMs: number): Step {
    if (!this.voterSet.has(from)) return this.step(null)
    for (const a of g.accepted) {
      this.proposers.get(a.slot)?.seeRound(a.ballot.round)
      const e = this.learner.report(from, a.slot, a.ballot, a.value, a.digest)
      if (e !== undefined) this.dirty = true
    }
    for (const e of g.chosen) this.learn(e.slot, e.value)
    this.learned()
    const top = g.chosen.reduce((m, e) => Math.max(m, e.slot), 0)
    this.noteAhead(from, top)
    return this.step(null, this.catchUp(nowMs))
  }

  /**
   * Record an incarnation this voter is about to echo for the first time. `ok: false`: do not
   * echo it (the set is full). Persist before the echo leaves.
   */
  noteEchoed (node: string, inc: number): { ok: boolean, persist: VotesState | null } {
    if (this.acceptor === undefined) return { ok: true, persist: null }
    const r = this.acceptor.noteEchoed(node, inc)
    if (r === 'new') this.dirty = true
    return { ok: r !== 'full', persist: this.step(null).persist }
  }

  /** The log now covers every incarnation of node up to inc (applied entries). */
  forgetEchoed (node: string, inc: number): VotesState | null {
    if (this.acceptor?.forgetEchoed(node, inc) === true) this.dirty = true
    return this.step(null).persist
  }
}
