/**
 * The membership view: who this node has heard from, when, and what they
 * last said about their keys and rules. Filled only from validated gossip.
 * Times are monotonic.
 *
 * A peer is alive while its last gossip is younger than `aliveTimeoutMs`.
 * A peer's key figures are kept until it gossips a newer value; they are
 * what rebalancing uses to find donors and what `status` shows as the
 * cluster-wide remaining.
 *
 * Ordering. Gossip can arrive late, twice or out of order, so nothing older
 * overwrites anything newer:
 * - Incarnations: a gossip from a lower incarnation (`inc`) than the
 *   peer's current one is a delayed message of a dead process: ignored.
 *   A new incarnation replaces the view (and the caller strands grants to
 *   the old epoch).
 * - Within an epoch, messages are numbered (`seq`). Per-message facts
 *   (leaving, rules, pending) come only from a message newer than the last
 *   one applied; each key entry remembers the seq it came from and is
 *   replaced only by a newer one.
 *
 * Burns owed elsewhere (caution.ts): each entry keeps `owed` and the rule
 * hash the peer had when it sent it (`gen`). When an epoch ends (restart,
 * or departure), what it owed is kept as `legacy`, because an unpaid burn
 * is owed to the cluster, not to a process: it is dropped only once this
 * node has heard a later incarnation that carries the old one's books
 * announce all its keys (heard.ts).
 */
import { heardAll, track } from './heard.js'
import type { Gossip } from './messages.js'

/** A span of clock-offset readings (peer-types.ts `offsetCur`): the estimate is the largest of this span's and the last. */
const OFFSET_SPAN_MS = 4000
import { newPeer, NO_PENDING, type Observed, type Peer, type PeerKey } from './peer-types.js'

export type { Observed, Peer, PeerKey } from './peer-types.js'

/** What a peer's key lines are checked against before they are kept. */
export interface KeepPolicy {
  /** Our cluster hash. */
  cfg: string
  /** Whether this node has state for the key (lines for others are dropped: bounded memory). */
  known: (key: string) => boolean
  /** Most key lines kept per peer. */
  maxKeys: number
  /** The cluster file's seeds: only they may hold a pre-allocated share (`Peer.alloc`), whatever a gossip says. */
  seeds: ReadonlySet<string>
}

export class Peers {
  private readonly byName = new Map<string, Peer>()
  private readonly aliveTimeoutMs: number
  /** How long a peer at the quiet pace stays alive (`Peer.quiet`: it gossips every quietGossipMs, tuning.ts). */
  private readonly quietAliveMs: number
  private readonly keep: KeepPolicy
  /** Entries with owed > 0 or debts > 0, plus legacy debts, over all peers: 0 lets caution skip its sums. */
  owingEntries = 0
  /** Called when a gossip replaces a peer's line for a key (`old`: it had none): ClusterView keeps its sums and donor candidates current. */
  onLine: (key: string, p: Peer, old: PeerKey | undefined, line: PeerKey, nowMs: number) => void = () => {}
  /**
   * Changes when the peers a view counts may have changed other than by
   * falling silent: a peer added, come alive, forgotten or restarted, or
   * its rules or cluster changed (ClusterView walks its sums again).
   */
  version = 0

  constructor (aliveTimeoutMs: number, keep: KeepPolicy, quietAliveMs = aliveTimeoutMs) {
    this.aliveTimeoutMs = aliveTimeoutMs
    this.quietAliveMs = Math.max(aliveTimeoutMs, quietAliveMs)
    this.keep = keep
  }

  /** Record a gossip (see the header for what is kept and what is ignored). */
  observe (g: Gossip, myNode: string, myEpoch: string, nowMs: number, myCalendarMs: number): Observed | null {
    let p = this.byName.get(g.node)
    let restartedFrom: string | undefined
    const isNew = p === undefined
    if (p === undefined) {
      p = { ...newPeer(g.node, g.epoch, g.inc), lastHeard: nowMs }
      this.byName.set(g.node, p)
      this.changed()
    } else if (p.epoch !== g.epoch) {
      if (!this.newer(p, g.inc, nowMs)) return null
      restartedFrom = p.epoch
      this.restart(p, g.epoch, g.inc)
    }
    const fresh = g.seq > p.seq
    track(p, g.seq, g.prev)
    let cameBack = false
    if (fresh) {
      p.seq = g.seq
      if (!this.isAlive(p, nowMs)) {
        this.changed()
        cameBack = !isNew
      }
      p.lastHeard = nowMs
      p.leaving = g.leaving === true
      p.fenced = g.fenced === true
      p.nolease = g.nolease === true
      p.quiet = p.nolease || g.prev !== undefined
      // A share is set by the cluster file, never by a peer's word: a member that says it has one (leaves `alloc`
      // out) is still a member, to the credit checks (grant-checks.ts) and to reclaim alike.
      p.alloc = g.alloc !== false && this.keep.seeds.has(g.node)
      p.clockOffsetMs = g.now - myCalendarMs
      p.wallGapMs = g.wg ?? 0
      if (nowMs - p.offsetSpanAt >= OFFSET_SPAN_MS) {
        p.offsetPrev = p.offsetCur
        p.offsetCur = p.clockOffsetMs
        p.offsetUpPrev = p.offsetUpCur
        p.offsetUpCur = Infinity
        p.offsetSpanAt = nowMs
      } else p.offsetCur = Math.max(p.offsetCur, p.clockOffsetMs)
      // A pass named under other rules says nothing of lines under these (the sender names its next one).
      if (!sameRules(p.rules, g.rules)) { p.rules = g.rules; p.sync = 0; this.changed() }
      if (g.sync !== undefined) p.sync = g.sync
      p.pending = g.pending.length === 0 ? NO_PENDING : new Set(g.pending)
      p.carries = g.carries
      if (p.sameCluster !== (g.cfg === this.keep.cfg)) { p.sameCluster = !p.sameCluster; this.changed() }
      if (p.legacy !== null && p.pending.size === 0 && heardAll(p)) this.dropCarried(p)
    }
    // A line is labelled with the rules of the message that carried it, not the
    // peer's newest: a late message (not fresh) still fills keys the newer one
    // left out, and its lines were said under its own, older rules. Labelled
    // with the newer rules, caution.ts would read an old-version debt as the
    // current version's and skip the debt expected of the new version.
    const gen = sameRules(p.rules, g.rules) ? p.rules : g.rules
    // Zero entries are kept: "holds nothing" is information. A key a peer never
    // gossiped is assumed to be at its pre-allocated share instead.
    const decay = g.decay === undefined ? undefined : new Set(g.decay)
    for (let i = 0; i < g.keys.length; i++) {
      const [k, held, outstanding, rate, owed, debts, deferred, inTransitOut] = g.keys[i]
      const old = p.keys.get(k)
      if (old !== undefined && old.seq >= g.seq) continue
      // Bounded: a line is kept only for a key this node has, or one that carries a debt (rare, and needed by caution).
      if (old === undefined && owed === 0 && debts === 0 && !this.keep.known(k)) continue
      if (old === undefined && p.keys.size >= this.keep.maxKeys) continue
      if (old !== undefined && (old.owed > 0 || old.debts > 0)) this.owingEntries--
      if (owed > 0 || debts > 0) this.owingEntries++
      const line = { held, outstanding, rate, owed, debts, deferred, inTransitOut, said: held + outstanding + deferred + inTransitOut, gen, seq: g.seq, decaysFrom: decay?.has(i) === true ? nowMs : NaN, counted: rate }
      p.keys.set(k, line)
      this.onLine(k, p, old, line, nowMs)
      // A debt of this epoch restored from our own state file is superseded by what the epoch says now.
      const restored = p.legacy?.get(p.epoch)
      if (restored?.delete(k) === true) {
        this.owingEntries--
        if (restored.size === 0) p.legacy?.delete(p.epoch)
        if (p.legacy?.size === 0) p.legacy = null
      }
    }
    for (const [node, epoch, applied] of g.acks) {
      if (node === myNode && epoch === myEpoch && applied > p.appliedFromMe) p.appliedFromMe = applied
    }
    const out: Observed = { fresh, isNew }
    if (restartedFrom !== undefined) out.restartedFrom = restartedFrom
    if (cameBack) out.cameBack = true
    return out
  }

  /**
   * Whether incarnation `inc` of peer `p`, under an epoch other than its
   * current one, is newer. A lower incarnation is a delayed message of a
   * process that is gone. The same incarnation under another epoch can only
   * be a node whose state file was lost: believed once the epoch we knew has
   * fallen silent. So no message can roll a peer back to an older epoch.
   */
  private newer (p: Peer, inc: number, nowMs: number): boolean {
    return inc > p.inc || (inc === p.inc && !this.isAlive(p, nowMs))
  }

  /** `p` is now incarnation (epoch, inc): its old epoch ends. */
  private restart (p: Peer, epoch: string, inc: number): void {
    this.changed()
    this.endEpoch(p)
    p.epoch = epoch
    p.inc = inc
    p.seq = 0
    p.runFrom = 1
    p.missing = []
    p.sync = 0
    p.appliedFromMe = 0
    // Its echoes were of the old process: the new one has heard nothing of ours yet (rebalance.ts `hearsUs`).
    p.echoSentAt = -Infinity
  }

  /**
   * A want, grant, ack or none from `name`, bound to its sender (intake.ts),
   * says it is incarnation (epoch, inc). If that is newer than the epoch we
   * know (the same test as for gossip), the old epoch ends here as its gossip
   * would end it, and the old epoch is returned (the caller strands what was
   * sent to it); otherwise null. What the new epoch holds and which rules it
   * has come only with its gossip: until then its rules are unknown, so no
   * tokens move to or from it by want (cluster-view.ts `agrees`).
   * A name never gossiped is not created here.
   */
  evidence (name: string, epoch: string, inc: number, nowMs: number): string | null {
    const p = this.byName.get(name)
    if (p === undefined || p.epoch === epoch || !this.newer(p, inc, nowMs)) return null
    const from = p.epoch
    this.restart(p, epoch, inc)
    p.rules = {}
    return from
  }

  /** The peer's epoch is over: its key view goes; what it owed stays, as legacy. */
  private endEpoch (p: Peer): void {
    let owed: Map<string, number> | null = null
    for (const [k, e] of p.keys) {
      if (e.owed <= 0 && e.debts <= 0) continue
      this.owingEntries--
      if (e.owed <= 0) continue
      owed ??= new Map()
      owed.set(k, e.owed)
    }
    if (owed !== null) {
      p.legacy ??= new Map()
      p.legacy.set(p.epoch, owed)
      this.owingEntries += owed.size
    }
    p.keys = new Map()
  }

  /** Legacy of epochs the current one carries, once it has announced every key, is in its own entries now. */
  private dropCarried (p: Peer): void {
    const legacy = p.legacy as Map<string, Map<string, number>>
    for (const e of p.carries) {
      const m = legacy.get(e)
      if (m === undefined) continue
      this.owingEntries -= m.size
      legacy.delete(e)
    }
    if (legacy.size === 0) p.legacy = null
  }

  /** Restore debts known at a clean stop (persist.ts): `epoch` of `name` owed these. */
  restoreLegacy (name: string, epoch: string, inc: number, owed: Map<string, number>): void {
    let p = this.byName.get(name)
    if (p === undefined) {
      p = { ...newPeer(name, epoch, inc), alloc: this.keep.seeds.has(name) }
      this.byName.set(name, p)
      this.changed()
    }
    p.legacy ??= new Map()
    const m = p.legacy.get(epoch) ?? new Map<string, number>()
    for (const [k, n] of owed) {
      if (!m.has(k)) this.owingEntries++
      m.set(k, Math.max(n, m.get(k) ?? 0))
    }
    p.legacy.set(epoch, m)
  }

  /** Every debt known of others, by node and epoch (for the state file). */
  knownDebts (): Array<{ node: string, epoch: string, inc: number, owed: Record<string, number> }> {
    const out: Array<{ node: string, epoch: string, inc: number, owed: Record<string, number> }> = []
    for (const p of this.byName.values()) {
      const cur: Record<string, number> = {}
      for (const [k, e] of p.keys) if (e.owed > 0) cur[k] = e.owed
      if (Object.keys(cur).length > 0) out.push({ node: p.name, epoch: p.epoch, inc: p.inc, owed: cur })
      for (const [epoch, m] of p.legacy ?? []) out.push({ node: p.name, epoch, inc: p.inc, owed: Object.fromEntries(m) })
    }
    return out
  }

  /** Tokens of `key` that ended epochs of `p` still owe. */
  legacyOwed (p: Peer, key: string): number {
    if (p.legacy === null) return 0
    let n = 0
    for (const m of p.legacy.values()) n += m.get(key) ?? 0
    return n
  }

  /**
   * Forget a peer that left: its key view and acks go (bounded memory over
   * many joins and leaves), but burns it owed stay as legacy under its name.
   * Returns false if there was nothing to forget.
   */
  forget (name: string): boolean {
    const p = this.byName.get(name)
    if (p === undefined) return false
    this.changed()
    this.endEpoch(p)
    if (p.legacy === null) { this.byName.delete(name); return true }
    // Keep a husk that carries only the debts (a later incarnation may carry them).
    p.rules = {}
    p.pending = NO_PENDING
    p.sync = 0
    return true
  }

  get (name: string): Peer | undefined {
    return this.byName.get(name)
  }

  isAlive (p: Peer, nowMs: number): boolean {
    return nowMs - p.lastHeard <= (p.quiet ? this.quietAliveMs : this.aliveTimeoutMs)
  }

  /** This node's calendar jumped by -`ms` (cluster-core.ts observeWall): every offset read against it moves by `ms`. */
  shiftOffsets (ms: number): void {
    for (const p of this.byName.values()) {
      p.clockOffsetMs += ms
      p.offsetCur += ms
      p.offsetPrev += ms
      p.offsetUpCur += ms
      p.offsetUpPrev += ms
    }
  }

  all (): IterableIterator<Peer> {
    return this.byName.values()
  }

  get size (): number {
    return this.byName.size
  }

  /** Whether any peer is alive (cheaper than `alive(nowMs).length > 0`: no list, stops at the first). */
  anyAlive (nowMs: number): boolean {
    for (const p of this.byName.values()) if (this.isAlive(p, nowMs)) return true
    return false
  }

  /**
   * The alive peers at `nowMs`. Read-only: the list is shared by every
   * caller at the same `nowMs` (a tick asks once per active key; a new list
   * each time was most of the simulator's garbage at 200 nodes). At a fixed
   * `nowMs` a peer only comes alive (a gossip, a new peer) or goes (forget),
   * and both drop the list.
   */
  alive (nowMs: number): readonly Peer[] {
    if (nowMs === this.aliveAt) return this.aliveList
    const out: Peer[] = []
    for (const p of this.byName.values()) if (this.isAlive(p, nowMs)) out.push(p)
    this.aliveAt = nowMs
    this.aliveList = out
    return out
  }

  private aliveAt = NaN

  /** The alive list and the views' sums may be out of date (see `version`). */
  private changed (): void {
    this.aliveAt = NaN
    this.version++
  }
  private aliveList: readonly Peer[] = []
}

/** Whether two rule maps are equal, so that unchanged rules share one object across entries. */
function sameRules (a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a)
  if (ka.length !== Object.keys(b).length) return false
  for (const k of ka) if (a[k] !== b[k]) return false
  return true
}
