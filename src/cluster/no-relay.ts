/**
 * The no-relay rule (reclaim-design.md §11.3): an account without a
 * pre-allocated share gives a peer at most what it holds of that peer's
 * account's tokens, so whatever a dead account held, it held of some
 * survivor's tokens, and only that survivor lent them (reclaim.ts settles
 * on that). Pure reads of the core's positions, what it restored from a
 * predecessor's journal or a dead seed's copy, and its ledger.
 */
import type { ClusterCore } from './cluster-core.js'
import type { Peer } from './peers.js'

/**
 * The most this node may give `p` of `key` (Infinity with a share): what it
 * holds of p's account's tokens, less its unacked grants to p.
 */
export function giveCap (c: ClusterCore, p: Peer, key: string): number {
  // With leases off nothing is ever reclaimed, so nothing needs the rule.
  if (c.reclaim.hasBase || !c.tuning.leases) return Infinity
  return Math.max(0, holdsOf(c, p, key) - c.ledger.inTransitTo(p.name, key))
}

/** Whether `p` (without a share) may give this node any of `key`: it holds some of our tokens, as our books tell. */
export function mayAsk (c: ClusterCore, p: Peer, key: string): boolean {
  return p.alloc || !c.tuning.leases || holdsOf(c, p, key) <= -1
}

/** What `p` may hold of this node's tokens of `key`: what it was given, acked or not, less what it gave back. */
export function lentTo (c: ClusterCore, p: Peer, key: string): number {
  return Math.max(0, -holdsOf(c, p, key)) + c.ledger.inTransitTo(p.name, key)
}

/** What this node holds of `p`'s account's tokens of `key` (negative: what p holds of ours), acked grants only. */
function holdsOf (c: ClusterCore, p: Peer, key: string): number {
  let n = 0
  for (const e of [p.epoch, ...p.carries]) n += c.positions.of(p.name, e, key) + (c.reclaim.restored.get(p.name)?.get(e)?.get(key) ?? 0)
  return n
}
