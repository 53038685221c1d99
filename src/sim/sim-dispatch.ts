/**
 * The virtual network's wires, as the daemon's transport carries bytes
 * (cluster-node.ts): a gossip is published once (encoded by the daemon's
 * gossip-codec.ts, decoded and validated once) and delivered to every other
 * running node, each receiver with its own copy's delivery time, loss,
 * duplication and reordering; a request, a reply or a call is one
 * `transmit` (sim-ports.ts, for the effects interpreter node-effects.ts).
 * The audit sees every copy of a grant enter and leave the network.
 *
 * Apart from virtual-cluster.ts, which owns the nodes, their clocks and
 * lifecycles: this file only moves bytes between them. Every random draw
 * comes from the cluster's one seeded Rng, in the order of the calls, so a
 * run is still determined by its seed.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Gossip, Grant, Hb } from '../cluster/messages.js'
import { decodeGossip, encodeGossip } from '../cluster/gossip-codec.js'
import { sampleLatency } from './network.js'
import { gossipAudience } from '../cluster/member-sums.js'
import { idOf } from './sim-node.js'
import type { VirtualCluster } from './virtual-cluster.js'

/**
 * A node's gossip published (sim-ports.ts `publish`): once, as pubsub does,
 * and delivered to every other running node it reaches, each copy with its
 * own delivery time, loss, duplication and reordering.
 */
export function published (vc: VirtualCluster, from: string, core: ClusterCore, msg: Gossip | Hb, members: Gossip | Hb | undefined): void {
  // Published once (as pubsub does), decoded and validated once, delivered to each peer.
  const whole = encoded(vc, from, msg)
  vc.gossipFields.sample(msg)
  if (whole.m.t !== 'gossip' && whole.m.t !== 'hb') return
  vc.leases?.published(core, whole.m, vc.now)
  // A member's gossip reaches the seeds alone (the daemon's members' topic; member-sums.ts). A seed's whole
  // gossip reaches the seeds; its members' copy, published apart, the members (member-gossip.ts).
  const seedsOnly = gossipAudience(from, core.seeds) === 'seeds'
  const copy = seedsOnly || members === undefined ? null : members === msg ? whole : encoded(vc, from, members)
  if (copy !== null && members !== undefined) vc.copyFields.sample(members)
  for (const [to, target] of vc.nodes) {
    if (to === from || target.core === null) continue
    const seed = core.msums.isSeed(to)
    if (seedsOnly && !seed) continue
    // Without a copy (no member alive in the seed's view), a seed's gossip does not reach the members either.
    const g = seedsOnly || seed ? whole : copy
    if (g === null || (g.m.t !== 'gossip' && g.m.t !== 'hb')) continue
    const m = g.m
    vc.transmit(from, to, g.bytes, () => {
      const c = vc.nodes.get(to)?.core
      if (c == null) return
      if (m.t === 'gossip') vc.leases?.received(c, m)
      c.onGossip(m, idOf(from), vc.mono(to))
    }, undefined, true)
  }
}

/** A gossip (or a seed's members' copy of one), published (counted as sent) and decoded once, as pubsub does. */
function encoded (vc: VirtualCluster, from: string, g: Gossip | Hb): { bytes: Uint8Array, m: ReturnType<typeof decodeGossip> } {
  const bytes = encodeGossip(g)
  vc.count(from, bytes.length, 'gossip')
  return { bytes, m: decodeGossip(bytes) }
}

/**
 * Carry one copy (or two, or none) of an encoded message from -> to.
 * `deadline`: when the sender of a request gives up on it (its timeout).
 */
export function transmit (vc: VirtualCluster, from: string, to: string, bytes: Uint8Array, deliver: () => void, grant?: Grant, gossip = false, deadline = Infinity): void {
  if ((gossip ? vc.cuts.hasGossip(from, to) : vc.cuts.has(from, to)) || vc.rng.chance(vc.network.loss)) return
  const copies = vc.rng.chance(vc.network.duplicate) ? 2 : 1
  for (let i = 0; i < copies; i++) {
    if (grant !== undefined) vc.audit.copies(grant, 1)
    const extra = gossip ? 0 : vc.network.directExtraMs ?? 0
    const arrive = (): void => {
      const n = vc.nodes.get(to)
      // A paused (SIGSTOP) receiver: a gossip is lost (pubsub is best effort, and a peer that reads nothing falls
      // out of the mesh); a request or reply waits in its stream and is read after its first tick on resume. Unless
      // its sender timed out first: it reset the stream (or hung up: a peer silent for long falls out of the gossip
      // mesh, libp2p-transport.ts resetLostGossipPeers), and the unread data goes with it (chaos 3+2 seed 10: grants
      // to a member paused past reclaimMs never arrived).
      if (n !== undefined && vc.paused(to)) {
        if (gossip || n.pausedUntil + 1 > deadline) { if (grant !== undefined) vc.audit.copies(grant, -1); return }
        vc.at(n.pausedUntil + 1, arrive)
        return
      }
      if (grant !== undefined) vc.audit.copies(grant, -1)
      if (n !== undefined) n.recvBytes += bytes.length
      deliver()
    }
    // A lossy TCP link (FaultSpec.chaos): a lost segment comes again after a retransmission timeout.
    const late = vc.rng.chance(vc.cuts.lateChance(from, to)) ? 200 + vc.rng.next() * 1000 : 0
    vc.at(vc.now + sampleLatency(vc.network, vc.rng) + extra + late, arrive)
  }
}
