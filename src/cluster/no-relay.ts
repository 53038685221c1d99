/**
 * The no-relay rule (cluster-protocol.md, "Members and forwarding"): an account without a
 * pre-allocated share gives a peer at most what it holds of that peer's
 * account's tokens, so whatever a dead account held, it held of some
 * survivor's tokens, and only that survivor lent them (reclaim.ts settles
 * on that). The receiving side holds members to it (`mayReturn`,
 * grant-checks.ts): a member's grant is credited only against this node's
 * own books of what it lent that member, so a member's word never moves a
 * token (the threat model in operations.md). Pure reads of the core's
 * positions, what it restored from a predecessor's journal or a dead seed's
 * copy, and its ledger.
 *
 * With leases off the rule holds too: nothing is reclaimed then, but a
 * receiver still needs its books to bound what a member may give it.
 */
import type { ClusterCore } from './cluster-core.js'
import type { Peer } from './peers.js'

/**
 * The most this node may give `p` of `key` (Infinity with a share): what it
 * holds of p's account's tokens, less its unacked grants to p.
 */
export function giveCap (c: ClusterCore, p: Peer, key: string): number {
  if (c.reclaim.hasBase) return Infinity
  return Math.max(0, holdsOf(c, p, key) - c.ledger.inTransitTo(p.name, key))
}

/** Whether `p` (without a share) may give this node any of `key`: it holds some of our tokens, as our books tell. */
export function mayAsk (c: ClusterCore, p: Peer, key: string): boolean {
  return p.alloc || holdsOf(c, p, key) <= -1
}

/**
 * The most `p`, without a share, may give this node of `key`: what it holds
 * of this node's tokens as this node's books say (what we gave it, acked
 * or in transit, less what it gave back, with what we restored of its
 * earlier epochs). The mirror of `giveCap` at p: an honest p never gives
 * more. Each credit from p lowers it at once (Positions.received), so two
 * grants in a row can't both take the same tokens; a grant of p's that
 * arrives before our ack of a grant to it is still counted against the
 * grant in transit, not twice.
 */
export function mayReturn (c: ClusterCore, p: Peer, key: string): number {
  // Grants to an ended epoch of p that wait for its restart's marks are in transit too: its books may hold them.
  return Math.max(0, c.ledger.inTransitTo(p.name, key) + c.reclaim.marks.heldFor(p.name, key) - holdsOf(c, p, key))
}

/** What `p` may hold of this node's tokens of `key`: what it was given, acked or not, less what it gave back. */
export function lentTo (c: ClusterCore, p: Peer, key: string): number {
  return Math.max(0, -holdsOf(c, p, key)) + c.ledger.inTransitTo(p.name, key)
}

/**
 * What this node holds of `p`'s account's tokens of `key` (negative: what p
 * holds of ours), acked grants only: its current epoch's account and the
 * ones it carries (`carries[i]` is incarnation `inc - 1 - i`: each restart
 * carries the last), less any carried incarnation settled here. A settled
 * incarnation's account went to its heir or its lenders (reclaim-settle.ts),
 * and p dropped its books when it learned (reclaim.ts `aboutMe`), though it
 * still names it: counted, what this node held of that dead account (a
 * heir's estate can restore it after the settlement) hid what p holds of
 * ours now, and p's honest returns were refused.
 */
function holdsOf (c: ClusterCore, p: Peer, key: string): number {
  let n = 0
  const add = (e: string): void => { n += c.positions.of(p.name, e, key) + (c.reclaim.restored.get(p.name)?.get(e)?.get(key) ?? 0) }
  add(p.epoch)
  p.carries.forEach((e, i) => { if (!c.reclaim.isSettled(p.name, p.inc - 1 - i)) add(e) })
  return n
}
