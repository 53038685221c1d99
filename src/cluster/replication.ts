/**
 * Journal replication, the writer's side (cluster-protocol.md, "Replicas and reservations"). A seed
 * that holds a share sends its books journal (journal.ts) to the other
 * seeds, and a grant it gives leaves only once the journal write holding
 * the give is durable at a quorum of seeds, its own disk counted. Then,
 * should the seed die for good, any quorum of the survivors holds every
 * give whose grant left it: its books can be read from their replicas
 * (quorum.ts: two quorums meet in a voter other than the dead one).
 *
 * Positions: the journal is a sequence of generations, each a checkpoint
 * line followed by batch lines. A write's position is `(gen, end)`: the
 * generation and the text length after it. A replica that acked a later
 * generation, durably, holds a checkpoint that contains the write.
 *
 * Pure: the drivers (cluster-node.ts, the simulator) persist the local
 * write, call `localDone`, send `outbound()` and feed replies back; a grant
 * is sent when `whenDurable` calls back true. A waiter that is not durable
 * within `timeoutMs` is called back false (the grant stays in the ledger
 * and is resent later, as after a failed local write).
 */
import type { BooksJournal, JournalCheckpoint, JournalWrite } from './journal.js'
import { CLUSTER_VERSION } from './messages.js'
import { Quorum } from './quorum.js'
import { seedOrder } from '../core/share.js'
import type { ClusterTuning } from './tuning.js'
import { chunkEnd, DICT_CHARS, type Jack, type Jrep } from './replica-messages.js'
import { Reservations } from './replica-reservations.js'
import { DurableAcks } from './durable-acks.js'

export { BOOKS_FRACTION, RELEASE_AFTER_INTERVALS, RESERVE_FRACTION } from './replica-reservations.js'

export interface ReplPos { gen: number, end: number }

interface Progress {
  inc: number
  gen: number
  have: number
  durable: boolean
  inflight: boolean
  sentAt: number
  retryAt: number
  /** Smoothed time from a jrep to its jack (Infinity until the first). */
  rttMs: number
  /** Its last jack said it reads compressed jreps (replica-messages.ts): send it `z`. */
  z: boolean
}

export interface ReplicationOptions {
  node: string
  epoch: string
  inc: number
  /** Replicate at all: a seed that holds a share, leases on, more than one seed. */
  enabled: boolean
  quorum: Quorum
  /** The cluster protocol version (messages.ts). */
  version: number
  /** A waiter not durable by then is answered false; a jrep unanswered by then is given up. */
  timeoutMs: number
  /** After a failed jrep, the next to that replica waits this long. */
  retryMs: number
}

/** A generation's text above this many characters (and twice its checkpoint) asks for a new checkpoint. */
export const MAX_GENERATION_CHARS = 8 * 1024 * 1024

export class JournalReplication {
  enabled: boolean
  private readonly o: ReplicationOptions
  private gen = 0
  private end = 0
  private checkpointChars = 0
  /** The current generation's text (only when enabled: replicas are sent from it). */
  private text = ''
  private local: ReplPos = { gen: 0, end: 0 }
  /** Per key, in this generation: tokens given, and the reservations a grant of them waits for (replica-reservations.ts). */
  private readonly reservations = new Reservations()
  /** The credits applied here that may not be acked yet: their writes are not at a quorum (durable-acks.ts). */
  private readonly acks = new DurableAcks()
  private readonly replicas = new Map<string, Progress>()
  private waiters: Array<{ pos: ReplPos, local: ReplPos, cb: (ok: boolean) => void, until: number }> = []
  /** Counters for status. */
  readonly counters = { sent: 0, sentChars: 0, acks: 0, failures: 0, timedOut: 0, released: 0 }

  /**
   * A node's replication: on for a seed that holds a share, with other
   * seeds, leases on and `replicateJournal`. Its copies go to its replica
   * group (`replicaGroup`), and a write is durable at a quorum of the
   * writer and that group: the cost stays that of five seeds however many
   * seeds there are.
   */
  static forNode (node: string, epoch: string, inc: number, seeds: readonly string[], allocate: boolean,
    tuning: Pick<ClusterTuning, 'leases' | 'replicateJournal' | 'wantTimeoutMs' | 'gossipIntervalMs'>): JournalReplication {
    return new JournalReplication({
      node,
      epoch,
      inc,
      enabled: seeds.includes(node) && allocate && seeds.length > 1 && tuning.leases && tuning.replicateJournal,
      quorum: new Quorum([node, ...replicaGroup(node, seeds)]),
      version: CLUSTER_VERSION,
      timeoutMs: tuning.wantTimeoutMs,
      retryMs: tuning.gossipIntervalMs
    })
  }

  constructor (o: ReplicationOptions) {
    this.o = o
    this.enabled = o.enabled
    if (o.enabled) {
      for (const v of o.quorum.voters) {
        if (v !== o.node) this.replicas.set(v, { inc: 0, gen: 0, have: 0, durable: true, inflight: false, sentAt: -Infinity, retryAt: -Infinity, rttMs: Infinity, z: false })
      }
    }
  }

  /** The generation the next checkpoint starts (journalCheckpoint writes it into the line). */
  get nextGen (): number { return this.gen + 1 }

  /** The position after the last write taken: every give recorded so far is at or before it. */
  get head (): ReplPos { return { gen: this.gen, end: this.end } }

  /** Take the journal's pending write (the driver persists it) and place it in the replicated text. */
  take (journal: BooksJournal, checkpoint: () => JournalCheckpoint): { w: JournalWrite, pos: ReplPos } | null {
    if (this.enabled && this.text.length > MAX_GENERATION_CHARS && this.text.length > 2 * this.checkpointChars) journal.checkpointNeeded = true
    const w = journal.take(checkpoint)
    if (w === null) return null
    return { w, pos: this.append(w) }
  }

  private append (w: JournalWrite): ReplPos {
    const line = `${w.checkpoint ?? w.batch as string}\n`
    if (w.checkpoint !== null) {
      this.gen++
      this.end = this.checkpointChars = line.length
      this.text = ''
      // The checkpoint carries what is left of each reservation (journalCheckpoint): it starts the new generation's.
      this.reservations.restart(this.head)
    } else {
      this.end += line.length
      this.reservations.place(this.head)
    }
    this.acks.place(this.head)
    if (this.enabled) this.text += line
    return this.head
  }

  /**
   * A give of `n` of `key` (Transfers.give), recorded in `journal` with it.
   * Its grant may leave once a reservation that covers it is durable at a
   * quorum of seeds (replica-reservations.ts).
   */
  gave (journal: BooksJournal, key: string, n: number, stock: number, books = Infinity, nowMs = 0): void {
    if (!this.enabled || n <= 0) return
    this.reservations.gave(journal, key, n, stock, books, nowMs)
  }

  /**
   * Give back the reservations of keys that gave nothing for `idleMs` (at
   * housekeeping, once a gossip interval), in the journal's next batch.
   */
  release (journal: BooksJournal, nowMs: number, idleMs: number): void {
    if (!this.enabled) return
    this.counters.released += this.reservations.release(journal, nowMs, idleMs)
  }

  /**
   * A grant of `giver`/`giverEpoch` was credited here (Transfers.onGrant;
   * `before`: the pair's applied mark before it). Replicating, its ack waits
   * until the journal write holding the credit is at a quorum (durable-acks.ts).
   */
  applied (giver: string, giverEpoch: string, before: number): void {
    if (this.enabled) this.acks.applied(giver, giverEpoch, before)
  }

  /** The marks of `applied` ([giver, epoch, mark]) that may be acked: replicating, only credits at a quorum. */
  ackable (applied: Array<[string, string, number]>): Array<[string, string, number]> {
    if (!this.enabled || this.acks.idle) return applied
    return applied.map(([g, e, n]) => [g, e, this.acks.ackable(g, e, n)])
  }

  /** What may be acked of one pair whose applied mark is `applied`. */
  ackableFrom (giver: string, giverEpoch: string, applied: number): number {
    return this.enabled ? this.acks.ackable(giver, giverEpoch, applied) : applied
  }

  /** Credits applied here whose acks wait for the copies (status; the simulator's `seed-crash-receiving`). */
  get acksWaiting (): number {
    return this.acks.size
  }

  /** Tokens of `key` given in this generation (the simulator's replica witness reads it). */
  givenOf (key: string): number {
    return this.reservations.givenOf(key)
  }

  /** What is left of each reservation (for the checkpoint). */
  reserved (): Array<[string, number]> {
    return this.reservations.reserved()
  }

  /**
   * Where the first reservation covering each key's gives so far was
   * written (a grant of them waits for that at a quorum). At least this
   * generation's checkpoint: a grant resent after a new checkpoint was given
   * under the last generation's reservations, and its give is now in the
   * checkpoint's books.
   */
  coverPos (keys: Iterable<string>): ReplPos {
    let pos: ReplPos = { gen: this.gen, end: this.checkpointChars }
    for (const k of keys) {
      const at = this.reservations.coverOf(k)
      if (at === undefined) continue
      if (at === null) return this.head
      if (after(at, pos)) pos = at
    }
    return pos
  }

  /** The write at `pos` is on this node's disk. */
  localDone (pos: ReplPos): void {
    if (after(pos, this.local)) this.local = { ...pos }
    this.check()
  }

  /**
   * `local` is on this node's disk and `pos` at a quorum of seeds (this
   * node's disk counted); disabled: `local` is on this node's disk.
   */
  isDurable (pos: ReplPos, local: ReplPos = pos): boolean {
    if (after(local, this.local) || after(pos, this.local)) return false
    if (!this.enabled) return true
    const names = [this.o.node]
    for (const [n, p] of this.replicas) if (this.holds(p, pos)) names.push(n)
    return this.o.quorum.isQuorum(names)
  }

  /**
   * Call `cb(true)` once a grant of `keys` may leave: everything journaled
   * so far is on this disk, and the reservations covering those keys' gives
   * are at a quorum of seeds; `cb(false)` if not by `nowMs + timeoutMs`.
   */
  whenCovered (keys: Iterable<string>, nowMs: number, cb: (ok: boolean) => void): void {
    this.whenDurable(this.coverPos(keys), nowMs, cb, this.head)
  }

  /** Call `cb(true)` once `pos` is durable (and `local` on this disk), or `cb(false)` if not by `nowMs + timeoutMs`. */
  whenDurable (pos: ReplPos, nowMs: number, cb: (ok: boolean) => void, local: ReplPos = pos): void {
    if (this.isDurable(pos, local)) { cb(true); return }
    this.waiters.push({ pos, local, cb, until: nowMs + this.o.timeoutMs })
  }

  /**
   * This seed's share was inherited (reclaim.ts dropBooks): its journal is no
   * heir's concern any more. Waiting grants were dropped with the books.
   */
  disable (): void {
    this.enabled = false
    this.acks.clear()
    const w = this.waiters
    this.waiters = []
    for (const x of w) x.cb(false)
  }

  /** Answer the waiters that timed out (a tick). */
  expire (nowMs: number): void {
    if (this.waiters.length === 0) return
    const late = this.waiters.filter(w => w.until < nowMs)
    if (late.length === 0) return
    this.waiters = this.waiters.filter(w => w.until >= nowMs)
    this.counters.timedOut += late.length
    for (const w of late) w.cb(false)
  }

  private check (): void {
    if (!this.acks.idle) this.acks.advance(pos => this.isDurable(pos))
    if (this.waiters.length === 0) return
    const done = this.waiters.filter(w => this.isDurable(w.pos, w.local))
    if (done.length === 0) return
    this.waiters = this.waiters.filter(w => !done.includes(w))
    for (const w of done) w.cb(true)
  }

  /**
   * The jreps to send now, each with what its seed lacks of the current
   * generation (one in flight per seed). While a grant waits, to the fewest
   * seeds that make a quorum with those that have it or are being sent it,
   * quickest to answer first; `tick` (the periodic call) also brings every
   * other seed up to date, at most once per `retryMs` each. So copies cost
   * about one jrep per batch of gives, not one per seed.
   */
  outbound (nowMs: number, tick = false): Array<{ to: string, msg: Jrep, z: string | null }> {
    const out: Array<{ to: string, msg: Jrep, z: string | null }> = []
    if (!this.enabled || this.gen === 0) return out
    const urgent = this.waiters.length > 0
    if (!tick && !urgent) return out
    // What the waiting grants need at a quorum (the newest of their covering positions); on a tick, everything.
    const head = urgent && !tick ? this.waiters.reduce((p, w) => after(w.pos, p) ? w.pos : p, { gen: 0, end: 0 }) : this.head
    const covered = [this.o.node]
    const candidates: Array<[string, Progress]> = []
    for (const [to, p] of this.replicas) {
      // Unanswered for four of its usual round trips (at least `retryMs / 2`): taken for lost, and sent again.
      if (p.inflight && nowMs - p.sentAt > Math.min(this.o.timeoutMs, Math.max(4 * p.rttMs, this.o.retryMs / 2))) { p.inflight = false; this.counters.failures++ }
      // An answer overdue (twice its usual time) may be lost: while a grant waits, the next seed is asked too.
      const hedged = p.inflight && urgent && nowMs - p.sentAt > Math.max(2 * p.rttMs, 2 * this.o.retryMs / 5)
      if (this.holds(p, head) || (p.inflight && !hedged)) covered.push(to)
      else if (!p.inflight && nowMs >= p.retryAt && p.inc <= this.o.inc) candidates.push([to, p])
    }
    candidates.sort((a, b) => a[1].rttMs - b[1].rttMs)
    for (const [to, p] of candidates) {
      // Needed for a quorum of the head (now, for a waiting grant; once per retryMs on a tick); the rest of the
      // group catches up once per four retryMs, so that a quorum without it is not slow to form later.
      const needed = !this.o.quorum.isQuorum(covered) && (urgent || nowMs - p.sentAt >= this.o.retryMs)
      if (!needed && !(tick && nowMs - p.sentAt >= 4 * this.o.retryMs)) continue
      const from = p.inc === this.o.inc && p.gen === this.gen ? p.have : 0
      if (from >= this.text.length) continue
      const data = this.text.slice(from, chunkEnd(this.text, from))
      p.inflight = true
      p.sentAt = nowMs
      covered.push(to)
      this.counters.sent++
      this.counters.sentChars += data.length
      // Compressed for a replica that reads it, against the text it holds before `from` (replica-messages.ts).
      const z = p.z ? this.text.slice(Math.max(0, from - DICT_CHARS), from) : null
      out.push({ to, msg: { v: this.o.version, t: 'jrep', node: this.o.node, epoch: this.o.epoch, inc: this.o.inc, gen: this.gen, offset: from, data }, z })
    }
    return out
  }

  /** Whether a replica's last jack says it holds `pos`, on disk. */
  private holds (p: Progress, pos: ReplPos): boolean {
    return p.inc === this.o.inc && p.durable && (p.gen > pos.gen || (p.gen === pos.gen && p.have >= pos.end))
  }

  /** A replica's reply. */
  onAck (to: string, a: Jack, nowMs: number): void {
    const p = this.replicas.get(to)
    if (p === undefined) return
    p.inflight = false
    p.z = a.z === true
    this.counters.acks++
    const rtt = Math.max(0, nowMs - p.sentAt)
    p.rttMs = p.rttMs === Infinity ? rtt : 0.8 * p.rttMs + 0.2 * rtt
    if (a.inc > this.o.inc) { p.inc = a.inc; p.retryAt = nowMs + this.o.retryMs; return } // it knows a newer incarnation of this node: this one is stale
    if (a.inc < this.o.inc) { Object.assign(p, { inc: this.o.inc, gen: 0, have: 0, durable: true }); return }
    Object.assign(p, { inc: a.inc, gen: a.gen, have: a.have, durable: a.durable })
    if (a.gen > this.gen) p.retryAt = nowMs + this.o.retryMs // cannot be (generations grow here only); do not loop on it
    this.check()
  }

  /** A jrep got no reply. */
  onFailed (to: string, nowMs: number): void {
    const p = this.replicas.get(to)
    if (p === undefined) return
    p.inflight = false
    p.retryAt = nowMs + this.o.retryMs
    this.counters.failures++
  }

  status (): Record<string, unknown> {
    const replicas: Record<string, unknown> = {}
    for (const [n, p] of this.replicas) {
      const behind = p.inc === this.o.inc && p.gen === this.gen ? this.end - p.have : p.inc === this.o.inc && p.gen > this.gen ? 0 : this.end
      replicas[n] = { gen: p.gen, have: p.have, durable: p.durable, behind }
    }
    return { enabled: this.enabled, gen: this.gen, end: this.end, localEnd: this.local.gen === this.gen ? this.local.end : 0, waiting: this.waiters.length, acksWaiting: this.acksWaiting, replicas, ...this.counters }
  }
}

/** Most seeds that keep a copy of one seed's journal. */
export const REPLICA_GROUP = 4

/**
 * The seeds that keep copies of `writer`'s journal: the next REPLICA_GROUP
 * seeds after it in name order, wrapping (all the others with five seeds or
 * fewer). A write is durable at a majority of the writer and its group
 * (quorum.ts weights); with the writer dead, a heir must read a set of the
 * group that meets every such majority in a seed other than the writer
 * (with a group of four: three of them), and so sees every durable write.
 */
export function replicaGroup (writer: string, seeds: readonly string[]): string[] {
  const ring = seedOrder(seeds)
  const i = ring.indexOf(writer)
  if (i < 0) return []
  const out: string[] = []
  for (let k = 1; k < ring.length && out.length < REPLICA_GROUP; k++) out.push(ring[(i + k) % ring.length])
  return out
}

/** Whether position `a` is after `b`. */
function after (a: ReplPos, b: ReplPos): boolean {
  return a.gen > b.gen || (a.gen === b.gen && a.end > b.end)
}
