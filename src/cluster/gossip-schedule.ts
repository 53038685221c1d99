/**
 * When gossip goes out and which keys it offers: the per-interval delta,
 * the full-sync passes (anti-entropy) and the `pending` rules.
 *
 * Candidates for a message, in order: a key carried over from the last
 * message (taken but over the byte budget), the active keys, the keys whose
 * grants settled (acked or stranded) since they were last offered (their
 * custody moved though they may be quiet: peers' shortfall reads it), then
 * the resumable full-sync pass over every key with cluster state (each
 * marked stale as the pass reaches it, so it is sent). A pass starts on the
 * `fullSyncEvery`-th gossip, or at once when something asks for it (a peer
 * that is new or restarted, a rule change), and only after the last one
 * ended: a large table takes many messages.
 *
 * `pending` (Gossip.pending): the rules whose keys this node has not all
 * announced since it started or since the rule last changed. It clears
 * when a pass that began after the last change has offered every key and
 * every one was taken. Until then peers may not read a missing key as
 * "no state here, so no burn owed" (caution.ts). The same pass, once it
 * ends, is named by its first message's seq (Gossip.sync, `syncMark`), so
 * a peer can tell whether it heard the whole pass (heard.ts `heardAll`):
 * `pending` says what was sent, not what arrived.
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { buildGossip } from './gossip-builder.js'
import { ext } from './key-ext.js'
import { MemberCopies } from './member-copies.js'
import { RepeatReader, RepeatSender } from './gossip-repeat.js'
import { needsLease } from './member-gossip.js'
import type { Gossip } from './messages.js'

/** Gossips that carry the `sync` mark after it moved (one lost gossip does not delay it to the next full sync). */
const SYNC_REPEATS = 2
/** Intervals in which a moved applied mark is acked to its giver directly (one lost ack does not cost a resend). */
const ACK_REPEATS = 2

export class GossipSchedule {
  private readonly core: ClusterCore
  /** At a seed: which gossips the members get a copy of (member-gossip.ts `gossipOut`). */
  readonly copies = new MemberCopies()
  /** This node's gossips, and a seed's members' copies, that repeat the last as `hb`s (gossip-repeat.ts); and its peers'. */
  readonly repeat = { own: new RepeatSender(), copy: new RepeatSender(), reader: new RepeatReader() }
  private last = -Infinity
  /** The last gossip said `nolease`: peers read this node alive for longer (peers.ts isAlive). */
  private saidQuiet = false
  /** Until then no quiet pace: a seed came (back) into view, and should hear this node soon (`seedReturned`). */
  private loudUntil = -Infinity
  private count = 0
  private seq = 0
  private fullSync = true
  private cursor: Iterator<KeyState> | null = null
  private carry: KeyState | null = null
  /** Keys whose grants settled, not offered yet (a key leaves the set as it is offered; bounded by the key table). */
  private readonly settled = new Set<string>()
  private readonly announcing = new Set<string>()
  private changes = 0
  private passFrom = -1
  private passDone = false
  /** The seq of the pass in progress's first message, and the first of the last complete pass begun after the last change (0: none). */
  private passSeq = 0
  private syncSeq = 0
  /** How many more gossips repeat the sync mark (it moved). */
  private syncRepeats = 0
  /** The member list version last sent, and whether this message is a full sync's first (which always sends it). */
  private membersSent = -1
  private syncStart = false
  /** Per `giver/epoch`: the applied mark last acked to that giver directly, and how many more times to send it (`directAcks`). */
  private ackSent = new Map<string, [applied: number, repeats: number]>()

  constructor (core: ClusterCore, rules: readonly string[]) {
    this.core = core
    // A new epoch announces every key before peers may read absence as "nothing owed".
    for (const r of rules) this.announcing.add(r)
  }

  /**
   * The gossip due at `nowMs`, if the interval has passed: `gossipIntervalMs`,
   * or `quietGossipMs` at a member that needs no lease (it has nothing to
   * say but that it lives; peers give it as much longer to be alive). Only
   * after a gossip that said so (`nolease`): until peers have heard it, they
   * give it the usual time; not while a full-sync pass is under way; not
   * while some seed is silent in its view (cut off, or forgotten: once back
   * it must hear this node soon, and a seed that forgot its members
   * publishes no members' copy until it hears one); and not for
   * `aliveTimeoutMs` after a seed came into view (new, restarted, or back).
   * Once it needs one, the next tick past the usual interval sends.
   */
  due (nowMs: number): Gossip | null {
    const t = this.core.tuning
    if (nowMs - this.last < t.gossipIntervalMs) return null
    // A pass under way (lines left over, keys not reached) goes at the usual pace: peers wait on it (`pending`).
    if (nowMs - this.last < t.quietGossipMs && this.quiet(nowMs)) return null
    if ((this.fullSync || ++this.count % this.core.tuning.fullSyncEvery === 0) && this.cursor === null) {
      this.cursor = this.core.limiter.states()
      this.passFrom = this.changes
      this.passDone = false
      this.passSeq = this.seq + 1
      this.syncStart = true
    }
    this.fullSync = false
    return this.now(nowMs)
  }

  /** Whether this node may wait quietGossipMs for its next gossip (see `due`). */
  private quiet (nowMs: number): boolean {
    const c = this.core
    if (!this.saidQuiet || nowMs < this.loudUntil || this.carry !== null || this.cursor !== null || !this.hearsEverySeed(nowMs)) return false
    return !needsLease(c, nowMs)
  }

  /** Every seed alive in this node's view: none cut off, or forgotten, that must hear this node soon once back. */
  private hearsEverySeed (nowMs: number): boolean {
    const c = this.core
    for (const s of c.seeds) {
      if (s === c.node) continue
      const p = c.peers.get(s)
      if (p === undefined || !c.peers.isAlive(p, nowMs)) return false
    }
    return true
  }

  /** Whether a seed came (back) into view lately: this node's gossips go whole (gossip-repeat.ts). */
  loud (nowMs: number): boolean {
    return nowMs < this.loudUntil
  }

  /** A seed came (back) into view: the usual pace for `aliveTimeoutMs`. */
  seedReturned (nowMs: number): void {
    this.loudUntil = nowMs + this.core.tuning.aliveTimeoutMs
  }

  /** Gossips built so far by this incarnation (its last seq). */
  get sent (): number { return this.seq }

  /** A gossip now, outside the schedule (a stop's announcements). */
  now (nowMs: number): Gossip {
    this.last = nowMs
    const { msg, leftover } = buildGossip(this.core, this.candidates(nowMs), nowMs)
    this.carry = leftover
    this.saidQuiet = msg.nolease === true
    this.syncStart = false
    if (this.passDone && this.carry === null && this.passFrom === this.changes) {
      this.announcing.clear()
      if (this.syncSeq !== this.passSeq) {
        this.syncSeq = this.passSeq
        this.syncRepeats = SYNC_REPEATS
      }
    }
    return msg
  }

  /** A peer needs every key: start a pass at the next gossip. */
  requestFullSync (): void {
    this.fullSync = true
  }

  /** These rules changed: their keys are pending until a fresh pass has announced them all. */
  rulesChanged (names: readonly string[]): void {
    if (names.length === 0) return
    for (const n of names) this.announcing.add(n)
    // Lines said before the change are under the old rules: no pass counts until one begun after it ends.
    this.syncSeq = 0
    this.changes++
    this.cursor = null
    this.fullSync = true
  }

  /** Whether this message carries the member list: it changed since last sent, or a full sync starts. */
  membersDue (): boolean {
    return this.syncStart || this.membersSent !== this.core.membership.version
  }

  /** Called by the builder when it includes the list. */
  sendMembers (): boolean {
    if (!this.membersDue()) return false
    this.membersSent = this.core.membership.version
    return true
  }

  /** Whether this message is a full sync's first (it carries the ack marks and every member sum). */
  syncStarts (): boolean { return this.syncStart }

  /**
   * The ledger's acks this message carries: on a full sync's first message,
   * the marks of givers that are seeds, none otherwise. A mark that moved
   * goes to its giver alone (`directAcks`); the full sync is the
   * anti-entropy behind it. Marks in every gossip, or in the two after each
   * move, reached every node though only the giver reads one: 789 of a
   * gossip's 2,906 bytes at keys100 with 50 nodes, then 125 of 720 at 200
   * nodes with the moves only. A seed's full-sync list named every member
   * that returned it tokens, and reached every member though each reads
   * only its own mark (169 of a seed's 1,542 bytes a gossip at keys100 on
   * 5 seeds of 200): a member giver's marks go to it directly instead, as
   * if they had moved (`directAcks`). With every node a seed, nothing
   * changes.
   */
  acks (): Array<[string, string, number]> {
    // Listed only when sent: a list of every giver per gossip, thrown away 19 times in 20, was O(peers) for nothing.
    if (!this.syncStart) return []
    const listed: Array<[string, string, number]> = []
    for (const a of this.ackMarks()) {
      if (this.core.msums.isSeed(a[0])) listed.push(a)
      else this.ackSent.delete(`${a[0]}/${a[1]}`)
    }
    return listed
  }

  /** The marks this node acks, [giver, epoch, mark]: what it applied, and a replicating seed only what its copies hold (durable-acks.ts). */
  ackMarks (): Array<[string, string, number]> {
    return this.core.replication.ackable(this.core.ledger.acks(this.core.currentEpochs()))
  }

  /**
   * The marks to ack directly at this gossip interval: those that moved
   * within the last ACK_REPEATS intervals. One message per giver per
   * interval however many of its grants were applied. Lost both times, it
   * costs what a lost gossip ack did: the giver resends the grant after `retransmitMs`,
   * and a resend is pushed, so its reply is an ack (ledger.ts); and the next
   * full sync carries every mark. A giver gone from `all` (its epoch ended)
   * is forgotten here too.
   */
  directAcks (all: Array<[string, string, number]>): Array<[string, string, number]> {
    const next = new Map<string, [number, number]>()
    const out: Array<[string, string, number]> = []
    for (const a of all) {
      const id = `${a[0]}/${a[1]}`
      const was = this.ackSent.get(id)
      const repeats = was === undefined || was[0] !== a[2] ? ACK_REPEATS : was[1]
      if (repeats > 0) out.push(a)
      next.set(id, [a[2], Math.max(0, repeats - 1)])
    }
    this.ackSent = next
    return out
  }

  pendingRules (): string[] {
    return [...this.announcing]
  }

  /**
   * Gossip.sync for this message, 0 to leave it out: the first seq of the
   * last complete pass begun after the last rule change, in the
   * SYNC_REPEATS gossips after it moved and in every full sync's first
   * message. Peers keep the last one heard until this node's rules change
   * (peers.ts), so leaving it out says nothing different; a peer that lost
   * every repeat waits for the next full sync. In every gossip it was 1% of
   * what a node received at 200 nodes.
   */
  syncMark (): number {
    if (this.syncSeq === 0 || (!this.syncStart && this.syncRepeats === 0)) return 0
    this.syncRepeats = Math.max(0, this.syncRepeats - 1)
    return this.syncSeq
  }

  nextSeq (): number {
    return ++this.seq
  }

  private * candidates (nowMs: number): Generator<KeyState> {
    const carried = this.carry
    this.carry = null
    if (carried !== null) yield carried
    yield * this.core.active
    for (const k of this.core.ledger.settledKeys()) this.settled.add(k)
    for (const k of this.settled) {
      // Deleted as offered: the builder stops right after a key it took, so the rest wait for the next message.
      this.settled.delete(k)
      const ks = this.core.limiter.existing(k)
      if (ks !== undefined && ks.ext !== null) yield ks
    }
    const c = this.cursor
    if (c === null) return
    while (true) {
      const n = c.next()
      if (n.done === true) { this.cursor = null; this.passDone = true; return }
      if (n.value.ext === null) continue
      const x = ext(n.value)
      // Already in this message (an active or settled key, taken above): announced in the pass as it is. Marked
      // stale, it went out a second time in the same message, which its receivers skip (same seq): at every full
      // sync, every active key twice.
      if (x.sentAt === nowMs) continue
      x.sentHeld = NaN
      yield n.value
    }
  }
}
