/**
 * What this node has heard of a peer's messages, as against what the peer
 * sent: the run of its messages applied here (Peer.runFrom, Peer.missing)
 * and whether that run holds the whole of the last full-sync pass the peer
 * names (Gossip.sync). Rule changes and carried debts are settled on it
 * (rule-change.ts, caution.ts, peers.ts), never on `pending` alone.
 */
import type { Peer } from './peers.js'

/**
 * Whether this node holds a line, said under the peer's current rules, for
 * every key the peer had when its last complete pass began: the peer's
 * newest message names that pass (`sync`), and every message from the
 * pass's first to the newest was applied here. `pending` clears when the
 * peer has *sent* every key; this is what this node has *heard*. A lost
 * message makes it false until the peer's next pass ends (at most
 * `fullSyncEvery` gossips later) and arrives whole.
 */
export function heardAll (p: Peer): boolean {
  return p.sync > 0 && p.runFrom <= p.sync && !p.missing.some(s => s >= p.sync)
}

/** Most messages a run may be missing before it is given up (reordering is by a few; a loss is waited for). */
const MAX_MISSING = 16

/**
 * Account for message `seq` of `p`'s epoch (before `p.seq` moves): extend,
 * or restart, the run; fill a gap. `prev`: a seed's members' copy names the
 * copy it published before (Gossip.prev); the seqs after it were never
 * published to this node, so only those up to it can be missing.
 */
export function track (p: Peer, seq: number, prev?: number): void {
  if (seq <= p.seq) {
    const i = p.missing.indexOf(seq)
    if (i >= 0) p.missing.splice(i, 1)
    return
  }
  // Seqs before the newest pass named can no longer matter (heardAll reads only from p.sync on).
  if (p.missing.length > 0) p.missing = p.missing.filter(s => s >= p.sync)
  const last = prev === undefined ? seq - 1 : Math.min(prev, seq - 1)
  if (last - p.seq + p.missing.length > MAX_MISSING) {
    p.runFrom = seq
    p.missing = []
    return
  }
  for (let s = p.seq + 1; s <= last; s++) p.missing.push(s)
}
