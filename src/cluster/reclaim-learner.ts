/**
 * The learner side of the reclaim log: which slots are chosen, in order.
 * Pure.
 *
 * A slot is chosen once a quorum of voters has accepted the same
 * `(ballot, value)` in it, at any times: learned from a proposer's quorum of
 * `accepted` replies, from voters' gossiped acceptances (counted here), or
 * from a voter's word that it is chosen (its chosen tail, a `log` reply).
 * Voters do not lie (operations.md's threat model), so a voter's word is
 * enough; a member's is not taken.
 *
 * Chosen entries are handed out in slot order only (`take`): `through` is
 * the highest slot such that every slot up to it is chosen and known here.
 * Memory is bounded: acceptances are counted only in the open window
 * (`through`, `through + maxOpenSlots`], at most `maxBallotsPerSlot`
 * ballots per slot (the lowest dropped: that only delays learning), and the
 * chosen entries kept are those not yet taken plus the last `keepChosen`.
 *
 * Two different values learned for one slot would be a broken Paxos; it is
 * never resolved by guessing: the first one stays and the clash is recorded
 * in `conflicts` (tests and the simulator's checker fail on it).
 */
import { compareBallots, valueDigest, type Ballot, type ChosenEntry, type Quorum, type ReclaimValue } from './reclaim-value.js'

export interface LearnerLimits {
  /** Slots above `through` in which acceptances are counted. @default 16 */
  maxOpenSlots: number
  /** Chosen entries kept at or below `through` once taken, for catch-up. @default 16 */
  keepChosen: number
  /** Distinct (ballot, value) pairs counted per slot. @default 8 */
  maxBallotsPerSlot: number
}

export const DEFAULT_LEARNER_LIMITS: LearnerLimits = { maxOpenSlots: 16, keepChosen: 16, maxBallotsPerSlot: 8 }

export interface Conflict { slot: number, kept: string, other: string }

interface Tally { ballot: Ballot, digest: string, value: ReclaimValue, voters: Set<string> }

export class Learner {
  private readonly chosenBySlot = new Map<number, { value: ReclaimValue, digest: string }>()
  private readonly tallies = new Map<number, Map<string, Tally>>()
  private contiguous: number
  private taken: number
  readonly conflicts: Conflict[] = []
  readonly limits: LearnerLimits

  /**
   * `through` and `chosen` from a voter's votes file (or 0 and none), `taken`: the last slot the
   * node has applied (default `through`: nothing to re-apply).
   */
  constructor (private readonly quorum: Quorum, private readonly voters: ReadonlySet<string>,
    init: { through: number, chosen: readonly ChosenEntry[], taken?: number }, limits: Partial<LearnerLimits> = {}) {
    this.limits = { ...DEFAULT_LEARNER_LIMITS, ...limits }
    this.contiguous = init.through
    this.taken = Math.min(init.taken ?? init.through, init.through)
    for (const e of init.chosen) this.chosenBySlot.set(e.slot, { value: e.value, digest: valueDigest(e.value) })
    this.advance()
  }

  /** Every slot ≤ through is chosen and known here. */
  get through (): number { return this.contiguous }

  chosen (slot: number): ReclaimValue | undefined {
    return this.chosenBySlot.get(slot)?.value
  }

  /** Count voter's acceptance of (ballot, value) in slot. Returns the entry if this made the slot chosen. */
  report (voter: string, slot: number, ballot: Ballot, value: ReclaimValue, digest = valueDigest(value)): ChosenEntry | undefined {
    if (!this.voters.has(voter) || slot <= this.contiguous || slot > this.contiguous + this.limits.maxOpenSlots) return undefined
    if (this.chosenBySlot.has(slot)) return undefined
    let bySlot = this.tallies.get(slot)
    if (bySlot === undefined) { bySlot = new Map(); this.tallies.set(slot, bySlot) }
    const k = `${ballot.round}\u0000${ballot.node}\u0000${digest}`
    let t = bySlot.get(k)
    if (t === undefined) {
      t = { ballot, digest, value, voters: new Set() }
      bySlot.set(k, t)
      if (bySlot.size > this.limits.maxBallotsPerSlot) {
        const lowest = [...bySlot.entries()].sort((a, b) => compareBallots(a[1].ballot, b[1].ballot))[0][0]
        bySlot.delete(lowest)
        if (!bySlot.has(k)) return undefined
      }
    }
    t.voters.add(voter)
    if (!this.quorum.isQuorum(t.voters)) return undefined
    return this.learn(slot, value) ? { slot, value } : undefined
  }

  /** Slot is chosen with value (a quorum was seen, here or by a voter). Returns true if this is news. */
  learn (slot: number, value: ReclaimValue): boolean {
    const digest = valueDigest(value)
    const had = this.chosenBySlot.get(slot)
    if (had !== undefined) {
      if (had.digest !== digest) this.conflicts.push({ slot, kept: had.digest, other: digest })
      return false
    }
    if (slot <= this.contiguous) return false // compacted away: nothing left to compare with
    if (slot > this.contiguous + this.limits.maxOpenSlots) return false // too far ahead; catch up first
    this.chosenBySlot.set(slot, { value, digest })
    this.tallies.delete(slot)
    this.advance()
    return true
  }

  private advance (): void {
    while (this.chosenBySlot.has(this.contiguous + 1)) {
      this.contiguous++
      this.tallies.delete(this.contiguous)
    }
    const keepFrom = Math.min(this.taken + 1, this.contiguous - this.limits.keepChosen + 1)
    for (const slot of [...this.chosenBySlot.keys()]) if (slot < keepFrom) this.chosenBySlot.delete(slot)
  }

  /** Chosen entries not yet handed out, in slot order, contiguous. The caller applies them. */
  take (): ChosenEntry[] {
    const out: ChosenEntry[] = []
    while (this.taken < this.contiguous) {
      this.taken++
      const e = this.chosenBySlot.get(this.taken)
      if (e !== undefined) out.push({ slot: this.taken, value: e.value })
    }
    this.advance()
    return out
  }

  /** Chosen entries from slot `from` on (at most max), for a `log?` request. */
  entriesFrom (from: number, max: number): ChosenEntry[] {
    const out: ChosenEntry[] = []
    for (const slot of [...this.chosenBySlot.keys()].sort((a, b) => a - b)) {
      if (slot >= from && out.length < max) out.push({ slot, value: this.chosenBySlot.get(slot)!.value })
    }
    return out
  }

  /** The last `max` chosen entries at or below through (gossip, the votes file). */
  tail (max: number): ChosenEntry[] {
    return this.entriesFrom(Math.max(1, this.contiguous - max + 1), max).filter(e => e.slot <= this.contiguous)
  }
}
