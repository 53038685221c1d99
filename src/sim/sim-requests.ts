/**
 * A want, a pushed grant or an ack over the virtual network, and its reply, as the
 * daemon's transport carries them (cluster-node.ts): latency, loss and
 * duplicates from the network model; the receiver persists its journal
 * before it answers, and a grant leaves its giver only once its give is
 * covered by the journal copies (sim-replication.ts). Every request gets
 * exactly one onReply or onRequestFailed.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Ack, Grant, None, Want } from '../cluster/messages.js'
import { idOf, type SimNode } from './sim-node.js'
import type { SimReplication } from './sim-replication.js'
import type { VirtualCluster } from './virtual-cluster.js'
import { decodeRequest, encodeRequest } from '../cluster/request-codec.js'


export function sendRequest (vc: VirtualCluster, replication: SimReplication, sender: SimNode, core: ClusterCore, to: string, msg: Want | Grant | Ack): void {
  if (msg.t === 'grant') { vc.audit.granted(msg); vc.positions.granted(msg) }
  let settled = false
  const settle = (): boolean => {
    if (settled) return false
    settled = true
    return sender.core === core
  }
  const timeout = vc.opts.requestTimeoutMs ?? core.tuning.wantTimeoutMs
  vc.at(vc.now + timeout, () => { if (settle()) core.onRequestFailed(msg, vc.mono(sender.name)) })
  const bytes = encodeRequest(msg)
  vc.count(sender.name, bytes.length, msg.t)
  const send = (): void => vc.transmit(sender.name, to, bytes, () => {
    const target = vc.nodes.get(to)
    const tc = target?.core ?? target?.lingering
    if (target === undefined || tc == null) return
    const m = decodeRequest(bytes)
    let reply: Grant | Ack | None | undefined
    if (m.t === 'want') reply = tc.onWant(m, idOf(sender.name), vc.mono(to))
    else if (m.t === 'grant') reply = tc.onGrant(m, idOf(sender.name), vc.mono(to))
    else if (m.t === 'ack' && m.toEpoch !== undefined) reply = tc.onAck(m, idOf(sender.name), vc.mono(to))
    if (target.core === tc) vc.persist(target, tc)
    if (m.t === 'grant') {
      vc.audit.settle()
      if (target.core === tc) vc.poll(target, tc)
    }
    if (reply === undefined) return
    if (reply.t === 'grant') { vc.audit.granted(reply); vc.positions.granted(reply) }
    const back = encodeRequest(reply)
    vc.count(to, back.length, reply.t)
    const answer = (): void => vc.transmit(to, sender.name, back, () => {
      const r = decodeRequest(back)
      if (r.t !== 'grant' && r.t !== 'ack' && r.t !== 'none') return
      if (!settle()) return
      core.onReply(msg, r, vc.mono(sender.name))
      vc.persist(sender, core)
      if (r.t === 'grant') { vc.audit.settle(); vc.poll(sender, core) }
    }, reply.t === 'grant' ? reply : undefined)
    if (reply.t === 'grant' && target.core === tc) replication.whenCovered(target, tc, reply, answer)
    else answer()
  }, msg.t === 'grant' ? msg : undefined)
  if (msg.t === 'grant') replication.whenCovered(sender, core, msg, send)
  else send()
}
