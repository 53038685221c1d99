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
import type { Decision } from '../core/types.js'
import { idOf, type SimNode } from './sim-node.js'
import type { SimReplication } from './sim-replication.js'
import type { VirtualCluster } from './virtual-cluster.js'
import { decodeRequest, encodeRequest } from '../cluster/request-codec.js'
import { decisionOf, decodeFans, decodeFwd, encodeFans, encodeFwd, type Fans, type Fwd } from '../cluster/forward-messages.js'
import { encodeCallFrame, splitCallFrame } from '../cluster/transport/framing.js'


export function sendRequest (vc: VirtualCluster, replication: SimReplication, sender: SimNode, core: ClusterCore, to: string, msg: Want | Grant | Ack): void {
  if (msg.t === 'grant') { vc.audit.granted(msg); vc.positions.granted(msg) }
  let settled = false
  const settle = (): boolean => {
    if (settled) return false
    settled = true
    return sender.core === core
  }
  const timeout = vc.opts.requestTimeoutMs ?? core.tuning.wantTimeoutMs
  vc.at(vc.now + timeout, () => { if (settle()) core.onRequestFailed(msg, to, vc.mono(sender.name)) })
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

/**
 * A decision at a seed that counts as an admission: the seed, what it
 * decided, and `credit` when a member handed out a token of the seed's
 * credit (forward-credit.ts: the seed spent it, under its lease, when it
 * gave it; the oracle places it on the seed's calendar, now).
 */
export type Decided = (seed: string, d: Decision, credit?: boolean) => void

/**
 * A member's acquire of a `decide: "seeds"` rule (forward.ts), as the
 * daemon carries it: the `fwd` to the seed over the virtual network, on the
 * member's call session (counted with its call id, transport/calls.ts),
 * decided there by the seed's core when it arrives (`decided`: the seed and
 * its decision, at that moment: what the oracle counts), the `fans` back;
 * `late` gets the member's answer (the seed's decision, or a denial at the
 * member's timeout). Nothing is answered to a member that crashed meanwhile.
 */
export function sendForward (vc: VirtualCluster, sender: SimNode, core: ClusterCore, to: string, msg: Fwd,
  decided: Decided, late: (d: Decision) => void, sentMs: number): void {
  let settled = false
  const settle = (): boolean => {
    if (settled) return false
    settled = true
    return sender.core === core
  }
  // The seed may hold it up to its wait for tokens; then the answer's way back (as cluster-node.ts forward).
  vc.at(vc.now + (msg.wait ?? 0) + core.tuning.forwardTimeoutMs, () => {
    if (!settle()) return
    core.forwarding.unanswered(to, vc.mono(sender.name))
    late(core.forwarding.failed(msg))
  })
  const send = (req: Fwd): void => {
    const bytes = onSession(encodeFwd(req))
    vc.count(sender.name, bytes.length, 'fwd')
    vc.transmit(sender.name, to, bytes, () => {
      const target = vc.nodes.get(to)
      const tc = target?.core
      if (target === undefined || tc == null || target.state !== 'up') return
      const f = tc.forwarding
      const from = idOf(sender.name)
      const m = decodeFwd(splitCallFrame(bytes).data, f.memberOf(from))
      // Sent on to the key's other seed: decided there, and counted there, when it decides (`decided` goes with it).
      let sentOn = false
      const answer = (reply: Fans): void => {
        if (reply.code === undefined && !sentOn) {
          const rule = tc.limiter.ruleFor(m.key)
          decided(to, decisionOf(reply, rule?.stock ?? 0, rule?.name ?? ''))
        }
        const back = onSession(encodeFans(f.reply(m, from, reply, vc.mono(to))))
        vc.count(to, back.length, 'fans')
        vc.transmit(to, sender.name, back, () => {
          const r = decodeFans(splitCallFrame(back).data)
          if (settled || sender.core !== core) return
          // The seed did not know the key's number (it restarted): once more, naming the key (as node-requests.ts).
          const again = core.forwarding.again(req, r, to)
          if (again !== null) { send(again); return }
          if (!settle()) return
          late(core.forwarding.answered(req, r, to, sentMs, vc.mono(sender.name)))
        })
      }
      // First, in the order they come: a name binds, a number finds its key (forward-names.ts).
      const unnamed = f.resolve(m, from)
      if (unnamed !== null) { answer(unnamed); return }
      // The invariant key numbers stand on: a seed never reads a live member's number as another key.
      if (m.key !== req.key && sender.core === core) throw new Error(`${to} read ${sender.name}'s key number ${req.ref ?? '-'} as "${m.key}", sent for "${req.key}"`)
      // With a wait, as the seed's own client's (node-requests.ts serveForward): held for tokens, answered when decided.
      const refusal = f.admit(m, from)
      // Out of tokens here while the key's other seed holds some: on to it, as the seed's own client's (node-requests.ts).
      const on = refusal === null && f.sendsOn(m, vc.mono(to))
      if ((m.wait === undefined && !on) || refusal !== null) {
        answer(refusal ?? f.serve(m, from, vc.mono(to)))
        vc.persist(target, tc)
        return
      }
      let d: ReturnType<VirtualCluster['acquire']>
      try {
        d = vc.acquire(to, m.key, m.count, late2 => { answer(on ? f.sentOn(late2, m, vc.mono(to)) : f.decided(late2)) }, on ? decided : undefined, m.wait ?? 0, !on)
      } catch (error) {
        answer(f.decided({ error }))
        return
      }
      sentOn = d === 'forwarded'
      if (d !== undefined && d !== 'waiting' && d !== 'forwarded') answer(f.decided(d))
      vc.persist(target, tc)
    })
  }
  send(msg)
}

/**
 * A call's payload as its session carries it, counted whole: a varint
 * length, the call id and the payload (transport/framing.ts). The id is 0:
 * a member's session reuses the lowest free id (calls.ts), below 128 while
 * fewer than 128 calls are in flight on it, so one byte as here.
 */
function onSession (payload: Uint8Array): Uint8Array {
  return encodeCallFrame(0, payload)
}
