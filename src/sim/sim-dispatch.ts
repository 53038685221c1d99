/**
 * A node's outbound messages on the virtual network, as the daemon's
 * transport carries them (cluster-node.ts): a gossip is published once
 * (encoded by the daemon's gossip-codec.ts, decoded and validated once)
 * and delivered to every other running node, each receiver with its own
 * copy's delivery time, loss, duplication and reordering; a journal copy or
 * read goes through sim-replication.ts, a want or a pushed grant through
 * sim-requests.ts. The audit sees every copy of a grant enter and leave the
 * network.
 *
 * Apart from virtual-cluster.ts, which owns the nodes, their clocks and
 * lifecycles: this file only moves bytes between them. Every random draw
 * comes from the cluster's one seeded Rng, in the order of the calls, so a
 * run is still determined by its seed.
 */
import type { Outbound } from '../cluster/cluster-core.js'
import type { Gossip, Grant, Hb } from '../cluster/messages.js'
import { decodeGossip, encodeGossip } from '../cluster/gossip-codec.js'
import { sampleLatency } from './network.js'
import { gossipAudience } from '../cluster/member-sums.js'
import { idOf } from './sim-node.js'
import type { SimReplication } from './sim-replication.js'
import { sendRequest } from './sim-requests.js'
import type { VirtualCluster } from './virtual-cluster.js'

/** Carry a node's outbound messages over the network (after persisting its journal, as the daemon does). */
export function dispatch (vc: VirtualCluster, replication: SimReplication, from: string, out: Outbound[]): void {
  const sender = vc.nodes.get(from)
  const core = sender?.core
  if (sender === undefined || core == null) return
  vc.persist(sender, core)
  for (const o of out) {
    if (o.kind === 'gossip') {
      // Published once (as pubsub does), decoded and validated once, delivered to each peer.
      const whole = published(vc, from, o.msg)
      vc.gossipFields.sample(o.msg)
      if (whole.m.t !== 'gossip' && whole.m.t !== 'hb') continue
      vc.leases?.published(core, whole.m, vc.now)
      // A member's gossip reaches the seeds alone (the daemon's members' topic; member-sums.ts). A seed's whole
      // gossip reaches the seeds; its members' copy, published apart, the members (member-gossip.ts).
      const seedsOnly = gossipAudience(from, core.seeds) === 'seeds'
      const copy = seedsOnly || o.members === undefined ? null : o.members === o.msg ? whole : published(vc, from, o.members)
      if (copy !== null && o.members !== undefined) vc.copyFields.sample(o.members)
      for (const [to, target] of vc.nodes) {
        if (to === from || target.core === null) continue
        const seed = core.msums.isSeed(to)
        if (seedsOnly && !seed) continue
        // Without a copy (no member alive in the seed's view), a seed's gossip does not reach the members either.
        const g = seedsOnly || seed ? whole : copy
        if (g === null || (g.m.t !== 'gossip' && g.m.t !== 'hb')) continue
        const msg = g.m
        vc.transmit(from, to, g.bytes, () => {
          const c = vc.nodes.get(to)?.core
          if (c == null) return
          if (msg.t === 'gossip') vc.leases?.received(c, msg)
          c.onGossip(msg, idOf(from), vc.mono(to))
        }, undefined, true)
      }
    } else if (o.kind === 'replicate') {
      replication.send(sender, core, o.to, o.msg, o.z)
    } else if (o.kind === 'jget') {
      replication.read(sender, core, o.to, o.msg)
    } else {
      sendRequest(vc, replication, sender, core, o.to, o.msg)
    }
  }
}

/** A gossip (or a seed's members' copy of one), published (counted as sent) and decoded once, as pubsub does. */
function published (vc: VirtualCluster, from: string, g: Gossip | Hb): { bytes: Uint8Array, m: ReturnType<typeof decodeGossip> } {
  const bytes = encodeGossip(g)
  vc.count(from, bytes.length, 'gossip')
  return { bytes, m: decodeGossip(bytes) }
}

/** Carry one copy (or two, or none) of an encoded message from -> to. */
export function transmit (vc: VirtualCluster, from: string, to: string, bytes: Uint8Array, deliver: () => void, grant?: Grant, gossip = false): void {
  if ((gossip ? vc.cuts.hasGossip(from, to) : vc.cuts.has(from, to)) || vc.rng.chance(vc.network.loss)) return
  const copies = vc.rng.chance(vc.network.duplicate) ? 2 : 1
  for (let i = 0; i < copies; i++) {
    if (grant !== undefined) vc.audit.copies(grant, 1)
    const extra = gossip ? 0 : vc.network.directExtraMs ?? 0
    const arrive = (): void => {
      const n = vc.nodes.get(to)
      // A paused (SIGSTOP) receiver: a gossip is lost (pubsub is best effort, and a peer that reads nothing falls
      // out of the mesh); a request or reply waits in its stream and is read after its first tick on resume.
      if (n !== undefined && vc.paused(to)) {
        if (gossip) { if (grant !== undefined) vc.audit.copies(grant, -1); return }
        vc.at(n.pausedUntil + 1, arrive)
        return
      }
      if (grant !== undefined) vc.audit.copies(grant, -1)
      if (n !== undefined) n.recvBytes += bytes.length
      deliver()
    }
    vc.at(vc.now + sampleLatency(vc.network, vc.rng) + extra, arrive)
  }
}
