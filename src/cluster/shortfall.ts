/**
 * The shortfall of a key: the part of its stock that no live node this one
 * hears accounts for. Tokens do not vanish in a conserved-token model, so a
 * shortfall is tokens held by a node that crashed (and, after an unclean
 * restart, never come back), tokens in grants to an incarnation that ended,
 * or a cleanly stopped node's saved tokens while it is down. It rises at a
 * crash and falls back when the tokens return (a restart from saved state,
 * or, with reclaim, when the heir takes them: cluster-protocol.md, "Failure cases").
 *
 *     shortfall = max(0, stock − own custody − Σ alive agreeing peers' custody)
 *     custody   = held + outstanding + deferred + inTransitOut − owed
 *
 * `held + outstanding` is the node's bucket (spendable, and spent but not yet
 * returned); `deferred` the tokens it received that are not spendable yet;
 * `inTransitOut` the tokens in its own unacked grants (debited here; once
 * the receiver has credited them and until the ack, they count at both).
 * `owed` is a burn it still owes after a rule lowered its share: those
 * tokens are over the new stock, so they are not custody of it (the same
 * books the simulator's audit keeps, token-audit.ts).
 *
 * Peers' figures come from their gossip key lines (messages.ts, 8 fields).
 * A peer that never announced the key is taken at its pre-allocated share,
 * the same rule `ClusterView.peerHeld` uses (it has no state for the key, so
 * it would create it with that share). Peers not alive count for nothing:
 * that is how a crash shows. Peers that do not agree on the rule (another
 * hash, or another cluster configuration) count for nothing either: their
 * tokens are not shared with this node, so during a rule change a peer on
 * another version shows as shortfall until it agrees.
 *
 * It is an estimate, not an account:
 * - gossip rounds (whole tokens from 8 up, a tenth below) and is up to a
 *   gossip interval or two old; the giver's and the receiver's lines of a
 *   transfer need not arrive together, so for a moment it can count twice
 *   (hiding shortfall) or not at all (showing a token or two);
 * - a key line is sent when its custody moved by half a token
 *   (gossip-builder.ts), so a fraction may be unreported;
 * - a peer that restarted uncleanly and has not announced a glob key is
 *   still read at its pre-allocated share, which it no longer has (gossip
 *   does not say yet whether a node allocates): such a loss is hidden until
 *   it announces the key.
 * `stranded` (cluster-status.ts) is a different figure: what this node
 * knows was lost (its grants to ended epochs, what dead peers last said they
 * held); the shortfall needs no knowledge of who lost it.
 *
 * Pure: reads the core's books and peer view, changes nothing (it advances
 * the key's bucket to `nowMs`, which every reader does).
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { agrees } from './cluster-view.js'
import { deferredTotal, type KeyExt } from './key-ext.js'
import { otherMembers } from './member-sums.js'

/** What one node has of one key. */
export interface CustodyLine {
  held: number
  outstanding: number
  deferred: number
  inTransitOut: number
  owed: number
}

/** One peer as the shortfall sees it. */
export interface PeerCustody {
  alive: boolean
  /** Same cluster and same rule hash for this key. */
  agrees: boolean
  /** Its last key line, or undefined if it never announced the key. */
  line: CustodyLine | undefined
  /** Its pre-allocated share of the key: what it has if it never said. */
  share: number
}

export function custody (l: CustodyLine): number {
  return l.held + l.outstanding + l.deferred + l.inTransitOut - l.owed
}

function clamp (n: number, lo: number, hi: number): number {
  return n < lo ? lo : n > hi ? hi : n
}

/** What a peer counts for: its line's custody, bounded by ±stock (its own word), or its share if it never said. */
export function peerCustody (line: CustodyLine | undefined, share: number, stock: number): number {
  return line === undefined ? share : clamp(custody(line), -stock, stock)
}

/**
 * The shortfall from the figures (see the header). A peer's custody is its
 * own word: bounded by ±stock, so one bad line cannot swing the sum by more
 * than a stock. The result is within [0, stock].
 */
export function shortfall (stock: number, own: number, peers: Iterable<PeerCustody>): number {
  let n = own
  for (const p of peers) if (p.alive && p.agrees) n += peerCustody(p.line, p.share, stock)
  return clamp(stock - n, 0, stock)
}

/** This node's custody of a key now. */
export function ownCustody (core: Pick<ClusterCore, 'ledger'>, ks: KeyState, nowMs: number): number {
  ks.bucket.advance(nowMs)
  const x = ks.ext as KeyExt | null
  return custody({
    held: Math.max(0, ks.bucket.held),
    outstanding: ks.bucket.outstanding(nowMs),
    deferred: x === null ? 0 : deferredTotal(x),
    inTransitOut: core.ledger.inTransitOf(ks.key),
    owed: x === null ? 0 : x.burn
  })
}

/**
 * Whether this node can tell a key's shortfall: not at a member for a rule
 * decided at the seeds, which hears none of the seeds' key lines of it (the
 * members' copy leaves them out: cluster-protocol.md, "Members and forwarding"), so it
 * would read every seed at its pre-allocated share, a heir's inherited one
 * too. Such a member reports none for the key (status leaves the field out,
 * the metric counts 0); a seed's figure is the one to read.
 */
export function knowsShortfall (core: Pick<ClusterCore, 'seeds' | 'node'>, ks: KeyState): boolean {
  return ks.rule.config.decide !== 'seeds' || core.seeds.includes(core.node)
}

/**
 * The shortfall of a key this node has state for, as it sees the cluster
 * now: `shortfall` over its peer table, without building one (metrics sum
 * this over every key at each scrape). O(peers).
 */
export function keyShortfall (core: Pick<ClusterCore, 'ledger' | 'peers' | 'view'>, ks: KeyState, nowMs: number): number {
  const stock = ks.rule.stock
  let n = ownCustody(core, ks, nowMs)
  for (const p of core.peers.all()) {
    if (!core.peers.isAlive(p, nowMs) || !agrees(p, ks)) continue
    const line = p.keys.get(ks.key)
    n += peerCustody(line, line === undefined ? core.view.peerShare(p, ks) : 0, stock)
  }
  // At a member, the members it does not hear, as a seed summed them (member-sums.ts).
  n += otherMembers(core.view, ks, nowMs)?.custody ?? 0
  return clamp(stock - n, 0, stock)
}
