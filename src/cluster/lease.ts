/**
 * Leases (cluster-protocol.md, "Leases and fencing", I4). Pure: times are monotonic `nowMs`
 * passed in.
 *
 * A node may spend `hard` tokens, and give tokens, only while it holds a
 * lease: at monotonic time t, the voters (quorum.ts) whose latest echo of it
 * names one of its own gossips sent at or after t − leaseMs form a quorum.
 * A voter counts itself as echoing at every moment. Hearing the voters is
 * not enough: under a one-way cut a node hears them while they do not hear
 * it, and they could give up on it while it spends. An echo proves the
 * voter received the gossip, so it heard the node after that gossip's
 * send time, which the node measured on its own clock.
 *
 * - `Lease`: this node's side. It remembers the send time of its last
 *   SENT_KEPT gossips by seq, and per voter the newest send time any of its
 *   echoes named; from those, until when the lease holds. Echoes only ever
 *   move that time forward, so a late or duplicated echo is harmless, and an
 *   echo of a gossip older than the kept window is ignored (it could only
 *   have been old).
 * - `EchoSchedule`: a voter's side. Each gossip carries `heard` entries
 *   [node, inc, seq] (the newest seq applied from that incarnation), each
 *   peer at most once per leaseMs / ECHOES_PER_LEASE, staggered so one gossip names about
 *   the fraction of peers one interval's share of that period.
 *
 * A node starts without a lease, fenced until its first quorum echo (about
 * one gossip round trip); a node that is the whole quorum (a single seed)
 * always holds one. Except a seed's first start (it allocates and carries
 * nothing): it holds a start lease for leaseMs from its start (`graceUntil`),
 * so the cluster's first window is not lost to the first round trip. Safe
 * for the same reason an echo is: a voter attests an incarnation only after
 * reclaimMs of silence since it last heard it, so never before the node's
 * start plus reclaimMs > leaseMs + maxClockSkewMs; and an incarnation that
 * carries nothing has no earlier books that a quorum could have attested
 * (a restart carries its predecessor's, and must hear a quorum first:
 * reclaim.ts drops carried books an echoing voter attests).
 */
import type { Quorum } from './quorum.js'
import { DEFAULT_BOUNDS } from './message-fields.js'

/** Own gossips whose send times are kept: 64 intervals, far more than any lease spans. */
export const SENT_KEPT = 64
/**
 * How often per lease a voter echoes each peer. A lease needs one echo per
 * quorum voter within leaseMs; three leave two echoes' worth of margin for
 * loss and delay. Echoes are most of a gossip at scale (uniform load at 200
 * seeds: 529 of 698 bytes at four per lease), and every node receives every
 * gossip: three instead of four took a node's received traffic from 4,459
 * to 3,623 kbit/s there, with the same utilization, and lossy at 10 nodes
 * (10% loss) the same to the tenth of a point.
 */
export const ECHOES_PER_LEASE = 3
/**
 * Most `heard` entries one gossip carries: the parser's bound (the peer cap,
 * DEFAULT_BOUNDS.maxPeers), and at most HEARD_BYTE_BUDGET bytes of them.
 * New peers are echoed first, so when a fleet of members starts at once
 * this bound is how many get their first lease per gossip. At 256 (the
 * bound before), 995 members starting with 5 seeds stayed fenced for up to
 * four gossips, 850 ms, and the seeds handed their tokens to the first
 * quarter: 1000 nodes with 5 seeds, seeds 1-3, uniform 59.5 -> 63.0%,
 * zipf 71.6 -> 74.0%, moving-hot 66.2% either way (its slowest follow
 * 1,400 -> 800 ms). Clusters under 256 nodes are unchanged.
 */
export const MAX_HEARD_PER_GOSSIP = DEFAULT_BOUNDS.maxPeers
/**
 * Bytes of `heard` one gossip may take, counted by heardEntryBytes (as the
 * gossip builder counts them; about twice their packed size): names are up to 64
 * bytes, and 1024 such entries would not fit a gossip's 56 KiB budget
 * (GOSSIP_BYTE_BUDGET) with the rest. Names of 10 bytes fit 1024; of 64
 * bytes, 381. Key lines that do not fit spill into the next gossip.
 */
export const HEARD_BYTE_BUDGET = 32 * 1024

/** A `heard` entry's bytes as a gossip's size estimate counts them (gossip-builder.ts, HEARD_BYTE_BUDGET). */
export function heardEntryBytes (name: string): number {
  return name.length + 22
}

/** [node, incarnation, newest gossip seq applied from it]. */
export type HeardEntry = [node: string, inc: number, seq: number]

export interface LeaseOptions {
  /** This node's name. */
  me: string
  quorum: Quorum
  leaseMs: number
  /** Leases off: never fenced (the behaviour before leases). */
  enabled: boolean
  /** A start lease: held until this monotonic time whatever the echoes (see the header). @default -Infinity */
  graceUntil?: number
}

export class Lease {
  readonly enabled: boolean
  readonly leaseMs: number
  private readonly me: string
  private readonly quorum: Quorum
  private readonly seqs = new Float64Array(SENT_KEPT).fill(-1)
  private readonly times = new Float64Array(SENT_KEPT)
  /** Voter -> the newest send time (our clock) of a gossip of ours it echoed. */
  private readonly echoes = new Map<string, number>()
  /**
   * Voters with an echo (and this node, if a voter, at Infinity: it counts
   * as echoing at every moment), newest echo first, with their weights.
   * Kept in order as echoes come, so each echo costs O(voters), with no sort
   * and no allocation: at 200 seeds a node takes a few hundred echoes a
   * second, and sorting for each was three quarters of a simulation's time.
   */
  private readonly order: Array<[voter: string, at: number, weight: number]> = []
  /** The lease holds while nowMs <= until. */
  private until: number
  /** As `until`, counting the excluded voters' echoes too (what the lease would be if their calendars agreed). */
  private untilAll: number
  /**
   * Voters whose echoes do not count (`exclude`): their calendars surely
   * disagree with this node's by more than maxClockSkewMs (fence.ts). An
   * echo proves a voter heard this node, not that the two agree on when a
   * window ends: a lease from voters that disagree, while the voters that
   * might agree never echoed, let a node 10 s ahead spend (skew-procs under
   * a busy core; sim scenario skewed-node-unheard).
   */
  private excluded: ReadonlySet<string> = new Set()
  /** Some voter may disagree by more than maxClockSkewMs, with no echo yet to tell (fence.ts): the start lease is void. */
  private doubt = false
  /** The start lease's end (-Infinity: none). */
  private readonly grace: number

  constructor (o: LeaseOptions) {
    this.me = o.me
    this.quorum = o.quorum
    this.leaseMs = o.leaseMs
    this.enabled = o.enabled
    this.grace = o.graceUntil ?? -Infinity
    if (this.quorum.isVoter(this.me)) this.order.push([this.me, Infinity, this.quorum.weight(this.me)])
    this.until = this.untilAll = this.compute(false)
  }

  /**
   * From now on, the echoes of `voters` do not count (see `excluded`), and
   * the start lease stands only while none is excluded and not `doubt`;
   * returns whether the lease moved.
   */
  exclude (voters: ReadonlySet<string>, doubt = false): boolean {
    if (voters.size === 0 && this.excluded.size === 0 && doubt === this.doubt) return false
    this.excluded = voters
    this.doubt = doubt
    const before = this.until
    this.until = this.compute(true)
    return this.until !== before
  }

  /** Whether the lease would hold at `nowMs` if the excluded voters' echoes counted: only they stand in its way. */
  heldByExcluded (nowMs: number): boolean {
    return this.enabled && (this.excluded.size > 0 || this.doubt) && nowMs > this.until && nowMs <= this.untilAll
  }

  /** This node sent its gossip `seq` at `nowMs`. */
  sent (seq: number, nowMs: number): void {
    const i = seq % SENT_KEPT
    this.seqs[i] = seq
    this.times[i] = nowMs
  }

  /** When this node sent gossip `seq`, if it is among the kept ones. */
  sentAt (seq: number): number | undefined {
    const i = seq % SENT_KEPT
    return this.seqs[i] === seq ? this.times[i] : undefined
  }

  /**
   * Voter `voter` says it has applied our gossip `seq` (an entry of its
   * `heard` for our name and incarnation). Returns whether the lease moved.
   */
  echoed (voter: string, seq: number): boolean {
    if (!this.quorum.isVoter(voter) || voter === this.me) return false
    const at = this.sentAt(seq)
    if (at === undefined || at <= (this.echoes.get(voter) ?? -Infinity)) return false
    this.echoes.set(voter, at)
    this.place(voter, at)
    const before = this.until
    this.until = this.compute(true)
    this.untilAll = this.excluded.size === 0 && !this.doubt ? this.until : this.compute(false)
    return this.until !== before
  }

  /** Whether the lease holds at `nowMs` (leases off: always). */
  valid (nowMs: number): boolean {
    return !this.enabled || nowMs <= this.until
  }

  /** Until when the lease holds on the echoes so far (-Infinity: never held; Infinity: this node is a quorum alone). */
  get validUntil (): number {
    return this.until
  }

  /** Per voter (other than this node), how long ago the gossip it last echoed was sent; null: never. */
  echoAges (nowMs: number): Record<string, number | null> {
    const out: Record<string, number | null> = {}
    for (const v of this.quorum.voters) {
      if (v === this.me) continue
      const at = this.echoes.get(v)
      out[v] = at === undefined ? null : Math.round(nowMs - at)
    }
    return out
  }

  /** Move `voter` to its place in `order` for its new echo time. */
  private place (voter: string, at: number): void {
    const o = this.order
    const i = o.findIndex(e => e[0] === voter)
    if (i >= 0) o.splice(i, 1)
    let j = 0
    while (j < o.length && o[j][1] >= at) j++
    o.splice(j, 0, [voter, at, this.quorum.weight(voter)])
  }

  /**
   * The latest time the lease holds: walk the voters from the newest echo
   * down (`excluding`: but the excluded); the echo at which their weight first makes a quorum, plus leaseMs.
   * Voters are distinct, so their weights add up as Quorum.isQuorum counts them.
   */
  private compute (excluding: boolean): number {
    const o = this.order
    let w = 0
    const half = this.quorum.total / 2
    // The start lease stands for echoes from every voter: void once one surely disagrees (a voter never heard
    // from might agree, and with it the start lease would be a quorum the disagreeing voter is part of), or
    // might disagree with no echo yet to bound it: without a round trip nothing says which.
    const grace = excluding && (this.excluded.size > 0 || this.doubt) ? -Infinity : this.grace
    for (let k = 0; k < o.length; k++) {
      if (excluding && this.excluded.has(o[k][0])) continue
      w += o[k][2]
      if (w > half) return Math.max(o[k][1] + this.leaseMs, grace)
    }
    return grace
  }
}

/** What a voter knows of a peer it may echo. */
export interface Echoable {
  name: string
  inc: number
  /** Newest gossip applied from its current incarnation (0: none yet). */
  seq: number
}

export class EchoSchedule {
  private readonly everyMs: number
  private readonly gossipIntervalMs: number
  /** Peer incarnation (`name/inc`) -> when it was last echoed. */
  private readonly last = new Map<string, number>()

  constructor (leaseMs: number, gossipIntervalMs: number) {
    this.everyMs = leaseMs / ECHOES_PER_LEASE
    this.gossipIntervalMs = gossipIntervalMs
  }

  /**
   * The `heard` entries for a gossip at `nowMs`: peers never echoed first (a
   * new node waits for its first lease), then those due, oldest first, at
   * most one interval's share of the peers (plus the new ones), within
   * MAX_HEARD_PER_GOSSIP entries and HEARD_BYTE_BUDGET bytes.
   */
  take (peers: readonly Echoable[], nowMs: number): HeardEntry[] {
    const fresh: Echoable[] = []
    const due: Array<[Echoable, number]> = []
    let count = 0
    for (const p of peers) {
      if (p.seq <= 0) continue
      count++
      const at = this.last.get(`${p.name}/${p.inc}`)
      if (at === undefined) fresh.push(p)
      else if (nowMs - at >= this.everyMs - this.gossipIntervalMs / 2) due.push([p, at])
    }
    if (this.last.size > 2 * count + 16) this.prune(peers)
    due.sort((a, b) => a[1] - b[1])
    const share = Math.max(1, Math.ceil(count * this.gossipIntervalMs / this.everyMs))
    const picked: HeardEntry[] = []
    let bytes = 0
    for (const p of [...fresh, ...due.slice(0, share).map(d => d[0])]) {
      bytes += heardEntryBytes(p.name)
      if (picked.length >= MAX_HEARD_PER_GOSSIP || bytes > HEARD_BYTE_BUDGET) break
      this.last.set(`${p.name}/${p.inc}`, nowMs)
      picked.push([p.name, p.inc, p.seq])
    }
    return picked
  }

  private prune (peers: readonly Echoable[]): void {
    const names = new Set<string>()
    for (const p of peers) names.add(`${p.name}/${p.inc}`)
    for (const n of [...this.last.keys()]) if (!names.has(n)) this.last.delete(n)
  }
}
