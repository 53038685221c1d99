/**
 * The driver's effects, one interpreter for the daemon (cluster-node.ts) and
 * the simulator (virtual-cluster.ts) alike: what the pure ClusterCore asks
 * of I/O, done in the order its invariants need, behind three narrow ports
 * (disk, network, clock). The daemon passes its files and libp2p transport;
 * the simulator its virtual disk and network on virtual time. No copy of
 * these duties lives anywhere else (test/structure.test.ts checks it).
 *
 * The duties, each an invariant:
 * - persist then reply: a pushed grant's credit, a journal copy, is on disk
 *   before the answer that lets its sender drop it;
 * - a grant leaves only once its give is on this disk and, for a seed with
 *   a share, covered by reservations at a quorum of seeds (replication.ts);
 * - a gossip leaves only after the attestations it carries are written;
 * - every request this node sends settles the core's count of it exactly
 *   once (onReply or onRequestFailed; for a jrep onAck or onFailed; for a
 *   jget onJcopy or onJgetFailed), and a reply counts only if it names the
 *   node asked;
 * - a member's forwarded acquire is served as this seed's own client's, and
 *   answered once.
 *
 * The ports take callbacks, not promises: the simulator's disk and network
 * call back at once or from its event queue, so a run stays a pure function
 * of its seed; the daemon's call back when its files and streams settle.
 * Each write kind runs in one chain (Serial), so writes land in order.
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import type { Logger } from '../util/log.js'
import type { LogOnce } from '../util/log-once.js'
import type { ClusterCore, Outbound } from './cluster-core.js'
import type { Ack, Gossip, Grant, Hb, MessageBounds, Want } from './messages.js'
import { decodeFans, decodeFwd, encodeFans, encodeFwd, type Fans, type Fwd } from './forward-messages.js'
import type { Decision } from '../core/types.js'
import type { JournalWrite } from './journal.js'
import { journalCheckpoint } from './persist.js'
import { encodeJrep, type Jack, type Jget, type Jrep } from './replica-messages.js'
import type { ReplicaChange } from './replica-store.js'
import { decodeRequest, encodeRequest } from './request-codec.js'
import type { ForwardSlots } from './forward-slots.js'

/** A write's or an exchange's outcome: `err` undefined (or null) when it succeeded. */
export type Done<T = void> = (err: unknown, value?: T) => void

/** The node's disk: each call writes once and calls `done` once, when the bytes are where a restart reads them. */
export interface DiskPort {
  /** Append a batch to the books journal, or replace it with a checkpoint (journal.ts `nextJournal`). */
  writeJournal: (w: JournalWrite, done: Done) => void
  /** Write a change to a seed's journal copy (replica-store.ts). */
  writeReplica: (c: ReplicaChange, done: Done) => void
  /** Write a voter's attestations (attest-file.ts). */
  writeAttestations: (attested: ReadonlyMap<string, number>, done: Done) => void
}

/** What a request or a call carries, for a port that models the network by message (the simulator counts and audits them). */
export type Sent = Want | Grant | Ack | Jrep | Jget

/** The node's network: each exchange calls `done` exactly once, with the reply's bytes or an error (no answer within `timeoutMs`). */
export interface NetPort {
  /** One request to `to` (its peer id `peerId`) and its reply (transport `request`). */
  request: (to: string, peerId: string, bytes: Uint8Array, msg: Sent, timeoutMs: number, done: Done<Uint8Array>) => void
  /** One call on the session to `to` and its answer (transport `call`): a member's forwarded acquire. */
  call: (to: string, peerId: string, bytes: Uint8Array, msg: Fwd, timeoutMs: number, done: Done<Uint8Array>) => void
  /** A gossip on this node's topic and, at a seed with members, the members' copy on theirs. */
  publish: (msg: Gossip | Hb, members: Gossip | Hb | undefined) => void
}

/** The node's monotonic clock. */
export interface ClockPort {
  mono: () => number
}

/**
 * What the simulator watches (token-audit.ts, replica-check.ts, its
 * oracle): called at the moments named, with no effect on the node.
 */
export interface EffectObserver {
  /** A grant made here (sent, or a want's answer): its tokens have left the books, before it waits to leave. */
  granted?: (g: Grant) => void
  /** A grant starts waiting to leave: what is called if it leaves. */
  covering?: (g: Grant) => (() => void) | undefined
  /** A pushed grant was applied here. */
  applied?: () => void
  /** A member's acquire read here (after its name and key number resolved). */
  forwardRead?: (m: Fwd) => void
  /** A member's acquire decided here (not sent on to another seed): its answer. */
  decided?: (m: Fwd, reply: Fans) => void
  /** A member handed out `count` of `key` from a seed's credit (forward-credit.ts). */
  credit?: (seed: string, key: string, count: number, d: Decision) => void
}

/**
 * This node's own clients' acquire (LocalQuota), for a forwarded acquire with
 * a `wait` or one sent on to the key's other seed; `here`: decided at this
 * node, never sent on (forward.ts `route`). A decision now, 'waiting' (or
 * 'forwarded': sent on to another seed) with `late` called once later, or
 * undefined when this node is not serving.
 */
export type LocalAcquire = (key: string, count: number, waitMs: number, here: boolean, late: (d: Decision | { error: unknown }) => void) => Decision | 'waiting' | 'forwarded' | undefined

export interface EffectsOptions {
  core: ClusterCore
  disk: DiskPort
  net: NetPort
  clock: ClockPort
  bounds: MessageBounds
  log: Logger
  /** Warnings a peer causes, once per interval per (peer, reason) (util/log-once.ts). */
  once: LogOnce
  /** Forwards in flight per seed, the rest queued (forward-slots.ts). */
  slots: ForwardSlots
  /** Tokens arrived: waiting acquires may be served. */
  onTokens?: () => void
  acquire?: LocalAcquire
  observe?: EffectObserver
}

/** A value some effect will produce, now or later; `then` runs at once once it has. */
export class Later<T> {
  private got: { v: T } | null = null
  private readonly waiting: Array<(v: T) => void> = []

  resolve (v: T): void {
    if (this.got !== null) return
    this.got = { v }
    for (const k of this.waiting.splice(0)) k(v)
  }

  then (k: (v: T) => void): void {
    if (this.got !== null) k(this.got.v)
    else this.waiting.push(k)
  }

  static of<T>(v: T): Later<T> {
    const l = new Later<T>()
    l.resolve(v)
    return l
  }
}

/** One write at a time, in call order: a task runs when the one before it has called its `next`. */
class Serial {
  private busy = false
  private readonly queue: Array<(next: () => void) => void> = []

  run (task: (next: () => void) => void): void {
    if (this.busy) { this.queue.push(task); return }
    this.busy = true
    task(() => { this.next() })
  }

  private next (): void {
    const t = this.queue.shift()
    if (t === undefined) { this.busy = false; return }
    t(() => { this.next() })
  }

  get idle (): Later<void> {
    const l = new Later<void>()
    this.run(next => { next(); l.resolve() })
    return l
  }
}

/** A failure logged at most once a minute (a full disk says so once, not per write). */
class Throttled {
  private at = -Infinity
  constructor (private readonly clock: ClockPort) {}
  due (): boolean {
    const now = this.clock.mono()
    if (now - this.at <= 60_000) return false
    this.at = now
    return true
  }
}

export class NodeEffects {
  readonly core: ClusterCore
  private readonly o: EffectsOptions
  private readonly journalChain = new Serial()
  private readonly replicaChain = new Serial()
  private readonly attestChain = new Serial()
  private attestWrites = 0
  private lastAttest = Later.of(true)
  private readonly journalFailed: Throttled
  private readonly replicaFailed: Throttled
  private readonly attestFailed: Throttled

  constructor (o: EffectsOptions) {
    this.o = o
    this.core = o.core
    this.journalFailed = new Throttled(o.clock)
    this.replicaFailed = new Throttled(o.clock)
    this.attestFailed = new Throttled(o.clock)
  }

  private mono (): number { return this.o.clock.mono() }

  // ---- disk --------------------------------------------------------------

  /**
   * Write what the journal has pending. True once it is on disk: only then
   * may a grant recorded before this call leave. After a failed write the
   * next one is a whole checkpoint (the books are current in memory, so
   * nothing a failed batch held is lost), and until one succeeds no grant
   * leaves: a give the disk does not know of must not be out.
   */
  persistJournal (): Later<boolean> {
    const out = new Later<boolean>()
    this.journalChain.run(next => {
      const core = this.core
      const r = core.replication.take(core.journal, () => journalCheckpoint(core))
      if (r === null) { next(); out.resolve(true); return }
      this.o.disk.writeJournal(r.w, err => {
        if (err == null) core.replication.localDone(r.pos)
        else {
          core.journal.checkpointNeeded = true
          if (this.journalFailed.due()) this.o.log.error('cannot write the journal; no tokens are given until it can be written', { code: (err as { code?: string }).code, err: (err as Error).message })
        }
        next()
        out.resolve(err == null)
      })
    })
    return out
  }

  /**
   * Before a grant of `keys` leaves: the journal, with the give, on this
   * disk and, for a seed with a share, a reservation covering its gives at a
   * quorum of seeds (replication.ts). False if either does not happen
   * within the want timeout: the grant does not leave (the ledger resends it).
   */
  persistForGrant (keys: string[]): Later<boolean> {
    const out = new Later<boolean>()
    this.persistJournal().then(ok => {
      if (!ok) { out.resolve(false); return }
      this.core.replication.whenCovered(keys, this.mono(), v => { out.resolve(v) })
      // Waiting, it is urgent: the copies it needs go out now, not at the next tick.
      this.sendReplicas()
    })
    return out
  }

  /**
   * A jrep, in order with the others: `accept` runs when its turn comes (the
   * store's state is then current), its change is written, and only then
   * committed and answered. Null: refused (nothing is answered).
   */
  private storeReplica (writer: string, accept: () => { change: ReplicaChange | null } | null): Later<Jack | null> {
    const out = new Later<Jack | null>()
    this.replicaChain.run(next => {
      const r = accept()
      if (r === null) { next(); out.resolve(null); return }
      const c = r.change
      const answer = (): void => { next(); out.resolve(this.core.journalAck(writer)) }
      if (c === null) { answer(); return }
      this.o.disk.writeReplica(c, err => {
        if (err == null) this.core.replicas?.commit(c)
        else if (this.replicaFailed.due()) this.o.log.error('cannot write a seed\'s journal copy; that seed\'s grants wait for other seeds', { writer, err: (err as Error).message })
        answer()
      })
    })
    return out
  }

  /** No attestation is waiting to be written: a gossip may leave at once. */
  get attestationsWritten (): boolean {
    return !this.core.reclaim.dirty && this.attestWrites === 0
  }

  /** Write the voter's attestations if they changed; false if they could not be written. */
  persistAttestations (): Later<boolean> {
    const r = this.core.reclaim
    if (!r.dirty) return this.lastAttest
    r.dirty = false
    const snapshot = new Map(r.attested)
    this.attestWrites++
    const out = new Later<boolean>()
    this.lastAttest = out
    this.attestChain.run(next => {
      this.o.disk.writeAttestations(snapshot, err => {
        this.attestWrites--
        if (err != null) {
          r.dirty = true
          if (this.attestFailed.due()) this.o.log.error('cannot write the attestations; gossip waits until they are written', { code: ErrorCodes.ATTEST_UNWRITABLE, err: (err as Error).message })
        }
        next()
        out.resolve(err == null)
      })
    })
    return out
  }

  /** Every write asked for so far has landed (a stop waits for it before closing its files). */
  settled (): Later<void> {
    const out = new Later<void>()
    this.journalChain.idle.then(() => { this.attestChain.idle.then(() => { this.replicaChain.idle.then(() => { out.resolve() }) }) })
    return out
  }

  // ---- outbound ----------------------------------------------------------

  /** One tick's or one stop's messages out, each as its invariant allows. */
  dispatch (out: Outbound[]): void {
    let grants: Grant[] | null = null
    let to: string[] | null = null
    for (const o of out) {
      if (o.kind === 'gossip') {
        // An attestation is on disk before any gossip carries it.
        if (this.attestationsWritten) this.o.net.publish(o.msg, o.members)
        else this.persistAttestations().then(ok => { if (ok) this.o.net.publish(o.msg, o.members) })
      } else if (o.kind === 'replicate') {
        this.sendReplica(o.to, o.msg, o.z)
      } else if (o.kind === 'jget') {
        this.readCopy(o.to, o.msg)
      } else if (o.msg.t === 'grant') {
        this.o.observe?.granted?.(o.msg);
        (grants ??= []).push(o.msg);
        (to ??= []).push(o.to)
      } else {
        this.sendRequest(o.to, o.msg)
      }
    }
    if (grants === null || to === null) return
    // A grant leaves only once its give is on disk (journal.ts), and at a quorum of seeds for a seed with a share (replication.ts).
    const ready = grants
    const dests = to
    const leaving = ready.map(g => this.o.observe?.covering?.(g))
    this.persistForGrant(ready.flatMap(g => g.items.map(i => i[0]))).then(ok => {
      for (let i = 0; i < ready.length; i++) {
        if (ok) { leaving[i]?.(); this.sendRequest(dests[i], ready[i]) }
        else this.core.onRequestFailed(ready[i], dests[i], this.mono())
      }
    })
  }

  /** Send one want, grant or ack; settles the core's count of it exactly once (onReply or onRequestFailed). */
  sendRequest (to: string, msg: Want | Grant | Ack): void {
    const core = this.core
    const peerId = core.membership.idOf(to)
    if (peerId === undefined) { core.onRequestFailed(msg, to, this.mono()); return }
    this.o.net.request(to, peerId, encodeRequest(msg), msg, core.tuning.wantTimeoutMs, (err, raw) => {
      try {
        if (err != null) throw err
        const reply = decodeRequest(raw as Uint8Array, this.o.bounds)
        if (reply.t !== 'grant' && reply.t !== 'ack' && reply.t !== 'none') throw new Error(`unexpected reply ${reply.t}`)
        // The stream went to the id bound to `to`; a reply in another name is not an answer.
        if (reply.node !== to) throw new Error(`reply from ${reply.node}, asked ${to}`)
        core.onReply(msg, reply, this.mono())
        // The credit is written (taken into the journal) before a waiter spends it.
        this.persistJournal()
        if (reply.t === 'grant') { this.o.observe?.applied?.(); this.o.onTokens?.() }
      } catch (e) {
        core.onRequestFailed(msg, to, this.mono())
        this.o.log.debug('request failed', { to, type: msg.t, err: e })
      }
    })
  }

  /** Send what the waiting grants need of this node's journal (the core's tick sends the rest). */
  sendReplicas (): void {
    for (const r of this.core.replication.outbound(this.mono())) this.sendReplica(r.to, r.msg, r.z)
  }

  /** One jrep; on its jack, the next part if the replica still lacks some. Settles onAck or onFailed once. */
  private sendReplica (to: string, msg: Jrep, z: string | null): void {
    const core = this.core
    const peerId = core.membership.idOf(to)
    if (peerId === undefined) { core.replication.onFailed(to, this.mono()); return }
    this.journalRequest(to, peerId, encodeRequest(encodeJrep(msg, z)), msg, 'jack', a => core.replication.onAck(to, a, this.mono()), e => {
      core.replication.onFailed(to, this.mono())
      this.o.log.debug('journal copy failed', { to, err: e })
    }, () => this.sendReplicas())
  }

  /** One jget of a heir (heir.ts); its jcopy, or its failure, goes back to the heir exactly once. */
  private readCopy (to: string, msg: Jget): void {
    const core = this.core
    const peerId = core.membership.idOf(to)
    if (peerId === undefined) { core.heir.onJgetFailed(to, msg.writer, this.mono()); return }
    this.journalRequest(to, peerId, encodeRequest(msg), msg, 'jcopy', a => core.heir.onJcopy(to, a, this.mono()), e => {
      core.heir.onJgetFailed(to, msg.writer, this.mono())
      this.o.log.debug('reading a journal copy failed', { to, writer: msg.writer, err: e })
    })
  }

  /**
   * A journal request (jrep or jget) to `to`, whose reply must be of type `expect` from `to` itself: `ok` with it
   * (then `after`), or `failed` once with why (no reply, an undecodable one, another type or sender, or `ok` threw).
   */
  private journalRequest<T extends 'jack' | 'jcopy'> (to: string, peerId: string, bytes: Uint8Array, msg: Jrep | Jget, expect: T,
    ok: (a: Extract<ReturnType<typeof decodeRequest>, { t: T }>) => void, failed: (e: unknown) => void, after?: () => void): void {
    this.o.net.request(to, peerId, bytes, msg, this.core.tuning.wantTimeoutMs, (err, raw) => {
      try {
        if (err != null) throw err
        const a = decodeRequest(raw as Uint8Array, this.o.bounds)
        if (a.t !== expect || a.node !== to) throw new Error(`unexpected reply ${a.t} from ${a.node}`)
        ok(a as Extract<ReturnType<typeof decodeRequest>, { t: T }>)
      } catch (e) {
        failed(e)
        return
      }
      after?.()
    })
  }

  // ---- inbound -----------------------------------------------------------

  /**
   * A peer's request (want, pushed grant, ack, jrep, jget) from peer id
   * `from`: `reply` gets the answer's bytes once what it promises is
   * durable, or an error (the stream is reset, the asker gets no answer).
   */
  serveRequest (from: string, data: Uint8Array, reply: Done<Uint8Array>): void {
    const core = this.core
    const now = this.mono()
    let m
    try {
      m = decodeRequest(data, this.o.bounds)
    } catch (err) {
      core.onBadMessage()
      this.o.log.debug('dropped a malformed request', { err })
      reply(err)
      return
    }
    if (m.t === 'want') {
      const r = core.onWant(m, from, now)
      if (r.t !== 'grant') { reply(null, encodeRequest(r)); return }
      // The grant leaves only once its give is durable; if it can't be, the asker gets no answer (the ledger resends it later).
      this.o.observe?.granted?.(r)
      const leaves = this.o.observe?.covering?.(r)
      this.persistForGrant(r.items.map(i => i[0])).then(ok => {
        if (!ok) { reply(new QuotadError(ErrorCodes.JOURNAL_UNWRITABLE, 'the journal cannot be made durable')); return }
        leaves?.()
        reply(null, encodeRequest(r))
      })
      return
    }
    if (m.t === 'jrep') {
      const jrep = m
      this.storeReplica(jrep.node, () => core.onJournalWrite(jrep, from)).then(ack => {
        if (ack === null) { core.onBadMessage(); reply(new Error(`jrep from ${jrep.node} refused`)); return }
        reply(null, encodeRequest(ack))
      })
      return
    }
    if (m.t === 'jget') {
      const copy = core.onJget(m, from)
      if (copy === null) { core.onBadMessage(); reply(new Error(`jget from ${m.node} refused`)); return }
      reply(null, encodeRequest(copy))
      return
    }
    if (m.t === 'grant') {
      const ack = core.onGrant(m, from, now)
      // A refused push goes back to its giver (which keeps the tokens): say why, the giver's operator will ask.
      // Once per interval per giver (with a count): a member that pushes a thousand lies costs a line, not a thousand.
      if (ack.refused === true) this.o.once.log(this.o.log, 'warn', m.node, 'refused a grant', 'refused a grant', { node: core.node, from: m.node, why: core.lastRefusal })
      // The ack tells the giver to drop the grant: the credit is written first, so a kill -9 after the ack can't lose
      // it (a grant applied and not yet written stays unacked at its giver, and a member's restart settles it by its
      // marks: estate-marks.ts). Not fsynced: a machine crash can still lose it, never double it.
      const written = this.persistJournal()
      this.o.observe?.applied?.()
      this.o.onTokens?.()
      written.then(() => { reply(null, encodeRequest(ack)) })
      return
    }
    // An ack as a request of its own (a reply has no toEpoch): its giver's grants applied so far.
    if (m.t === 'ack' && m.toEpoch !== undefined) { reply(null, encodeRequest(core.onAck(m, from, now))); return }
    core.onBadMessage()
    reply(new Error(`unexpected request ${m.t}`))
  }

  /**
   * A member's acquire of a `decide: "seeds"` rule (forward.ts), a call on
   * the session from peer id `from`: decided here as this node's own, and
   * the answer's bytes; a payload that does not parse is an error (the
   * session is reset).
   */
  serveCall (from: string, data: Uint8Array, reply: Done<Uint8Array>): void {
    const f = this.core.forwarding
    let m: Fwd
    try {
      m = decodeFwd(data, f.memberOf(from), this.o.bounds)
    } catch (err) {
      this.core.onBadMessage()
      this.o.log.debug('dropped a malformed forwarded acquire', { err })
      reply(err)
      return
    }
    // Before anything else of it, so a name binds in the order the session brings them (forward-names.ts).
    const unnamed = f.resolve(m, from)
    if (unnamed !== null) { reply(null, encodeFans(unnamed)); return }
    this.o.observe?.forwardRead?.(m)
    this.serveForward(m, from, (answer, sentOn) => {
      if (!sentOn) this.o.observe?.decided?.(m, answer)
      this.persistJournal()
      // As it goes: an admission in the window the member knows goes short (forward-names.ts).
      reply(null, encodeFans(f.reply(m, from, answer, this.mono())))
    })
  }

  /**
   * A member's acquire at this seed: decided as this node's own client's.
   * With a `wait`, through the node's LocalQuota, so it waits for tokens as
   * a local client's would (and is answered denied if this node stops
   * meanwhile). `sentOn`: decided at the key's other seed, not here.
   */
  private serveForward (m: Fwd, from: string, answer: (reply: Fans, sentOn: boolean) => void): void {
    const f = this.core.forwarding
    const now = this.mono()
    const refusal = f.admit(m, from)
    if (refusal !== null) { answer(refusal, false); return }
    // Out of tokens here while the key's other seed holds some: on to it, as this seed's own client's (forward.ts `sendsOn`).
    const on = f.sendsOn(m, now)
    const acquire = this.o.acquire
    if ((m.wait === undefined && !on) || acquire === undefined) { answer(f.serve(m, from, now), false); return }
    const settle = (d: Decision | { error: unknown }, sentOn: boolean): void => { answer(on && !('error' in d) ? f.sentOn(d, m, this.mono()) : f.decided(d), sentOn) }
    let r: ReturnType<LocalAcquire>
    let forwarded = false
    try {
      r = acquire(m.key, m.count, m.wait ?? 0, !on, d => { settle(d, forwarded) })
    } catch (error) {
      answer(f.decided({ error }), false)
      return
    }
    if (r === undefined) answer(f.serve(m, from, now), false)
    else if (r === 'forwarded') forwarded = true
    else if (r !== 'waiting') settle(r, false)
  }

  /**
   * A member's acquire of a `decide: "seeds"` rule (forward.ts): `done` gets
   * the seed's decision, or a denial after waitMs + forwardTimeoutMs; false
   * when this node decides it (a seed, another rule, no seed to ask), and
   * `done` is not called.
   */
  forwardAcquire (key: string, count: number, waitMs: number, here: boolean, done: (d: Decision) => void): boolean {
    const core = this.core
    const t0 = this.mono()
    // Credit a seed gave for this key (forward-credit.ts): admitted here, at once (whatever the client's waitMs).
    const credited = core.forwarding.fromCredit(key, count, t0)
    if (credited !== null) { this.o.observe?.credit?.(credited.seed, key, count, credited.decision); done(credited.decision); return true }
    const r = core.forwarding.route(key, count, waitMs, t0, here)
    if (r === null) return false
    // A seed's denial of the key, kept until its window ends (forward-kept.ts): denied here, at once.
    if (r.denied !== undefined) { done(r.denied); return true }
    // The seed may hold it up to waitMs for tokens; then the answer's way back. A forward queued for a slot
    // (forward-slots.ts) spends that time from both.
    const budget = waitMs + core.tuning.forwardTimeoutMs
    this.o.slots.run(r.to, budget, release => {
      const spent = this.mono() - t0
      const msg = { ...r.msg }
      if ((msg.wait ?? 0) - spent >= 1) msg.wait = Math.floor((msg.wait ?? 0) - spent)
      else delete msg.wait
      this.sendForward(r.to, msg, Math.max(1, Math.floor(budget - spent)), t0, d => { release(); done(d) })
    }, () => { done(core.forwarding.failed(r.msg)) })
    return true
  }

  /**
   * Send a member's acquire to the seed `to` (forward.ts) and wait up to
   * `timeoutMs` for its decision; no answer, or one not in `to`'s name, is a
   * denial (the core counts it). `sentMs`: when it was routed, no later than
   * it leaves (its credit's clock starts there: forward-credit.ts).
   */
  private sendForward (to: string, msg: Fwd, timeoutMs: number, sentMs: number, done: (d: Decision) => void): void {
    const f = this.core.forwarding
    const peerId = this.core.membership.idOf(to)
    if (peerId === undefined) { done(f.failed(msg)); return }
    // The session goes to the peer id bound to `to` (noise proves it): its answers are `to`'s.
    const started = this.mono()
    const failed = (err: unknown): void => {
      this.o.log.debug('forwarded acquire failed', { to, err })
      f.unanswered(to, this.mono())
      done(f.failed(msg))
    }
    const send = (req: Fwd, ms: number, first: boolean): void => {
      this.o.net.call(to, peerId, encodeFwd(req), req, ms, (err, raw) => {
        try {
          if (err != null) throw err
          const reply = decodeFans(raw as Uint8Array)
          // The seed did not know the key's number (it restarted): once more, naming the key.
          const again = first ? f.again(req, reply, to) : null
          if (again !== null) { send(again, Math.max(1, Math.floor(timeoutMs - (this.mono() - started))), false); return }
          done(f.answered(req, reply, to, sentMs, this.mono()))
        } catch (e) {
          failed(e)
        }
      })
    }
    send(msg, timeoutMs, true)
  }
}
