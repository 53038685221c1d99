/**
 * The cluster state machine. Pure: it handles events (a local acquire, a
 * tick, a gossip, a want, a grant, a reply or a failed request) with `nowMs`
 * passed in, and returns the messages to send. It does no I/O and reads no
 * clock; the daemon's driver carries its messages over libp2p, and the
 * simulator carries them over a virtual network. Both run this same code.
 *
 * Safety (hard mode never admits more than the exact limiter): a node admits
 * only by spending tokens its own bucket holds (Limiter.acquireOn). Tokens
 * leave a bucket only by `debit` into a grant, and enter only by a grant the
 * Ledger accepts exactly once. Nothing else creates tokens, so the sum over
 * buckets, grants in flight and deferred credits never exceeds the stock.
 */
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import { Limiter, type KeyState, type Waiter } from '../core/limiter.js'
import { homeNode, seedOrder } from '../core/share.js'
import { carryOver } from './reload.js'
import type { Decision } from '../core/types.js'
import { applyDeferred, burnDue, ext, horizon, keepRate, needRate, updateRate, windowed, windowStart, type KeyExt } from './key-ext.js'
import { repayDebt, softVerdict, updatePacing } from './local-policy.js'
import { Ledger } from './ledger.js'
import { CLUSTER_VERSION, type Ack, type Gossip, type Grant, type GrantItem, type None, type Want } from './messages.js'
import { Peers, type Peer } from './peers.js'
import { buildGossip } from './gossip-builder.js'
import { agrees, ClusterView } from './cluster-view.js'
import { defaultTuning, type ClusterTuning } from './tuning.js'

export interface ClusterCoreOptions {
  node: string
  /** This incarnation's id: new at every process start. */
  epoch: string
  seeds: readonly string[]
  rules: RuleConfig[]
  limits: LimitsConfig
  /** May this node materialize pre-allocated shares? False after an unclean restart. */
  allocate: boolean
  tuning?: Partial<ClusterTuning>
}

export type Outbound =
  | { kind: 'gossip', msg: Gossip }
  | { kind: 'request', to: string, msg: Want | Grant }

export class ClusterCore {
  readonly node: string
  readonly epoch: string
  readonly limiter: Limiter
  readonly ledger: Ledger
  readonly peers: Peers
  readonly tuning: ClusterTuning
  /** Where tokens are and should go, as this node sees the cluster. */
  readonly view: ClusterView
  private readonly seeds: string[]
  /** Keys with something to do on ticks (rate decay, wants, deferred, debt, gossip). */
  private readonly active = new Set<KeyState>()
  private lastTick = -Infinity
  private lastGossip = -Infinity
  private gossips = 0
  private fullSync = true
  /** Resumable pass over every key with cluster state, for full syncs. */
  private syncCursor: Iterator<KeyState> | null = null
  /** Set when this node starts to stop: its gossip says so and peers send it nothing more. */
  leaving = false
  /** Counters for status and metrics. */
  readonly counters = { badMessages: 0, wantsSent: 0, wantsServed: 0, grantsApplied: 0, grantsRejected: 0, tokensIn: 0, tokensOut: 0 }

  constructor (opts: ClusterCoreOptions) {
    this.node = opts.node
    this.epoch = opts.epoch
    this.seeds = seedOrder(opts.seeds)
    this.tuning = { ...defaultTuning(opts.tuning?.gossipIntervalMs), ...opts.tuning }
    this.ledger = new Ledger(opts.node, opts.epoch)
    this.peers = new Peers(this.tuning.aliveTimeoutMs)
    this.view = new ClusterView(this.node, this.seeds, this.peers, this.tuning)
    this.limiter = new Limiter({
      node: opts.node,
      seeds: this.seeds,
      rules: opts.rules,
      limits: opts.limits,
      allocate: opts.allocate,
      canEvict: (ks) => this.canEvict(ks),
      onRuleChange: (ks, next, nowMs) => { carryOver(ks, next, this.node, this.seeds, nowMs); this.active.add(ks) }
    })
  }

  /** Materialize the exact-key rules' shares at start, so peers learn of them from the first gossip. */
  init (nowMs: number): void {
    for (const r of this.limiter.rules) {
      if (!r.glob) this.touch(this.limiter.keyState(r.config.match, 1, nowMs))
    }
  }

  // ---- local decisions -------------------------------------------------

  acquire (key: string, count: number, nowMs: number): Decision {
    const ks = this.limiter.keyState(key, count, nowMs)
    const x = this.prepare(ks, count, nowMs)
    const special = this.policy(ks, x, count, nowMs)
    if (special !== undefined) return special
    const d = this.limiter.acquireOn(ks, count, nowMs)
    if (d.allowed && x.tight) x.pace -= count
    return d
  }

  acquireOrWait (key: string, count: number, waitMs: number, nowMs: number, ref: unknown): Decision | Waiter {
    const ks = this.limiter.keyState(key, count, nowMs)
    const x = this.prepare(ks, count, nowMs)
    const special = this.policy(ks, x, count, nowMs)
    if (special !== undefined) return special
    return this.limiter.acquireOrWait(key, count, waitMs, nowMs, ref)
  }

  peek (key: string, count: number, nowMs: number): Decision {
    const ks = this.limiter.keyState(key, count, nowMs)
    applyDeferred(ks, ext(ks), nowMs)
    return this.limiter.peek(key, count, nowMs)
  }

  private prepare (ks: KeyState, count: number, nowMs: number): KeyExt {
    const x = ext(ks)
    if (x.deferred !== null) applyDeferred(ks, x, nowMs)
    if (x.burn > 0) burnDue(ks, x, nowMs)
    x.demand += count
    x.lastDemandAt = nowMs
    this.active.add(ks)
    return x
  }

  /** A glob key holding tokens away from its home stays active until it has gone back. */
  private owesHome (ks: KeyState): boolean {
    return ks.rule.glob && ks.bucket.held >= 1 && homeNode(ks.key, this.seeds) !== this.node
  }

  /** Soft-mode failure policies and tightening pacing; undefined: decide normally. */
  private policy (ks: KeyState, x: KeyExt, count: number, nowMs: number): Decision | undefined {
    if (ks.rule.config.mode === 'soft' && this.isolated(nowMs)) {
      return this.notBefore(this.limiter.decide(ks, softVerdict(ks, x, count, nowMs) === 'allow', count, nowMs), this.tuning.aliveTimeoutMs)
    }
    if (x.tight && count > x.pace) return this.notBefore(this.limiter.decide(ks, false, count, nowMs), this.tuning.tickMs)
    return undefined
  }

  /** A denial by policy while tokens are held: say when to try again rather than "now". */
  private notBefore (d: Decision, ms: number): Decision {
    if (!d.allowed && d.retryAfterMs === 0) d.retryAfterMs = ms
    return d
  }

  /** No peer alive in a cluster that has others: the condition soft-mode policies apply to. */
  isolated (nowMs: number): boolean {
    if (this.seeds.length <= 1 && [...this.peers.all()].length === 0) return false
    return this.peers.alive(nowMs).length === 0
  }

  // ---- ticks -------------------------------------------------------------

  tick (nowMs: number): Outbound[] {
    const out: Outbound[] = []
    const dt = this.lastTick === -Infinity ? this.tuning.tickMs : nowMs - this.lastTick
    this.lastTick = nowMs
    const isolated = this.isolated(nowMs)
    for (const ks of this.active) {
      const x = ext(ks)
      if (applyDeferred(ks, x, nowMs)) this.limiter.touched(ks, nowMs)
      burnDue(ks, x, nowMs)
      updateRate(x, dt, this.tuning.rateHalfLifeMs, 2 * this.tuning.tickMs)
      if (x.debt > 0 && !isolated) repayDebt(ks, x, nowMs)
      ks.bucket.advance(nowMs)
      const tight = this.seeds.length > 1 && this.view.clusterRemaining(ks, nowMs) < this.tuning.lowWater * ks.rule.stock
      updatePacing(ks, x, tight, dt, nowMs)
      if (!isolated) this.rebalance(ks, x, nowMs, out)
      if (this.quiet(ks, x, nowMs)) {
        this.active.delete(ks)
        x.tight = false // recomputed when the key is next used
      }
    }
    for (const g of this.ledger.due(nowMs, this.tuning.retransmitMs)) out.push({ kind: 'request', to: g.to, msg: g })
    if (nowMs - this.lastGossip >= this.tuning.gossipIntervalMs) {
      this.lastGossip = nowMs
      // A full pass over a large table takes many gossips; start the next only when it is done.
      if ((this.fullSync || ++this.gossips % this.tuning.fullSyncEvery === 0) && this.syncCursor === null) this.syncCursor = this.limiter.states()
      this.fullSync = false
      out.push({ kind: 'gossip', msg: buildGossip(this, this.candidates(), nowMs) })
    }
    return out
  }

  /** Each known peer's current epoch (for the ack list). */
  currentEpochs (): Map<string, string> {
    const m = new Map<string, string>()
    for (const p of this.peers.all()) m.set(p.name, p.epoch)
    return m
  }

  /** A gossip now, outside the tick schedule (the last one before a graceful stop). */
  gossipNow (nowMs: number): Gossip {
    this.lastGossip = nowMs
    return buildGossip(this, this.candidates(), nowMs)
  }

  /** Active keys first, then the full-sync pass (which marks each key stale as it reaches it). */
  private * candidates (): Generator<KeyState> {
    yield * this.active
    const c = this.syncCursor
    if (c === null) return
    while (true) {
      const n = c.next()
      if (n.done === true) { this.syncCursor = null; return }
      if (n.value.ext === null) continue
      ext(n.value).sentHeld = NaN
      yield n.value
    }
  }

  private quiet (ks: KeyState, x: KeyExt, nowMs: number): boolean {
    return x.rate === 0 && x.fastRate === 0 && x.demand === 0 && x.debt === 0 && x.deferred === null &&
      x.wantSentAt + this.tuning.wantTimeoutMs < nowMs &&
      x.sentHeld === ks.bucket.held && !this.owesHome(ks)
  }

  private rebalance (ks: KeyState, x: KeyExt, nowMs: number, out: Outbound[]): void {
    if (nowMs - x.wantSentAt < this.tuning.wantTimeoutMs) return
    if (this.view.shouldReturnHome(ks, x, nowMs)) {
      const home = homeNode(ks.key, this.seeds) as string
      const p = this.peers.get(home)
      if (p !== undefined) this.give(ks, x, p, Math.floor(ks.bucket.held), nowMs, out)
      return
    }
    // After a want that got nothing, one per gap: fruitless wants are bounded by the key count, not the request rate.
    if (nowMs - x.lastWantAt < this.tuning.wantGapMs) return
    const rate = needRate(x)
    if (rate <= 0) return
    const need = rate * horizon(ks, this.tuning.horizonMs, nowMs) / 1000
    const held = ks.bucket.held
    if (held >= need && held >= 1) return
    const donor = this.view.chooseDonor(ks, nowMs)
    if (donor === undefined) return
    const want = Math.max(1, Math.ceil(2 * need - held))
    x.wantSentAt = nowMs
    x.lastWantAt = nowMs
    this.counters.wantsSent++
    out.push({ kind: 'request', to: donor.name, msg: { v: CLUSTER_VERSION, t: 'want', node: this.node, epoch: this.epoch, key: ks.key, want } })
  }

  // ---- messages in -------------------------------------------------------

  onGossip (g: Gossip, nowMs: number): void {
    if (g.node === this.node) return
    const { isNew, restartedFrom } = this.peers.observe(g, this.node, this.epoch, nowMs)
    const p = this.peers.get(g.node) as Peer
    if (restartedFrom !== undefined) this.strand(this.ledger.peerEpoch(g.node, g.epoch))
    // A peer we have not heard in this epoch needs every key, not just a delta.
    if (isNew || restartedFrom !== undefined) this.fullSync = true
    this.ledger.ack(g.node, g.epoch, p.appliedFromMe)
  }

  private strand (lost: Map<string, number>): void {
    for (const [k, n] of lost) {
      const ks = this.limiter.existing(k)
      if (ks !== undefined) ext(ks).stranded += n
    }
  }

  /** A peer asks for tokens. The donor debits before the grant exists. */
  onWant (w: Want, nowMs: number): Grant | None {
    const none: None = { v: CLUSTER_VERSION, t: 'none', node: this.node, epoch: this.epoch }
    const p = this.peers.get(w.node)
    if (p === undefined || p.epoch !== w.epoch || w.node === this.node) return none
    let ks: KeyState
    try {
      ks = this.limiter.existing(w.key) ?? this.limiter.keyState(w.key, 1, nowMs)
    } catch {
      return none
    }
    if (!agrees(p, ks)) return none
    const x = ext(ks)
    applyDeferred(ks, x, nowMs)
    burnDue(ks, x, nowMs)
    const keep = keepRate(x) * horizon(ks, this.tuning.horizonMs, nowMs) / 1000 + x.debt
    // A token this node expects to use less than half of goes: kept, it would likely lapse unspent.
    let surplus = Math.floor(ks.bucket.held - keep + 0.5)
    if (surplus >= 1 && this.view.clusterRemaining(ks, nowMs) < this.tuning.lowWater * ks.rule.stock) {
      // Tight: a part at a time, but at least one, or the last tokens would sit where no one asks for them.
      surplus = Math.max(1, Math.floor(surplus * this.tuning.tightenFraction))
    }
    const n = Math.min(Math.floor(w.want), surplus)
    if (n < 1) return none
    const out: Outbound[] = []
    const g = this.give(ks, x, p, n, nowMs, out)
    if (g === undefined) return none
    this.counters.wantsServed++
    return g
  }

  /** Debit `n` tokens of a key and put them in a grant to `p`. */
  private give (ks: KeyState, x: KeyExt, p: Peer, n: number, nowMs: number, out: Outbound[]): Grant | undefined {
    const moved = ks.bucket.debit(n)
    if (moved <= 0) return undefined
    const rule = ks.rule.config
    // The limiter's monotone time: a clock stepping back must not tag an earlier window.
    const t = Math.max(nowMs, this.limiter.now)
    const at = windowed(rule.algorithm) ? windowStart(t, rule.perMs) : t
    x.transfersOut += moved
    this.counters.tokensOut += moved
    this.active.add(ks)
    const g = this.ledger.grant(p.name, p.epoch, [[ks.key, moved, at]], nowMs)
    out.push({ kind: 'request', to: p.name, msg: g })
    return g
  }

  /** Tokens arrive. The ledger lets each grant through at most once. */
  onGrant (g: Grant, nowMs: number): Ack {
    const { result, credit } = this.ledger.apply(g)
    for (const c of credit) {
      this.counters.grantsApplied++
      for (const item of c.items) this.credit(item, nowMs)
    }
    if (result === 'gap' || result === 'wrong-epoch') this.counters.grantsRejected++
    return { v: CLUSTER_VERSION, t: 'ack', node: this.node, epoch: this.epoch, applied: this.ledger.appliedFrom(g.node, g.epoch) }
  }

  private credit ([key, amount, at]: GrantItem, nowMs: number): void {
    let ks: KeyState
    try {
      ks = this.limiter.existing(key) ?? this.limiter.keyState(key, 1, nowMs)
    } catch {
      // No rule or no room: the tokens can't be placed. They are lost, never created.
      this.ledger.stranded += amount
      return
    }
    const x = ext(ks)
    x.transfersIn += amount
    this.counters.tokensIn += amount
    if (at > nowMs) {
      (x.deferred ??= []).push([amount, at])
    } else {
      ks.bucket.credit(amount)
      this.limiter.touched(ks, nowMs)
    }
    // Tokens came: asking again at once is progress. Only wants that got nothing wait out the gap.
    x.wantSentAt = -Infinity
    x.lastWantAt = -Infinity
    this.active.add(ks)
  }

  /** The reply to a request this node sent. */
  onReply (req: Want | Grant, reply: Grant | Ack | None, nowMs: number): void {
    if (reply.t === 'grant') {
      this.onGrant(reply, nowMs)
      // The donor holds that much less now: don't ask it again on a view its next gossip would correct.
      const ks = req.t === 'want' ? this.limiter.existing(req.key) : undefined
      if (ks !== undefined) this.view.believeHeld(reply.node, ks, -reply.items.reduce((n, i) => n + (i[0] === ks.key ? i[1] : 0), 0))
    } else if (reply.t === 'ack') {
      if (req.t === 'grant') this.ledger.ack(reply.node, reply.epoch, reply.applied)
    } else if (req.t === 'want') {
      // No surplus there: forget its gossiped holding until it says otherwise.
      const k = this.peers.get(reply.node)?.keys.get(req.key)
      if (k !== undefined) k.held = 0
      const ks = this.limiter.existing(req.key)
      if (ks !== undefined) ext(ks).wantSentAt = -Infinity
    }
  }

  /** A request got no reply. A want may be retried elsewhere; a grant is resent by the ledger. */
  onRequestFailed (req: Want | Grant, _nowMs: number): void {
    if (req.t === 'want') {
      const ks = this.limiter.existing(req.key)
      if (ks !== undefined) ext(ks).wantSentAt = -Infinity
    }
  }

  /** A peer sent something malformed: counted, dropped. */
  onBadMessage (): void {
    this.counters.badMessages++
  }

  // ---- leaving -------------------------------------------------------------

  /**
   * Graceful stop: hand every whole held token to alive agreeing peers, the
   * fastest consumer of each key first. Returns the grants to send.
   */
  handoff (nowMs: number): Outbound[] {
    const out: Outbound[] = []
    const alive = this.peers.alive(nowMs)
    for (const ks of this.limiter.states()) {
      const x = ext(ks)
      applyDeferred(ks, x, nowMs)
      ks.bucket.advance(nowMs)
      const n = Math.floor(ks.bucket.held)
      if (n < 1) continue
      let to: Peer | undefined
      let rate = -1
      for (const p of alive) {
        if (p.leaving || !agrees(p, ks)) continue
        const r = p.keys.get(ks.key)?.rate ?? 0
        if (r > rate) { to = p; rate = r }
      }
      if (to !== undefined) this.give(ks, x, to, n, nowMs, out)
    }
    return out
  }

  /** Only glob keys are evicted (exact keys are bounded by the rules); never with cluster work pending. */
  private canEvict (ks: KeyState): boolean {
    const x = ks.ext as KeyExt | null
    return ks.rule.glob && (x === null || (x.debt === 0 && x.deferred === null && !this.active.has(ks)))
  }

  /** Mark a key for the next gossip. */
  touch (ks: KeyState): void {
    ext(ks)
    this.active.add(ks)
  }
}
