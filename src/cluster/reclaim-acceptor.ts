/**
 * The acceptor side of the reclaim log: a voter's promises and acceptances,
 * one single-decree Paxos instance per open slot. Pure.
 *
 * Invariants (each is what a lost or forgotten vote would break):
 * - A1: `promised` of a slot never decreases, and a prepare is promised only
 *   if its ballot is strictly higher (so a ballot is promised at most once:
 *   reclaim-value.ts explains why ballots then need no incarnation).
 * - A2: an accept is taken only if its ballot is ≥ `promised`; taking it
 *   raises `promised` to it. One value per ballot: an accept for the ballot
 *   already accepted with another value is refused.
 * - A3: every change is durable before the reply that reveals it. The
 *   acceptor only reports `changed`; the caller (ReclaimLog) turns that into
 *   the `persist` snapshot the driver writes before it sends the reply.
 * - A4: a slot ≤ `through` is closed: chosen, its votes dropped. The voter
 *   never votes in it again (a fresh promise there could let a proposer
 *   that sees no accepted value choose a second one); it answers with a
 *   `nack {through}` so the proposer asks for the chosen entry instead.
 *
 * Open slots are bounded: a slot above `through + maxOpenSlots` gets no
 * answer (this voter is behind; it catches up from gossip or `log?`).
 *
 * Also kept here, because it must be durable before use (§3.5): the set of
 * incarnations this voter has ever echoed that the log does not cover. A
 * voter writes an incarnation into it before its first echo, so a
 * restarted voter lists every one in its promises (`known`).
 */
import type { ChosenEntry } from './reclaim-value.js'
import { compareBallots, NO_BALLOT, sameBallot, valueDigest, type Ballot, type ReclaimValue } from './reclaim-value.js'
import type { KnownInc, Nack, PromiseReply, Accept, AcceptedReply, Prepare } from './reclaim-messages.js'

export interface SlotVotes {
  slot: number
  promised: Ballot
  accepted?: { ballot: Ballot, value: ReclaimValue }
}

/** The content of `quotad-votes.json` (reclaim-votes.ts reads and writes it). */
export interface VotesState {
  version: 1
  node: string
  cluster: string
  /** One more at every change: of two snapshots, the higher `gen` is the newer. */
  gen: number
  /** Every slot ≤ through is chosen; this voter votes in none of them again. */
  through: number
  /** Open slots with a promise or an acceptance, by slot. */
  slots: SlotVotes[]
  /** The last chosen entries (catch-up for others, apply after a restart). */
  chosen: ChosenEntry[]
  /** Incarnations ever echoed that the log does not cover, by node then inc. */
  echoed: KnownInc[]
}

export function emptyVotes (node: string, cluster: string): VotesState {
  return { version: 1, node, cluster, gen: 0, through: 0, slots: [], chosen: [], echoed: [] }
}

export interface AcceptorLimits {
  /** Slots above `through` a voter votes in. @default 16 */
  maxOpenSlots: number
  /** Incarnations kept in `echoed`; a full set refuses new ones (the voter then does not echo them). @default 4096 */
  maxEchoed: number
}

export const DEFAULT_ACCEPTOR_LIMITS: AcceptorLimits = { maxOpenSlots: 16, maxEchoed: 4096 }

export interface AcceptorResult<R> {
  /** The durable state changed: persist before sending `reply`. */
  changed: boolean
  reply: R | null
}

export class Acceptor {
  private readonly slots = new Map<number, SlotVotes>()
  private readonly echoedSet = new Map<string, KnownInc>()
  private closedThrough: number
  readonly limits: AcceptorLimits

  constructor (state: Pick<VotesState, 'through' | 'slots' | 'echoed'>, limits: Partial<AcceptorLimits> = {}) {
    this.limits = { ...DEFAULT_ACCEPTOR_LIMITS, ...limits }
    this.closedThrough = state.through
    for (const s of state.slots) {
      if (s.slot > state.through) this.slots.set(s.slot, { slot: s.slot, promised: s.promised, ...(s.accepted === undefined ? {} : { accepted: s.accepted }) })
    }
    for (const e of state.echoed) this.echoedSet.set(`${e[0]}\u0000${e[1]}`, [e[0], e[1]])
  }

  get through (): number { return this.closedThrough }

  /** The highest round this voter has promised or accepted in a slot (a local proposer starts above it). */
  roundIn (slot: number): number {
    return this.slots.get(slot)?.promised.round ?? 0
  }

  private open (slot: number): 'closed' | 'ahead' | 'open' {
    if (slot <= this.closedThrough) return 'closed'
    if (slot > this.closedThrough + this.limits.maxOpenSlots) return 'ahead'
    return 'open'
  }

  private closedNack (slot: number): Nack {
    return { t: 'nack', slot, promised: NO_BALLOT, through: this.closedThrough }
  }

  onPrepare (m: Prepare): AcceptorResult<PromiseReply | Nack> {
    const o = this.open(m.slot)
    if (o === 'closed') return { changed: false, reply: this.closedNack(m.slot) }
    if (o === 'ahead') return { changed: false, reply: null }
    const s = this.slots.get(m.slot) ?? { slot: m.slot, promised: NO_BALLOT }
    // A1: strictly higher. A duplicate of the prepare we promised is refused too (see reclaim-value.ts).
    if (compareBallots(m.ballot, s.promised) <= 0) return { changed: false, reply: { t: 'nack', slot: m.slot, promised: s.promised } }
    s.promised = m.ballot
    this.slots.set(m.slot, s)
    const reply: PromiseReply = { t: 'promise', slot: m.slot, ballot: m.ballot, known: this.known() }
    if (s.accepted !== undefined) reply.accepted = s.accepted
    return { changed: true, reply }
  }

  onAccept (m: Accept): AcceptorResult<AcceptedReply | Nack> {
    const o = this.open(m.slot)
    if (o === 'closed') return { changed: false, reply: this.closedNack(m.slot) }
    if (o === 'ahead') return { changed: false, reply: null }
    const s = this.slots.get(m.slot) ?? { slot: m.slot, promised: NO_BALLOT }
    if (compareBallots(m.ballot, s.promised) < 0) return { changed: false, reply: { t: 'nack', slot: m.slot, promised: s.promised } }
    if (s.accepted !== undefined && sameBallot(s.accepted.ballot, m.ballot)) {
      // A duplicate: answer again, nothing to write. Another value under the same ballot cannot come
      // from a correct proposer (A2); refuse it rather than overwrite.
      if (valueDigest(s.accepted.value) === valueDigest(m.value)) return { changed: false, reply: { t: 'accepted', slot: m.slot, ballot: m.ballot } }
      return { changed: false, reply: { t: 'nack', slot: m.slot, promised: s.promised } }
    }
    s.promised = m.ballot
    s.accepted = { ballot: m.ballot, value: m.value }
    this.slots.set(m.slot, s)
    return { changed: true, reply: { t: 'accepted', slot: m.slot, ballot: m.ballot } }
  }

  /** This voter's acceptance in an open slot, if any. */
  acceptedIn (slot: number): SlotVotes['accepted'] {
    return this.slots.get(slot)?.accepted
  }

  /** Open slots with an acceptance, lowest first (what a voter gossips). */
  acceptances (): Array<{ slot: number, ballot: Ballot, value: ReclaimValue }> {
    return [...this.slots.values()].filter(s => s.accepted !== undefined).sort((a, b) => a.slot - b.slot)
      .map(s => ({ slot: s.slot, ballot: s.accepted!.ballot, value: s.accepted!.value }))
  }

  /** A4: every slot ≤ through is chosen; drop its votes. Returns whether anything changed. */
  close (through: number): boolean {
    if (through <= this.closedThrough) return false
    this.closedThrough = through
    for (const slot of [...this.slots.keys()]) if (slot <= through) this.slots.delete(slot)
    return true
  }

  /**
   * Record an incarnation before echoing it. 'new' must be persisted before the echo is sent;
   * 'full' means the voter must not echo it (it could not list it in a promise).
   */
  noteEchoed (node: string, inc: number): 'known' | 'new' | 'full' {
    const k = `${node}\u0000${inc}`
    if (this.echoedSet.has(k)) return 'known'
    if (this.echoedSet.size >= this.limits.maxEchoed) return 'full'
    this.echoedSet.set(k, [node, inc])
    return 'new'
  }

  /** The log covers every incarnation of `node` up to `inc` (a chosen entry, step 8): drop them. */
  forgetEchoed (node: string, inc: number): boolean {
    let changed = false
    for (const [k, e] of this.echoedSet) {
      if (e[0] === node && e[1] <= inc) { this.echoedSet.delete(k); changed = true }
    }
    return changed
  }

  known (): KnownInc[] {
    return [...this.echoedSet.values()].sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]).map(e => [e[0], e[1]])
  }

  /** The durable part this acceptor owns, as plain data (deep enough that later changes do not alias it). */
  snapshot (): Pick<VotesState, 'through' | 'slots' | 'echoed'> {
    const slots = [...this.slots.values()].sort((a, b) => a.slot - b.slot)
      .map(s => ({ slot: s.slot, promised: s.promised, ...(s.accepted === undefined ? {} : { accepted: s.accepted }) }))
    return { through: this.closedThrough, slots, echoed: this.known() }
  }
}
