/**
 * A carrier: an incarnation that carries an earlier one's books (a clean
 * restart, a journal recovery, the restart after a reclaim). Pure; owned
 * by reclaim.ts, which asks it about each voter's attestations and echoes.
 *
 * Invariant: a carrier never holds a lease while a quorum of voters attests
 * a carried incarnation (its books are credited elsewhere then: settled, or
 * inherited by a seed's heir).
 *
 * - An echo from a voter that attests a carried incarnation does not count
 *   for the lease.
 * - An echo from a voter that does not (its attestation list whole) counts,
 *   and marks that voter clear. A voter that echoes this incarnation has
 *   heard it, so it never attests the carried one later (it attests only
 *   the incarnation it last heard), and any attestation it made before is
 *   in the same gossip (a voter lists its attestations of every node in its
 *   peer table, and of every seed).
 * - Once the clear voters (this one, if a voter) form a quorum, no quorum can
 *   ever attest a carried incarnation (two quorums share a voter, and no
 *   voter attests its own incarnations): the books are this incarnation's
 *   for good, and every echo counts.
 * - Once the attesting voters form a quorum, the books must be dropped
 *   (`attested` says so), and every echo counts from then on. There was no
 *   lease before: it would have needed a quorum of counted echoes, all
 *   clear.
 *
 * Dropping at the first attestation instead would be as safe, but if the
 * other voters heard this incarnation first, none of them ever attests the
 * carried one: no settlement, no heir, and what it held is lost for good.
 */
import type { Quorum } from './quorum.js'

export class Carrier {
  private readonly quorum: Quorum
  /** The carried books are this incarnation's for good (or there are none). */
  private safe: boolean
  /** A quorum attests a carried incarnation: the books were dropped. */
  dropped = false
  private readonly attesters = new Set<string>()
  private readonly clear = new Set<string>()

  constructor (me: string, quorum: Quorum, carries: number) {
    this.quorum = quorum
    this.safe = carries === 0
    if (quorum.isVoter(me)) this.clear.add(me)
  }

  /** The carried books are this incarnation's for good: no quorum can ever attest a carried incarnation now. */
  get isSafe (): boolean {
    return this.safe
  }

  /** Voter `voter` attests a carried incarnation: true once a quorum does (the caller drops the books, once). */
  attested (voter: string): boolean {
    if (this.dropped || this.safe) return false
    this.attesters.add(voter)
    if (!this.quorum.isQuorum([...this.attesters])) return false
    this.dropped = true
    return true
  }

  /**
   * Whether `voter`'s echo may count for the lease; `listed`: its gossip's
   * attestations, read before its echoes (`attested`); `whole`: that list
   * was not cut short.
   */
  echoCounts (voter: string, whole: boolean): boolean {
    if (this.safe || this.dropped) return true
    if (this.attesters.has(voter) || !whole) return false
    this.clear.add(voter)
    if (this.quorum.isQuorum([...this.clear])) this.safe = true
    return true
  }
}
