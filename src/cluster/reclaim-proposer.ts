/**
 * The proposer side of the reclaim log, for one slot. Pure: time comes in as
 * `nowMs` (monotonic), randomness as a `Random`.
 *
 * Phases: `prepare` (prepare sent to every voter, promises counted) →
 * `value` (a quorum promised and none had accepted anything, and the
 * proposer was started without a value: the caller builds one from the
 * promises' `known`/`attested` and calls `supply`) → `accept` (accept sent,
 * `accepted` counted; resent every `resendMs` to voters that have not
 * answered, since an accept is idempotent) → `chosen` (a quorum accepted).
 * `backoff` waits a random while before trying again with a higher ballot;
 * `closed` means a voter said the slot is already chosen (ask it `log?`).
 *
 * Paxos's rule P2: if any promise in the quorum carries an accepted value,
 * the proposer must propose the one with the highest ballot, not its own.
 *
 * A phase that gets no quorum within `phaseTimeoutMs`, or a nack naming a
 * higher promise, ends the ballot; the next one's round is above every round
 * seen (nacks, promises, and whatever the caller passes to `seeRound`).
 * A prepare is not resent within a ballot: the acceptor refuses a ballot it
 * has promised (reclaim-acceptor.ts A1), so a lost promise costs a ballot.
 * The random backoff, doubling per failed ballot up to `backoffMaxMs`,
 * is what lets one of several racing proposers finish alone.
 */
import type { Accept, AcceptedReply, Attested, KnownInc, Nack, Prepare, PromiseReply } from './reclaim-messages.js'
import { compareBallots, sameBallot, type Ballot, type Quorum, type Random, type ReclaimValue } from './reclaim-value.js'

export interface ProposerTiming {
  /** A phase without a quorum for this long ends the ballot. @default 1000 */
  phaseTimeoutMs: number
  /** Accepts are resent to voters that have not answered this often. @default 200 */
  resendMs: number
  /** The first backoff is uniform in [min, 2·min]; each failed ballot doubles the spread. @default 50 */
  backoffMinMs: number
  /** The spread's cap. @default 2000 */
  backoffMaxMs: number
}

export const DEFAULT_PROPOSER_TIMING: ProposerTiming = { phaseTimeoutMs: 1000, resendMs: 200, backoffMinMs: 50, backoffMaxMs: 2000 }

export type ProposerPhase = 'prepare' | 'value' | 'accept' | 'backoff' | 'chosen' | 'closed'

export type ProposerSend = { to: string, body: Prepare | Accept }

/** What the promises of the ballot told (the value is built from it when none was accepted). */
export interface PromiseSummary { ballot: Ballot, known: KnownInc[], attested: Attested[], from: string[] }

export class SlotProposer {
  phase: ProposerPhase = 'backoff'
  /** The value accepted by a quorum, once chosen. */
  chosen?: ReclaimValue
  /** The voter that said the slot is closed (ask it `log?`). */
  closedBy?: string
  private ballot: Ballot
  private maxRound: number
  private failures = 0
  private phaseStart = 0
  private wakeAt: number
  private lastSend = 0
  private readonly promises = new Map<string, PromiseReply>()
  private readonly accepts = new Set<string>()
  private proposing?: ReclaimValue

  /**
   * `own`: the value to propose if no promise carries one; undefined to be asked (`needsValue`).
   * `minRound`: the first ballot's round is above it (the local acceptor's promise for the slot).
   */
  constructor (readonly slot: number, private readonly me: string, private readonly voters: readonly string[],
    private readonly quorum: Quorum, private own: ReclaimValue | undefined, minRound: number,
    private readonly timing: ProposerTiming, nowMs: number) {
    this.maxRound = minRound
    this.ballot = { round: minRound, node: me }
    this.wakeAt = nowMs
  }

  get currentBallot (): Ballot { return this.ballot }
  get done (): boolean { return this.phase === 'chosen' || this.phase === 'closed' }

  /** Any round seen in this slot (gossip, a local acceptor): the next ballot goes above it. */
  seeRound (round: number): void {
    if (round > this.maxRound) this.maxRound = round
  }

  private newBallot (nowMs: number): ProposerSend[] {
    this.ballot = { round: Math.max(this.ballot.round, this.maxRound) + 1, node: this.me }
    this.maxRound = this.ballot.round
    this.promises.clear()
    this.accepts.clear()
    this.proposing = undefined
    this.phase = 'prepare'
    this.phaseStart = nowMs
    this.lastSend = nowMs
    return this.voters.map(to => ({ to, body: { t: 'prepare', slot: this.slot, ballot: this.ballot } }))
  }

  private fail (nowMs: number, rng: Random): void {
    const spread = Math.min(this.timing.backoffMaxMs, this.timing.backoffMinMs * 2 ** this.failures)
    this.failures++
    this.phase = 'backoff'
    this.wakeAt = nowMs + this.timing.backoffMinMs + rng.next() * spread
  }

  /** Time passes: start or restart a ballot, resend accepts, or give up a phase that timed out. */
  tick (nowMs: number, rng: Random): ProposerSend[] {
    switch (this.phase) {
      case 'backoff':
        return nowMs >= this.wakeAt ? this.newBallot(nowMs) : []
      case 'prepare':
        if (nowMs - this.phaseStart >= this.timing.phaseTimeoutMs) this.fail(nowMs, rng)
        return []
      case 'accept':
        if (nowMs - this.phaseStart >= this.timing.phaseTimeoutMs) { this.fail(nowMs, rng); return [] }
        if (nowMs - this.lastSend < this.timing.resendMs) return []
        this.lastSend = nowMs
        return this.acceptsTo(this.voters.filter(v => !this.accepts.has(v)))
      default:
        return []
    }
  }

  private acceptsTo (to: readonly string[]): ProposerSend[] {
    const value = this.proposing!
    return to.map(v => ({ to: v, body: { t: 'accept', slot: this.slot, ballot: this.ballot, value } }))
  }

  onPromise (from: string, m: PromiseReply, nowMs: number): ProposerSend[] {
    if (m.accepted !== undefined) this.seeRound(m.accepted.ballot.round)
    if (this.phase !== 'prepare' || !sameBallot(m.ballot, this.ballot) || !this.voters.includes(from)) return []
    this.promises.set(from, m)
    if (!this.quorum.isQuorum(this.promises.keys())) return []
    // P2: the highest-ballot accepted value among the quorum's promises, if any.
    let best: PromiseReply['accepted']
    for (const p of this.promises.values()) {
      if (p.accepted !== undefined && (best === undefined || compareBallots(p.accepted.ballot, best.ballot) > 0)) best = p.accepted
    }
    if (best !== undefined) return this.startAccept(best.value, nowMs)
    if (this.own !== undefined) return this.startAccept(this.own, nowMs)
    this.phase = 'value'
    return []
  }

  /** The promises of the current ballot, while the phase is `value`. */
  needsValue (): PromiseSummary | undefined {
    if (this.phase !== 'value') return undefined
    const ps = [...this.promises.entries()]
    return { ballot: this.ballot, known: ps.flatMap(([, p]) => p.known ?? []), attested: ps.flatMap(([, p]) => p.attested ?? []), from: ps.map(([v]) => v) }
  }

  /** The value for ballot (built from `needsValue()`): accept it. Ignored if the ballot has moved on. */
  supply (ballot: Ballot, value: ReclaimValue, nowMs: number): ProposerSend[] {
    if (this.phase !== 'value' || !sameBallot(ballot, this.ballot)) return []
    return this.startAccept(value, nowMs)
  }

  private startAccept (value: ReclaimValue, nowMs: number): ProposerSend[] {
    this.proposing = { ...value, slot: this.slot }
    this.phase = 'accept'
    this.phaseStart = nowMs
    this.lastSend = nowMs
    return this.acceptsTo(this.voters)
  }

  /** Returns the chosen value when this reply completes a quorum. */
  onAccepted (from: string, m: AcceptedReply): ReclaimValue | undefined {
    if (this.phase !== 'accept' || !sameBallot(m.ballot, this.ballot) || !this.voters.includes(from)) return undefined
    this.accepts.add(from)
    if (!this.quorum.isQuorum(this.accepts)) return undefined
    this.phase = 'chosen'
    this.chosen = this.proposing
    return this.chosen
  }

  onNack (from: string, m: Nack, nowMs: number, rng: Random): void {
    if (this.done) return
    if (m.through !== undefined && m.through >= this.slot) {
      this.phase = 'closed'
      this.closedBy = from
      return
    }
    this.seeRound(m.promised.round)
    // A nack at or below our ballot is a duplicate or a stale reply: our ballot may still win.
    if (compareBallots(m.promised, this.ballot) <= 0) return
    if (this.phase === 'prepare' || this.phase === 'accept' || this.phase === 'value') this.fail(nowMs, rng)
  }

  /** The slot was learned chosen some other way (also ends `closed`: the value is now known). */
  learned (value: ReclaimValue): void {
    if (this.phase === 'chosen') return
    this.phase = 'chosen'
    this.chosen = value
  }
}
