/**
 * Where a key's tokens are, and where they should come from, as this node
 * sees the cluster: from peers' last gossip, or, for a key a peer never
 * gossiped (it has no state for it), the pre-allocated share it would create
 * the key with. Deciding where tokens go never moves any; `believeHeld` only
 * corrects this node's belief between gossips.
 */
import type { KeyState } from '../core/limiter.js'
import type { CalendarView } from '../core/calendar.js'
import { fmix32 } from '../core/hash.js'
import { homeOf, initialShare } from '../core/share.js'
import { decayed, horizon, type KeyExt } from './key-ext.js'
import { otherMembers } from './member-sums.js'
import type { Peer, PeerKey, Peers } from './peers.js'
import type { ClusterTuning } from './tuning.js'

const NO_GEN: Record<string, string> = Object.freeze({}) as Record<string, string>

/** A surplus (or a holding) over this is at least a whole token, give or take float error: worth a want. */
const DONOR_MIN = 0.999

/** A key's sums are walked again at least every this many gossip intervals (see clusterRemaining). */
const WALK_EVERY = 2

/**
 * Whether a peer enforces the same rule (same hash) as we do for this key,
 * in the same cluster (same seeds, pinned ids and timings): only then are
 * its tokens shared.
 */
export function agrees (p: Peer, ks: KeyState): boolean {
  return p.sameCluster && p.rules[ks.rule.name] === ks.rule.hash
}

export class ClusterView {
  private readonly node: string
  readonly seeds: readonly string[]
  /** Dead seeds' heirs (heir.ts): their glob keys' homes. */
  homes: ReadonlyMap<string, string> = new Map()
  readonly peers: Peers
  readonly tuning: ClusterTuning
  private readonly calendar: CalendarView

  constructor (node: string, seeds: readonly string[], peers: Peers, tuning: ClusterTuning, calendar: CalendarView) {
    this.node = node
    this.seeds = seeds
    this.peers = peers
    this.tuning = tuning
    this.calendar = calendar
  }

  /** What a peer holds of a key: its last gossip, or the share it would create the key with. */
  peerHeld (p: Peer, ks: KeyState): number {
    const k = p.keys.get(ks.key)
    return k !== undefined ? k.held : this.peerShare(p, ks)
  }

  /** The share a peer would create a key with (its pre-allocated share): what it has if it never said. */
  peerShare (p: Peer, ks: KeyState): number {
    return initialShare(ks.rule.stock, ks.rule.glob, ks.key, p.name, this.seeds, this.homes)
  }

  /** Adjust what this node believes a peer holds of a key, until the peer's next gossip says otherwise. */
  believeHeld (peer: string, ks: KeyState, delta: number, nowMs: number): void {
    const p = this.peers.get(peer)
    if (p === undefined) return
    const before = this.peerHeld(p, ks)
    const held = Math.max(0, before + delta)
    const k = p.keys.get(ks.key)
    if (held > DONOR_MIN) this.risen(ks, p)
    this.adjust(ks, p, before, k?.counted ?? 0, held, k?.counted ?? 0, nowMs)
    if (k !== undefined) k.held = held
    else p.keys.set(ks.key, { held, outstanding: 0, rate: 0, owed: 0, debts: 0, deferred: 0, inTransitOut: 0, said: NaN, gen: NO_GEN, seq: 0, decaysFrom: NaN, counted: 0 }) // a belief: says nothing of burns
  }

  /**
   * Cluster-wide remaining: this node's held plus what alive agreeing peers
   * hold. The peers' part (and their rates, for `scarcity`) is a sum over
   * every peer, taken by a walk and then kept current by each change to a
   * line it counted (`lineChanged`, `believeHeld`, `noSurplus`): at 200 nodes
   * and 100 keys a walk per key every half gossip interval was a sixth of
   * the simulator's time. A new walk is due when the set of counted peers may
   * have changed (Peers.version: a peer came alive, was added, restarted, or
   * changed rules or cluster) and every `WALK_EVERY` gossip intervals, which
   * drops peers that fell silent and the float error of the running sums.
   * The same walk keeps the key's donor candidates (`chooseDonors`).
   */
  clusterRemaining (ks: KeyState, nowMs: number): number {
    const x = ks.ext as KeyExt | null
    if (x !== null && this.current(ks, x, nowMs)) return ks.bucket.held + x.peersHeld
    let n = 0
    let r = 0
    const candidates: Peer[] = []
    // A glob key's home, found once per walk (a peer without a line holds the whole stock there, none elsewhere):
    // asking peerShare per peer costs two map lookups each, 5% of the simulator's time at 200 nodes and 100 keys.
    const home = ks.rule.glob ? homeOf(ks.key, this.seeds, this.homes) : undefined
    for (const p of this.peers.alive(nowMs)) {
      if (!agrees(p, ks)) continue
      const k = p.keys.get(ks.key)
      const held = k !== undefined ? k.held : ks.rule.glob ? (p.name === home ? ks.rule.stock : 0) : this.peerShare(p, ks)
      n += held
      if (held > DONOR_MIN) candidates.push(p)
      if (k !== undefined) k.counted = this.lineRate(k, nowMs)
      r += this.rateOf(held, k?.counted ?? 0)
    }
    // At a member, the members it does not hear, as a seed summed them (member-sums.ts).
    const others = otherMembers(this, ks, nowMs)
    if (others !== null) { n += others.held; r += others.rate }
    if (x !== null) { x.peersHeld = n; x.peersRate = r; x.peersHeldAt = nowMs; x.walkPeers = candidates; x.walkVersion = this.peers.version; x.walkHash = ks.rule.hash }
    return ks.bucket.held + n
  }

  /** Whether the key's sums from its last walk, kept current since, still stand (see clusterRemaining). */
  private current (ks: KeyState, x: KeyExt, nowMs: number): boolean {
    // At a member with the seeds' sums of the other members, walked at every read (over the seeds alone): the sums
    // are read as spent since they came (member-sums.ts otherMembers).
    if (x.msum !== null) return false
    return x.walkPeers !== null && x.walkVersion === this.peers.version && x.walkHash === ks.rule.hash && nowMs >= x.peersHeldAt && nowMs - x.peersHeldAt < WALK_EVERY * this.tuning.gossipIntervalMs
  }

  /**
   * A peer's rate for a key now: as it said, or, for a rate it said was
   * decaying (gossip `decay`), fallen by the half-life since (key-ext.ts
   * `decayed`). The running sum (`peersRate`) counts each line as read when
   * it changed (`counted`), so a change takes out exactly what it added, and is
   * walked again every WALK_EVERY intervals.
   */
  lineRate (k: PeerKey, nowMs: number): number {
    return decayed(k.rate, !Number.isNaN(k.decaysFrom), nowMs - k.decaysFrom, this.tuning.rateHalfLifeMs)
  }

  /** What a peer's line counts for in the rates' sum: a peer that answered `none` (rate Infinity) needs all it holds. */
  private rateOf (held: number, rate: number): number {
    return Number.isFinite(rate) ? rate : held * 1000 / this.tuning.horizonMs
  }

  /**
   * A counted peer's line changed from (held, rate) to (held2, rate2): the
   * key's running sums follow, if they are current and the peer is one the
   * walk counted (alive and agreeing; a peer that came alive since changed
   * the version, so the sums are walked again anyway).
   */
  private adjust (ks: KeyState, p: Peer, held: number, rate: number, held2: number, rate2: number, nowMs: number): void {
    const x = ks.ext as KeyExt | null
    if (x === null || !this.current(ks, x, nowMs) || !agrees(p, ks) || !this.peers.isAlive(p, nowMs)) return
    x.peersHeld += held2 - held
    x.peersRate += this.rateOf(held2, rate2) - this.rateOf(held, rate)
  }

  /** A peer's gossip replaced its line for a key (`old`: none before, so its pre-allocated share). */
  lineChanged (ks: KeyState, p: Peer, old: PeerKey | undefined, line: PeerKey, nowMs: number): void {
    if (line.held > DONOR_MIN && (old === undefined || old.held <= DONOR_MIN)) this.risen(ks, p)
    this.adjust(ks, p, old === undefined ? this.peerShare(p, ks) : old.held, old?.counted ?? 0, line.held, line.counted, nowMs)
  }

  /** A peer answered a want with `none`: until it says otherwise, it needs all it holds (rate Infinity). */
  noSurplus (ks: KeyState, peer: string, nowMs: number): void {
    const p = this.peers.get(peer)
    const k = p?.keys.get(ks.key)
    if (p === undefined || k === undefined) return
    this.adjust(ks, p, k.held, k.counted, k.held, Infinity, nowMs)
    k.rate = Infinity
    k.counted = Infinity
    k.decaysFrom = NaN
  }

  /** `p` was seen to hold a token or more of a key since the last walk (its gossip, or a push to it). */
  risen (ks: KeyState, p: Peer): void {
    const list = (ks.ext as KeyExt | null)?.walkPeers
    if (list != null && !list.includes(p)) list.push(p)
  }

  /**
   * How scarce a key's tokens are for the rest of the horizon: what the
   * cluster still holds over what all its nodes expect to need in that time
   * (their gossiped rates and this node's `ownRate`), at most 1. A node
   * asks for its rate times this: under contention it aims at its
   * proportional part of what is left, instead of twice its own need,
   * which let the nodes that asked first hoard tokens they then left
   * unspent at the window's end (uniform load at 200 nodes: 82% against a
   * static split's 90%).
   */
  scarcity (ks: KeyState, nowMs: number, ownRate: number): number {
    const remaining = this.clusterRemaining(ks, nowMs)
    const x = ks.ext as KeyExt | null
    const rate = ownRate + (x === null ? 0 : x.peersRate)
    const h = horizon(ks, this.tuning.horizonMs, nowMs, this.calendar) / 1000
    const need = rate * h
    return need > remaining && need > 0 ? Math.max(0, remaining) / need : 1
  }

  /** Whether `p` may give this node any of `key` (a peer without a share gives only what it owes: reclaim.ts). */
  mayAsk: (p: Peer, key: string) => boolean = () => true

  /**
   * The donors to ask together for `deficit` tokens: alive, agreeing peers
   * by surplus (for a burn owed here, counting what they keep in reserve for
   * burns like it) over what their own rate needs within the horizon,
   * largest first, as many as it takes for their surpluses to cover the
   * deficit, at most `max`. Peers gossip the rate they keep for (the lower
   * of their two averages), so a node that just went quiet shows its
   * surplus at once. One pass over the peers; only those with a surplus of
   * at least one token are sorted.
   *
   * (A probe of the largest holder when the surpluses fall short was tried:
   * moving-hot at N=10 gained 0.3 points, and keys100 at N=3 sent twice the
   * messages, 2,031 per node per second against 934. Not kept.)
   */
  chooseDonors (ks: KeyState, nowMs: number, deficit: number, max: number, forBurn = false): Array<[donor: Peer, surplus: number, order: number]> {
    const found: Array<[donor: Peer, surplus: number, order: number]> = []
    const h = horizon(ks, this.tuning.horizonMs, nowMs, this.calendar) / 1000
    // Largest surplus first, but each asker's order is its own: every surplus weighed by a factor from 0.5 to 1.5
    // drawn from (asker, donor, moment). Views are a gossip old, so with one order for all, every short node asked
    // the same few donors at once and most were answered `none` (uniform load at 200 nodes: 95% of wants).
    const salt = fmix32(this.nameHash(this.node) ^ Math.floor(nowMs))
    // The candidates of the last walk (walked again here if it is due) rather than every peer, checked
    // again now. A burn is paid from reserves, which a peer holding under a token may have too: every peer then.
    this.clusterRemaining(ks, nowMs)
    const pool = forBurn ? undefined : (ks.ext as KeyExt | null)?.walkPeers ?? undefined
    for (const p of pool ?? this.peers.alive(nowMs)) {
      // A fenced peer gives nothing (fence.ts): asking it would only wait out a `none`.
      // Nor one whose last wants brought nothing creditable (transfers.ts `wantOutcome`), until its backoff ends.
      if (p.leaving || p.fenced || nowMs < p.askAfter || (pool !== undefined && !this.peers.isAlive(p, nowMs)) || !agrees(p, ks) || !this.mayAsk(p, ks.key)) continue
      const e = p.keys.get(ks.key)
      let surplus = this.peerHeld(p, ks) - (e === undefined ? 0 : this.lineRate(e, nowMs)) * h
      // A burn is paid from what peers hold in reserve for it, however busy they are (transfers.ts).
      if (forBurn && e !== undefined && e.debts > 0) surplus = Math.max(surplus, Math.min(e.held, e.debts))
      if (surplus > DONOR_MIN) found.push([p, surplus, surplus * (0.5 + fmix32(this.nameHash(p.name) ^ salt) / 0x100000000)])
    }
    found.sort((a, b) => b[2] - a[2])
    let covered = 0
    let n = 0
    while (n < found.length && n < max && covered < deficit) covered += found[n++][1]
    found.length = n
    return found
  }

  private readonly hashes = new Map<string, number>()
  private nameHash (name: string): number {
    let h = this.hashes.get(name)
    if (h === undefined) {
      h = 0x811c9dc5
      for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193)
      this.hashes.set(name, h >>>= 0)
    }
    return h
  }

  /**
   * A glob key idle here, at a node that is not its home, goes back home (so
   * both ends can evict it), once its holding has been gossiped.
   */
  shouldReturnHome (ks: KeyState, x: KeyExt, nowMs: number, idleMs = this.tuning.idleReturnMs): boolean {
    if (!ks.rule.glob || ks.bucket.held < 1 || nowMs - x.lastDemandAt < idleMs) return false
    // Only once peers have heard what it holds: the home checks a push against what the giver said (transfers.ts).
    if (x.sentHeld !== ks.bucket.held) return false
    const home = homeOf(ks.key, this.seeds, this.homes)
    if (home === undefined || home === this.node) return false
    const p = this.peers.get(home)
    return p !== undefined && !p.leaving && !p.fenced && this.peers.isAlive(p, nowMs) && agrees(p, ks)
  }
}

