/**
 * The driver's requests, both ways (cluster-node.ts): a request a peer sent
 * here, handed to the core with the peer id the stream came from, its reply
 * encoded once what it promises is durable (a grant's give on disk, a
 * journal copy written); and a request of the core's sent out, whose reply
 * counts only if it names the node asked. Every outbound request settles
 * the core's count exactly once (onReply or onRequestFailed).
 */
import type { Clock } from '../clock.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import type { Logger } from '../util/log.js'
import type { LogOnce } from '../util/log-once.js'
import type { ClusterCore } from './cluster-core.js'
import type { Ack, Grant, MessageBounds, Want } from './messages.js'
import { decodeFans, decodeFwd, encodeFans, encodeFwd, type Fans, type Fwd } from './forward-messages.js'
import { isWaitHandle, type AcquireResult, type Decision } from '../core/types.js'
import type { NodeDisk } from './node-disk.js'
import type { Transport } from './transport/types.js'
import { decodeRequest, encodeRequest } from './request-codec.js'
import type { ForwardSlots } from './forward-slots.js'

/** What both directions use of the node. */
export interface RequestContext {
  core: ClusterCore
  disk: NodeDisk
  bounds: MessageBounds
  clock: Clock
  log: Logger
  /** Warnings a peer causes, once per interval per (peer, reason) (util/log-once.ts). */
  once: LogOnce
  /** Tokens arrived: waiting acquires may be served. */
  onTokens?: () => void
  /**
   * This node's own clients' acquire (LocalQuota): a forwarded acquire with a
   * `wait`, or one sent on to the key's other seed, is served through it;
   * `here`: decided at this node, never sent on (forward.ts `route`).
   */
  acquire?: (key: string, count: number, waitMs: number, here: boolean) => AcquireResult | undefined
}

/** A peer's request (want, pushed grant, ack, jrep, jget) on a stream from peer id `from`: the reply's bytes, or a throw that resets the stream. */
export async function serveRequest (x: RequestContext, from: string, data: Uint8Array): Promise<Uint8Array> {
  const now = x.clock.mono()
  let m
  try {
    m = decodeRequest(data, x.bounds)
  } catch (err) {
    x.core.onBadMessage()
    x.log.debug('dropped a malformed request', { err })
    throw err
  }
  if (m.t === 'want') {
    const reply = x.core.onWant(m, from, now)
    // The grant leaves only once its give is durable; if it can't be, the asker gets no answer (the ledger resends it later).
    if (reply.t === 'grant' && !await x.disk.persistForGrant(reply.items.map(i => i[0]))) throw new QuotadError(ErrorCodes.JOURNAL_UNWRITABLE, 'the journal cannot be made durable')
    return encodeRequest(reply)
  }
  if (m.t === 'jrep') {
    const ack = await x.disk.storeReplica(m.node, () => x.core.onJournalWrite(m, from))
    if (ack === null) { x.core.onBadMessage(); throw new Error(`jrep from ${m.node} refused`) }
    return encodeRequest(ack)
  }
  if (m.t === 'jget') {
    const copy = x.core.onJget(m, from)
    if (copy === null) { x.core.onBadMessage(); throw new Error(`jget from ${m.node} refused`) }
    return encodeRequest(copy)
  }
  if (m.t === 'grant') {
    const ack = x.core.onGrant(m, from, now)
    // A refused push goes back to its giver (which keeps the tokens): say why, the giver's operator will ask.
    // Once per interval per giver (with a count): a member that pushes a thousand lies costs a line, not a thousand.
    if (ack.refused === true) x.once.log(x.log, 'warn', m.node, 'refused a grant', 'refused a grant', { node: x.core.node, from: m.node, why: x.core.lastRefusal })
    x.onTokens?.()
    // The ack tells the giver to drop the grant: the credit is written first, so a kill -9 after the ack can't lose
    // it (a grant applied and not yet written stays unacked at its giver, and a member's restart settles it by its
    // marks: estate-marks.ts). Not fsynced: a machine crash can still lose it, never double it.
    await x.disk.persistJournal()
    return encodeRequest(ack)
  }
  // An ack as a request of its own (a reply has no toEpoch): its giver's grants applied so far.
  if (m.t === 'ack' && m.toEpoch !== undefined) return encodeRequest(x.core.onAck(m, from, now))
  x.core.onBadMessage()
  throw new Error(`unexpected request ${m.t}`)
}

/**
 * A member's acquire of a `decide: "seeds"` rule (forward.ts), a call on the
 * session from peer id `from`: decided here as this node's own, and the
 * answer's bytes; a payload that does not parse throws (the session is reset).
 */
export async function serveCall (x: RequestContext, from: string, data: Uint8Array): Promise<Uint8Array> {
  let m: Fwd
  try {
    m = decodeFwd(data, x.core.forwarding.memberOf(from), x.bounds)
  } catch (err) {
    x.core.onBadMessage()
    x.log.debug('dropped a malformed forwarded acquire', { err })
    throw err
  }
  // Before anything else of it, so a name binds in the order the session brings them (forward-names.ts).
  const unnamed = x.core.forwarding.resolve(m, from)
  if (unnamed !== null) return encodeFans(unnamed)
  const reply = await serveForward(x, m, from, x.clock.mono())
  void x.disk.persistJournal()
  // As it goes: an admission in the window the member knows goes short (forward-names.ts).
  return encodeFans(x.core.forwarding.reply(m, from, reply, x.clock.mono()))
}

/** Send one request; settles the core's count of it exactly once (onReply or onRequestFailed). */
export async function sendRequest (x: RequestContext, t: Transport, to: string, msg: Want | Grant | Ack): Promise<void> {
  const clock = x.clock
  const peerId = x.core.membership.idOf(to)
  if (peerId === undefined) { x.core.onRequestFailed(msg, to, clock.mono()); return }
  try {
    const raw = await t.request(peerId, encodeRequest(msg), x.core.tuning.wantTimeoutMs)
    const reply = decodeRequest(raw, x.bounds)
    if (reply.t !== 'grant' && reply.t !== 'ack' && reply.t !== 'none') throw new Error(`unexpected reply ${reply.t}`)
    // The stream went to the id bound to `to`; a reply in another name is not an answer.
    if (reply.node !== to) throw new Error(`reply from ${reply.node}, asked ${to}`)
    x.core.onReply(msg, reply, clock.mono())
    if (reply.t === 'grant') x.onTokens?.()
    void x.disk.persistJournal()
  } catch (err) {
    x.core.onRequestFailed(msg, to, clock.mono())
    x.log.debug('request failed', { to, type: msg.t, err })
  }
}

/**
 * A member's acquire of a `decide: "seeds"` rule (forward.ts): the seed's
 * decision, or a denial after waitMs + forwardTimeoutMs; null when this
 * node decides it (a seed, another rule, no seed to ask).
 */
export function forwardAcquire (x: RequestContext, t: Transport, slots: ForwardSlots, key: string, count: number, waitMs: number, here = false): Promise<Decision> | null {
  const t0 = x.clock.mono()
  // Credit a seed gave for this key (forward-credit.ts): admitted here, at once (whatever the client's waitMs).
  const credited = x.core.forwarding.fromCredit(key, count, t0)
  if (credited !== null) return Promise.resolve(credited.decision)
  const r = x.core.forwarding.route(key, count, waitMs, t0, here)
  if (r === null) return null
  // A seed's denial of the key, kept until its window ends (forward-kept.ts): denied here, at once.
  if (r.denied !== undefined) return Promise.resolve(r.denied)
  // The seed may hold it up to waitMs for tokens; then the answer's way back. A forward queued for a slot
  // (forward-slots.ts) spends that time from both.
  const budget = waitMs + x.core.tuning.forwardTimeoutMs
  return new Promise<Decision>(resolve => {
    slots.run(r.to, budget, async () => {
      const spent = x.clock.mono() - t0
      const msg = { ...r.msg }
      if ((msg.wait ?? 0) - spent >= 1) msg.wait = Math.floor((msg.wait ?? 0) - spent)
      else delete msg.wait
      resolve(await sendForward(x, t, r.to, msg, Math.max(1, Math.floor(budget - spent)), t0))
    }, () => { resolve(x.core.forwarding.failed(r.msg)) })
  })
}

/**
 * Send a member's acquire to the seed `to` (forward.ts) and wait up to
 * `timeoutMs` for its decision; no answer, or one not in `to`'s name, is a
 * denial (the core counts it). `sentMs`: when it was routed, no later than
 * it leaves (its credit's clock starts there: forward-credit.ts).
 */
export async function sendForward (x: RequestContext, t: Transport, to: string, msg: Fwd, timeoutMs: number, sentMs: number): Promise<Decision> {
  const peerId = x.core.membership.idOf(to)
  if (peerId === undefined) return x.core.forwarding.failed(msg)
  try {
    // The session goes to the peer id bound to `to` (noise proves it): its answers are `to`'s.
    const started = x.clock.mono()
    let req = msg
    let reply = decodeFans(await t.call(peerId, encodeFwd(req), timeoutMs))
    // The seed did not know the key's number (it restarted): once more, naming the key.
    const again = x.core.forwarding.again(req, reply, to)
    if (again !== null) {
      req = again
      reply = decodeFans(await t.call(peerId, encodeFwd(req), Math.max(1, Math.floor(timeoutMs - (x.clock.mono() - started)))))
    }
    return x.core.forwarding.answered(req, reply, to, sentMs, x.clock.mono())
  } catch (err) {
    x.log.debug('forwarded acquire failed', { to, err })
    x.core.forwarding.unanswered(to, x.clock.mono())
    return x.core.forwarding.failed(msg)
  }
}

/**
 * A member's acquire at this seed: decided as this node's own client's. With
 * a `wait`, through the daemon's LocalQuota, so it waits for tokens as a local
 * client's would (and is answered denied if this node stops meanwhile).
 */
async function serveForward (x: RequestContext, m: Fwd, from: string, now: number): Promise<Fans> {
  const f = x.core.forwarding
  const refusal = f.admit(m, from)
  if (refusal !== null) return refusal
  // Out of tokens here while the key's other seed holds some: on to it, as this seed's own client's (forward.ts `sendsOn`).
  const on = f.sendsOn(m, now)
  if ((m.wait === undefined && !on) || x.acquire === undefined) return f.serve(m, from, now)
  try {
    const r = x.acquire(m.key, m.count, m.wait ?? 0, !on)
    if (r === undefined) return f.serve(m, from, now)
    const d = isWaitHandle(r) ? await r.promise : r
    return on ? f.sentOn(d, m, x.clock.mono()) : f.decided(d)
  } catch (error) {
    return f.decided({ error })
  }
}
