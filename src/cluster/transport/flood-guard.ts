/**
 * What a gossip flood from one peer id costs a node (issue 46): bounded by
 * gossipsub's own peer scoring, not by quotad's inbox. Every gossip message
 * costs libp2p work before quotad sees its bytes (protobuf, the Ed25519
 * signature check, the seen cache, relaying it to the mesh), so a budget
 * spent after that (the inbox) saves nothing. This guard is the transport's
 * topic validator's second half and gossipsub's application score:
 *
 * - Each origin (the peer id that signed a message) has a budget, a leaky
 *   bucket: `perSecond` on average, `burst` at once. An honest node
 *   publishes one gossip per gossip interval, a seed two (its own and its
 *   members' copy): the daemon sets `perSecond` to twice that, and `burst`
 *   to 4 s of honest gossip, so an honest origin goes over only if more
 *   than 4 s of its gossip reached us at once (a stall that long has fenced
 *   the node already: leaseMs is 3 s or 12 gossip intervals). A message over
 *   its origin's budget is not delivered and not relayed.
 * - If the peer that handed us that message is its origin (it floods with
 *   its own key), the message is rejected and the peer penalised for
 *   `penaltyMs`: the transport hangs up on it and refuses it until then
 *   (what it had queued goes unread), and its application score drops far
 *   below gossipsub's graylist threshold, so gossipsub ignores its RPCs
 *   before decoding their messages (no signature check, no relay:
 *   `acceptFrom`), leaves it out of the mesh and stops publishing to it.
 *   When the penalty ends it has its budget again, and loses it again if it
 *   still floods.
 * - A message relayed by another peer is only ignored (no penalty): the
 *   relay did nothing wrong, and penalising it would let one flooder cut
 *   honest seeds apart. A listed node (a seed address we dial) is never
 *   penalised either: its over-budget gossip is ignored (a compromised listed
 *   node is another threat: docs/operations.md "Threat model: the cluster").
 *
 * Memory is bounded: at most `maxOrigins` budgets (the least recently heard
 * go first: an insider minting keys can evict budgets, which only refills
 * them) and as many penalties. Time is passed in (monotonic ms); no timers.
 */

export type FloodVerdict = 'accept' | 'ignore' | 'reject'

export interface FloodGuardOptions {
  /** Messages one origin may publish per second, on average. */
  perSecond: number
  /** Messages one origin may publish at once above that. */
  burst: number
  /** How long a peer that flooded with its own key stays penalised. */
  penaltyMs: number
  /** Most origins (and penalised peers) tracked. */
  maxOrigins: number
  /** Never penalised: the listed nodes' peer ids. */
  exempt: (peerId: string) => boolean
}

/** gossipsub's application-specific score for a penalised peer: times appSpecificWeight (10), far below any threshold. */
export const PENALTY_SCORE = -1000

interface Bucket { level: number, atMs: number }

export class FloodGuard {
  private readonly o: FloodGuardOptions
  private readonly buckets = new Map<string, Bucket>()
  /** Penalised peer id -> until (monotonic ms). */
  private readonly penalties = new Map<string, number>()
  /** Messages over their origin's budget (not delivered, not relayed), penalties given, connections refused for one. */
  readonly counters = { gossipOverBudget: 0, floodPenalties: 0, floodRefusals: 0 }

  constructor (o: FloodGuardOptions) {
    this.o = o
  }

  /**
   * One message signed by `origin`, handed to us by `source`, at `nowMs`.
   * `penalised` is called when this message starts a penalty for `source`.
   */
  judge (origin: string, source: string, nowMs: number, penalised?: (peerId: string) => void): FloodVerdict {
    let b = this.buckets.get(origin)
    if (b === undefined) {
      b = { level: 0, atMs: nowMs }
      if (this.buckets.size >= this.o.maxOrigins) this.buckets.delete(this.buckets.keys().next().value as string)
    } else {
      this.buckets.delete(origin) // re-inserted below: the map stays in order of last heard
    }
    this.buckets.set(origin, b)
    b.level = Math.max(0, b.level - (nowMs - b.atMs) * this.o.perSecond / 1000)
    b.atMs = nowMs
    if (b.level + 1 <= this.o.burst) {
      b.level += 1
      return 'accept'
    }
    this.counters.gossipOverBudget++
    if (source !== origin || this.o.exempt(source)) return 'ignore'
    if (!this.penalised(source, nowMs)) {
      this.counters.floodPenalties++
      this.penalties.delete(source)
      if (this.penalties.size >= this.o.maxOrigins) this.penalties.delete(this.penalties.keys().next().value as string)
      this.penalties.set(source, nowMs + this.o.penaltyMs)
      penalised?.(source)
    }
    return 'reject'
  }

  /** Whether `peerId` is penalised at `nowMs` (gossipsub's application score reads it). */
  penalised (peerId: string, nowMs: number): boolean {
    const until = this.penalties.get(peerId)
    if (until === undefined) return false
    if (until > nowMs) return true
    this.penalties.delete(peerId)
    return false
  }

  /** Whether a connection with `peerId` is refused at `nowMs` (it is penalised); counted. */
  refuses (peerId: string, nowMs: number): boolean {
    if (!this.penalised(peerId, nowMs)) return false
    this.counters.floodRefusals++
    return true
  }

  /** Peers penalised now (a gauge for stats). */
  penalisedNow (nowMs: number): number {
    let n = 0
    for (const [id, until] of this.penalties) {
      if (until > nowMs) n++
      else this.penalties.delete(id)
    }
    return n
  }
}
