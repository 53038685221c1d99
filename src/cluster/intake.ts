/**
 * Messages in: what the core does with a peer's gossip, want, grant, and the
 * replies (or failures) of its own requests. Split from cluster-core.ts so
 * the state machine's local decisions and its message intake each stay one
 * file; still pure (`nowMs` passed in, outbound messages returned).
 *
 * Trust: every message names a node, and is acted on only if that name is
 * bound to the authenticated peer id it came from (membership.ts).
 */
import type { ClusterCore } from './cluster-core.js'
import { ext } from './key-ext.js'
import type { HeardEntry } from './lease.js'
import type { Ack, Gossip, Grant, None, Want } from './messages.js'
import type { Peer } from './peers.js'
import type { Verdict } from './membership.js'

/**
 * A gossip signed by peer id `from`. Taken only if its name is bound to
 * that id (membership.ts); otherwise dropped, and its name never enters
 * the peer table. Returns the verdict (the driver logs refusals).
 */
export function onGossip (c: ClusterCore, g: Gossip, from: string, nowMs: number): Verdict {
  if (g.node === c.node || c.phase === 'stopped') return 'ok'
  const verdict = c.membership.check(g.node, from, true)
  if (verdict !== 'ok') return verdict
  if (c.seeds.includes(g.node) && g.members !== undefined) c.membership.attest(g.node, g.members)
  const o = c.peers.observe(g, c.node, c.epoch, nowMs, c.calendar.at(nowMs))
  if (o === null) return verdict
  const p = c.peers.get(g.node) as Peer
  if (o.restartedFrom !== undefined) {
    strand(c, c.ledger.peerEpoch(g.node, g.epoch))
    c.ledger.giverEpoch(g.node, g.epoch)
  }
  // A peer we have not heard in this epoch needs every key, not just a delta.
  if (o.isNew || o.restartedFrom !== undefined) c.gossip.requestFullSync()
  c.ledger.ack(g.node, g.epoch, p.appliedFromMe)
  if (g.heard !== undefined && p.sameCluster) echoed(c, g.node, g.heard, nowMs)
  return verdict
}

/** A voter's echoes: the one naming this incarnation extends our lease (lease.ts). */
function echoed (c: ClusterCore, voter: string, heard: readonly HeardEntry[], nowMs: number): void {
  if (!c.fence.quorum.isVoter(voter)) return
  for (const [node, inc, seq] of heard) {
    if (node !== c.node || inc !== c.incarnation) continue
    if (c.fence.lease.echoed(voter, seq)) c.fenced(nowMs)
    return
  }
}

/** Tokens of grants that can no longer be applied (their receiver's epoch ended): counted per key as stranded. */
export function strand (c: ClusterCore, lost: Map<string, number>): void {
  for (const [k, n] of lost) {
    const ks = c.limiter.existing(k)
    if (ks !== undefined) ext(ks).stranded += n
  }
}

/** Forget peers that left for good a while ago (their debts stay as legacy): memory stays flat over joins and leaves. */
export function forgetDeparted (c: ClusterCore, nowMs: number): void {
  for (const p of [...c.peers.all()]) {
    if (!p.leaving || nowMs - p.lastHeard < c.tuning.forgetAfterMs) continue
    strand(c, c.ledger.forgetPeer(p.name))
    c.peers.forget(p.name)
    c.membership.release(p.name)
  }
}

/** A want from peer id `from`: served only if its name is bound to `from`. */
export function onWant (c: ClusterCore, w: Want, from: string, nowMs: number): Grant | None {
  if (c.membership.check(w.node, from) !== 'ok') return c.transfers.none()
  return c.transfers.onWant(w, nowMs)
}

/** A pushed grant from peer id `from`: credited only if its giver's name is bound to `from`. */
export function onGrant (c: ClusterCore, g: Grant, from: string, nowMs: number): Ack {
  if (c.membership.check(g.node, from) !== 'ok') return c.transfers.ack(g, 0)
  return c.transfers.onGrant(g, nowMs)
}

/** The reply to a request this node sent. Every request gets exactly one reply or failure. */
export function onReply (c: ClusterCore, req: Want | Grant, reply: Grant | Ack | None, nowMs: number): void {
  settled(c)
  c.transfers.onReply(req, reply, nowMs)
}

/** A request got no reply. A want may be retried elsewhere; a grant is resent by the ledger. */
export function onRequestFailed (c: ClusterCore, req: Want | Grant, _nowMs: number): void {
  settled(c)
  if (req.t === 'want') {
    const ks = c.limiter.existing(req.key)
    if (ks !== undefined) ext(ks).wantSentAt = -Infinity
  }
}

function settled (c: ClusterCore): void {
  if (c.inflight > 0) c.inflight--
}
