/**
 * Messages in: what the core does with a peer's gossip, want, grant, and the
 * replies (or failures) of its own requests. Split from cluster-core.ts so
 * the state machine's local decisions and its message intake each stay one
 * file; still pure (`nowMs` passed in, outbound messages returned).
 *
 * Trust: every message names a node, and is acted on only if that name is
 * bound to the authenticated peer id it came from (membership.ts). Replies
 * are bound by the driver: they come on the stream it opened to the peer id
 * bound to the name it asked, and must name that node.
 *
 * New epochs. Every message names its sender's incarnation. A gossip, or a
 * want, grant, ack or none, from a newer incarnation than the one known
 * (Peers.newer: a higher `inc`, or the same under another epoch once the
 * known one fell silent) ends the old epoch at once: grants to it can never
 * be applied (they wait for its restart's marks, or are stranded without
 * them: estate-marks.ts), and its applied marks go. Without
 * the requests' evidence, a giver kept resending to a receiver's dead epoch,
 * and a receiver kept answering `old-epoch` to a restarted giver, until a
 * gossip came (docs/design/2026-11-reclaim.md, findings 2 and 3).
 */
import type { ClusterCore } from './cluster-core.js'
import { ext } from './key-ext.js'
import type { HeardEntry } from './lease.js'
import { CLUSTER_VERSION, type Ack, type Gossip, type Grant, type Hb, type None, type Want } from './messages.js'
import type { Jack, Jrep } from './replica-messages.js'
import type { ReplicaChange } from './replica-store.js'
import { replicaGroup } from './replication.js'
import type { Peer } from './peers.js'
import type { Verdict } from './membership.js'

/**
 * A gossip signed by peer id `from`. Taken only if its name is bound to
 * that id (membership.ts); otherwise dropped, and its name never enters
 * the peer table. Returns the verdict (the driver logs refusals).
 */
export function onGossip (c: ClusterCore, m: Gossip | Hb, from: string, nowMs: number): Verdict {
  if (m.node === c.node || c.phase === 'stopped') return 'ok'
  // An hb is the sender's last whole gossip again, with its own seq and time; one this node cannot place is dropped
  // as a lost message (gossip-repeat.ts). Read so, it goes the whole gossip's way, the membership check first.
  const r = c.gossip.repeat.reader
  const g = m.t === 'hb' ? r.expand(m) : m
  if (g === null) return 'ok'
  const verdict = c.membership.check(g.node, from, true, nowMs)
  if (verdict !== 'ok') return verdict
  // Kept only from the peer id bound to its name: a peer speaking in another's name cannot make that node's hbs unreadable.
  if (m.t === 'gossip') r.whole(m)
  // A settled dead incarnation (reclaim.ts) that speaks again is a cut-off process: what it had is credited elsewhere.
  if (c.reclaim.isSettled(g.node, g.inc)) { c.reclaim.sawZombie(g.node, nowMs); return verdict }
  if (c.seeds.includes(g.node) && g.members !== undefined) {
    c.membership.attest(g.node, g.members)
    c.membership.noteRefusals(g.node, g.refused ?? [])
  }
  const o = c.peers.observe(g, c.node, c.epoch, nowMs, c.calendar.at(nowMs))
  if (o === null) return verdict
  const p = c.peers.get(g.node) as Peer
  if (o.restartedFrom !== undefined) endedEpoch(c, g.node, g.epoch, nowMs, o.restartedFrom)
  // A peer we have not heard in this epoch needs every key, not just a delta.
  else if (o.isNew) c.gossip.requestFullSync()
  // A seed new here, restarted or back (a healed cut) may not have heard this node lately: gossip at the usual pace a while.
  if (o.isNew || o.cameBack === true || o.restartedFrom !== undefined) {
    if (c.seeds.includes(g.node)) c.gossip.seedReturned(nowMs)
    // A member new here, restarted or back should hear this seed soon, to route its acquires (member-copies.ts).
    else c.gossip.copies.memberReturned(nowMs + c.tuning.aliveTimeoutMs)
  }
  c.positions.acked(c.ledger.ack(g.node, g.epoch, p.appliedFromMe))
  // Attestations first: a voter that attests carried books does not lease this incarnation (reclaim.ts).
  if (g.attest !== undefined && p.sameCluster) c.reclaim.onAttest(g.node, g.attest, nowMs)
  if (g.estates !== undefined && p.sameCluster) c.heir.onEstates(g.node, g.estates)
  if (g.estateMarks !== undefined && p.sameCluster) c.reclaim.marks.onMarks(g.node, g.epoch, g.estateMarks, nowMs)
  if (g.deadApplied !== undefined && p.sameCluster) c.reclaim.returns.onReports(g.node, g.epoch, g.deadApplied, nowMs)
  const echo = g.heard !== undefined && p.sameCluster ? echoOf(c, p, g.heard) : undefined
  // This gossip left after the peer applied ours sent at echoSentAt: its offset is at most the reading plus the time
  // since (our calendar gains at most 500 ppm on mono: 0.1% covers it). Read against the fence's skew (fence.ts).
  if (o.fresh && Number.isFinite(p.echoSentAt)) p.offsetUpCur = Math.min(p.offsetUpCur, p.clockOffsetMs + (nowMs - p.echoSentAt) * 1.001)
  // A voter's reading is judged before its echo counts: one that reads us off lends no lease from its first gossip,
  // not from the next tick (after a gap, a starved node spent in between: sim scenario skewed-node-deaf).
  if (o.fresh && c.fence.quorum.isVoter(p.name)) c.judgeSkew(nowMs)
  if (echo !== undefined && c.reclaim.echoCounts(p.name, g.attest) && c.fence.lease.echoed(p.name, echo)) c.fenced(nowMs)
  if (g.msums !== undefined) c.msums.onSums(p, g.seq, g.msums, nowMs)
  return verdict
}

/** A want, grant, ack or none from `node` (bound to its sender) names incarnation (epoch, inc): a newer one ends the old epoch. */
function evidence (c: ClusterCore, m: { node: string, epoch: string, inc: number }, nowMs: number): void {
  if (m.node === c.node || c.phase === 'stopped') return
  const from = c.peers.evidence(m.node, m.epoch, m.inc, nowMs)
  if (from !== null) endedEpoch(c, m.node, m.epoch, nowMs, from)
  else c.ledger.heard(m.node)
}

/**
 * Peer `node` is now `epoch` (it was `ended`): grants to its older epochs can never be
 * applied. They wait for its marks, which its restart gossips, from its
 * journal or a clean stop's snapshot (estate-marks.ts: those it had applied
 * are in its restored books, the rest come back at the horizon; without
 * marks they are stranded after `waitMs`). The marks of its older epochs as a
 * giver go, and it gets every key from us.
 */
function endedEpoch (c: ClusterCore, node: string, epoch: string, nowMs: number, ended: string): void {
  for (const e of c.ledger.epochsOf(node)) if (e !== epoch) c.reclaim.marks.hold(node, e, c.ledger.takeOutbox(node, e), undefined, nowMs, true)
  // Our applied marks of its ended epochs are final now (their grants are refused from here on): reported, so that
  // its restart takes back the grants it made that never arrived (estate-returns.ts).
  c.reclaim.returns.ended(node, ended, epoch, nowMs)
  c.ledger.giverEpoch(node, epoch)
  c.gossip.requestFullSync()
}

/**
 * A voter's echo of this incarnation: the seq of ours it names, which extends our lease (lease.ts) once its reading
 * is judged (above), and bounds its clock offset (echoSentAt). A voter that attests the incarnation this one
 * carries does not lease it (reclaim.ts `echoCounts`).
 */
function echoOf (c: ClusterCore, p: Peer, heard: readonly HeardEntry[]): number | undefined {
  if (!c.fence.quorum.isVoter(p.name)) return undefined
  for (const [node, inc, seq] of heard) {
    if (node !== c.node || inc !== c.incarnation) continue
    const at = c.fence.lease.sentAt(seq)
    if (at !== undefined && at > p.echoSentAt) p.echoSentAt = at
    return seq
  }
  return undefined
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
    forgetPeer(c, p.name)
  }
}

/** Peer `name` is gone for good here: its outboxes (stranded), positions, view and slot go. */
function forgetPeer (c: ClusterCore, name: string): void {
  strand(c, c.ledger.forgetPeer(name))
  c.positions.forget(name)
  c.peers.forget(name)
  c.membership.release(name)
}

/**
 * A seed frees the slots of admitted members silent here for `reclaimMs`
 * (membership.ts `expire`), the silence after which a voter attests a dead
 * member. A name keeps its slot while it owes anything here: a leaving
 * peer (forgetDeparted frees it), one the dead-member settlement will take
 * (reclaim.ts `settles`: it releases the slot when it settles), or one this
 * node has books with (grants out, positions, restored holdings, applied
 * marks). What is freed holds nothing here, so forgetting its view strands
 * nothing, and the name comes back (any peer id) as a new member would.
 */
export function freeSilentSlots (c: ClusterCore, nowMs: number): void {
  const freed = c.membership.expire(nowMs, c.tuning.reclaimMs, name => {
    const p = c.peers.get(name)
    if (p !== undefined && (p.leaving || c.reclaim.settles(p))) return true
    return c.ledger.epochsOf(name).length > 0 || c.positions.accounts(name).size > 0 || c.reclaim.restored.has(name) || c.ledger.appliedEpochs(name).length > 0
  })
  for (const name of freed) if (c.peers.get(name) !== undefined) forgetPeer(c, name)
}

/** A want from peer id `from`: served only if its name is bound to `from`. */
export function onWant (c: ClusterCore, w: Want, from: string, nowMs: number): Grant | None {
  if (c.membership.check(w.node, from) !== 'ok') return c.transfers.none()
  evidence(c, w, nowMs)
  return c.transfers.onWant(w, nowMs)
}

/** A pushed grant from peer id `from`: credited only if its giver's name is bound to `from`. */
export function onGrant (c: ClusterCore, g: Grant, from: string, nowMs: number): Ack {
  if (c.membership.check(g.node, from) !== 'ok') return c.transfers.ack(g, 0)
  evidence(c, g, nowMs)
  return c.transfers.onGrant(g, nowMs)
}

/**
 * An ack sent as a request (gossip-schedule.ts directAcks) by peer id
 * `from`: the grants this node gave that incarnation of the sender are
 * applied up to `applied`. Taken only if its name is bound to `from`, and
 * only for this very epoch (`toEpoch`): a mark of our predecessor's grants
 * says nothing of ours. Answered `none`.
 */
export function onAck (c: ClusterCore, a: Ack, from: string, nowMs: number): None {
  if (c.membership.check(a.node, from) !== 'ok') return c.transfers.none()
  evidence(c, a, nowMs)
  const p = c.peers.get(a.node)
  if (a.toEpoch === c.epoch && p !== undefined && p.epoch === a.epoch) {
    if (a.applied > p.appliedFromMe) p.appliedFromMe = a.applied
    c.positions.acked(c.ledger.ack(a.node, a.epoch, a.applied))
    c.counters.acksIn++
  }
  return c.transfers.none()
}

/** The reply to a request this node sent. Every request gets exactly one reply or failure. */
export function onReply (c: ClusterCore, req: Want | Grant | Ack, reply: Grant | Ack | None, nowMs: number): void {
  settled(c)
  evidence(c, reply, nowMs)
  // A want's round trip says whether this member's overflow may go out freely (forward-overflow.ts).
  if (req.t === 'want') c.forwarding.spill.wantAnswered(req.key, nowMs)
  if (req.t !== 'ack') c.transfers.onReply(req, reply, nowMs)
}

/** A request got no reply. A want may be retried elsewhere; a grant is resent by the ledger; a lost ack is covered by that resend. */
export function onRequestFailed (c: ClusterCore, req: Want | Grant | Ack, to: string, nowMs: number): void {
  settled(c)
  if (req.t === 'want') {
    c.transfers.wantAnswered(req)
    c.transfers.wantOutcome(to, false, nowMs)
  }
}

function settled (c: ClusterCore): void {
  if (c.inflight > 0) c.inflight--
}

/**
 * A jrep from peer id `from` (replica-store.ts): taken only by a seed, only
 * from another seed bound to `from`. The driver writes the change, then
 * commits it and answers with `journalAck`. Null: refused (the driver
 * answers nothing and counts a bad message).
 */
export function onJournalWrite (c: ClusterCore, m: Jrep, from: string): { change: ReplicaChange | null } | null {
  if (c.replicas === null || m.node === c.node || !replicaGroup(m.node, c.seeds).includes(c.node) || c.membership.check(m.node, from) !== 'ok') return null
  // A writer settled here is dead (or cut off and fenced): its copy stays as it was, for its heir (heir.ts).
  if (c.reclaim.isSettled(m.node, m.inc) || c.heir.homes.has(m.node) || c.heir.dead.has(m.node)) return null
  return { change: c.replicas.accept(m) }
}

export function journalAck (c: ClusterCore, writer: string): Jack {
  if (c.replicas === null) throw new Error('not a seed: it keeps no journal copies')
  return c.replicas.ack(writer, c.node, c.epoch, CLUSTER_VERSION)
}
