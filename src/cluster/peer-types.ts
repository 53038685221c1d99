/**
 * What this node keeps of a peer (peers.ts `Peers`): its newest gossip's
 * word on itself, and its key lines. Types only, apart so the table's logic
 * stays one file under the size guideline.
 */
export interface PeerKey {
  held: number
  outstanding: number
  /** Tokens per second it keeps for; Infinity once it answered a want with `none`, until its next line for the key. */
  rate: number
  /** Tokens of this key the peer still owes to burn. */
  owed: number
  /** The unpaid burns elsewhere the peer knows of (what it keeps unspent itself). */
  debts: number
  /** Tokens it received that are not spendable yet, and tokens in its unacked grants: with held and outstanding, its custody (shortfall.ts). */
  deferred: number
  inTransitOut: number
  /**
   * Its custody exactly as it last said (held + outstanding + deferred +
   * in transit out; beliefs corrected between gossips change `held`, never
   * this): what a pushed grant from it is checked against. In transit
   * counts: a giver's gossip sent after a push and before the push arrives
   * (gossip and grants travel apart) shows the pushed tokens only there.
   */
  said: number
  /** The peer's rules (name -> hash) when it sent this entry. */
  gen: Record<string, string>
  /** The message it came in. */
  seq: number
  /** When it came (monotonic), if its rate was said to decay (gossip `decay`); NaN: the rate stands as said. */
  decaysFrom: number
  /** The rate this line adds to its key's running sum of rates (ClusterView `peersRate`): as read at the last walk or change. */
  counted: number
}

export interface Peer {
  name: string
  epoch: string
  inc: number
  /** Newest message applied from this epoch. */
  seq: number
  /** Monotonic time of the last gossip heard. */
  lastHeard: number
  /** The peer's calendar at its last gossip, minus ours then (for status; includes the delay). */
  clockOffsetMs: number
  /** The peer's wall clock minus its calendar, as its last gossip said (`wg`): where its calendar heads alone. */
  wallGapMs: number
  /**
   * The largest offset heard in this span of OFFSET_SPAN_MS and in the one
   * before (peers.ts): a message's delay only makes an offset read lower, so
   * the largest of recent readings is the closest to the true one (fence.ts
   * judges skew by it). -Infinity: none heard.
   */
  offsetCur: number
  offsetPrev: number
  /**
   * The smallest upper bound on the offset in the same spans: a gossip sent
   * after the peer applied our gossip sent at `echoSentAt` (a voter's echo,
   * lease.ts) was sent after that, so its offset is at most the reading plus
   * the time since (`intake.ts`). Delay widens the bounds; it never moves the
   * true offset out of them. Infinity: no bound yet.
   */
  offsetUpCur: number
  offsetUpPrev: number
  /** Monotonic send time of the newest of our gossips this peer echoed; -Infinity: none. */
  echoSentAt: number
  /** Monotonic time the current span began. */
  offsetSpanAt: number
  rules: Record<string, string>
  keys: Map<string, PeerKey>
  /** What it said it has applied from our current epoch. */
  appliedFromMe: number
  /** Wants to it in a row that brought nothing credited here: no answer in time, or a refused grant (transfers.ts `wantOutcome`). */
  wantsSpoiled: number
  /** Monotonic time before which it is not asked for tokens (cluster-view.ts `chooseDonors`). */
  askAfter: number
  /** It announced it is stopping: it must be sent no more tokens. */
  leaving: boolean
  /** It said it holds no lease (lease.ts): it can't spend hard tokens, so it is given none. */
  fenced: boolean
  /** It said it needs no lease (member-gossip.ts `needsLease`): voters do not echo it. */
  nolease: boolean
  /** It gossips to this node at the quiet pace (it said `nolease`, or, a seed, its members' copy said `prev`): alive for longer. */
  quiet: boolean
  /** Its account holds a pre-allocated share (gossip `alloc` absent): it may relay, and is never attested (reclaim.ts). */
  alloc: boolean
  /** Rules whose keys it has not all announced yet (see Gossip.pending). */
  pending: ReadonlySet<string>
  /**
   * The first seq of the run of its messages that ends at `seq` (1 before
   * any: a new epoch's first message is 1) in which every message was
   * applied here but those in `missing`. A gap of more than MAX_MISSING
   * messages starts a new run.
   */
  runFrom: number
  /** Seqs inside the run not applied yet: overtaken by a later message, or lost. A late one that arrives leaves it. */
  missing: number[]
  /** The last `sync` it named (Gossip.sync) under its current rules: 0 when none. */
  sync: number
  /** Earlier epochs whose books this incarnation carries. */
  carries: readonly string[]
  /** Burns owed by ended epochs of this node: epoch -> key -> tokens. */
  legacy: Map<string, Map<string, number>> | null
  /** Its cluster hash (cluster-hash.ts) equals ours: only then may tokens move between us. */
  sameCluster: boolean
}

export interface Observed {
  /** False: an old message, ignored but for its newer key entries and acks. */
  fresh: boolean
  isNew: boolean
  /** The peer's previous epoch, when this gossip is from a new incarnation. */
  restartedFrom?: string
  /** A fresh gossip from a peer known here but not alive (silent, or cut off and healed). */
  cameBack?: boolean
}

/** A peer heard of for the first time, or in a new epoch: nothing known of it yet. */
export function newPeer (name: string, epoch: string, inc: number): Peer {
  return {
    name, epoch, inc, seq: 0, lastHeard: -Infinity, clockOffsetMs: 0, wallGapMs: 0, offsetCur: -Infinity, offsetPrev: -Infinity, offsetUpCur: Infinity, offsetUpPrev: Infinity, echoSentAt: -Infinity, offsetSpanAt: -Infinity, rules: {}, keys: new Map(),
    appliedFromMe: 0, wantsSpoiled: 0, askAfter: -Infinity, leaving: false, fenced: false, nolease: false, quiet: false, alloc: true, pending: NO_PENDING, runFrom: 1, missing: [], sync: 0, carries: [], legacy: null, sameCluster: false
  }
}

/** No rules pending (shared: most peers have none). */
export const NO_PENDING: ReadonlySet<string> = new Set()
