/**
 * The clocked shell around the pure Limiter: it implements the QuotaService
 * the Unix-socket server calls. It owns the only timers of the decision path:
 * one timeout for the earliest waiter wake-up, and one interval that sweeps
 * idle keys. Everything it decides, the Limiter decides.
 */
import { wallEdge, type Clock } from '../clock.js'
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import { Limiter, type Resolution, type Waiter } from '../core/limiter.js'
import { Calendar } from '../core/calendar.js'
import { elsewhereError } from '../errors.js'
import type { LoneStore } from './lone-store.js'
import { availableIn } from './spend-ahead.js'

/** Who makes decisions: a plain Limiter on its own, or the cluster state machine around one. */
export interface Decider {
  acquire: (key: string, count: number, nowMs: number) => Decision
  acquireOrWait: (key: string, count: number, waitMs: number, nowMs: number, ref: unknown) => Decision | Waiter
  peek: (key: string, count: number, nowMs: number) => Decision
  /** Replace the rules (SIGHUP); returns waiters to answer (their keys lost their rule). */
  setRules: (rules: RuleConfig[], nowMs: number) => Resolution[]
  /** How long a request without `waitMs` may wait for tokens of a key new here (0: answer now). */
  firstUseWaitMs?: (key: string, count: number, nowMs: number) => number
}
import { isWaitHandle, type AcquireResult, type Decision, type QuotaService, type WaitHandle } from '../core/types.js'

export interface LocalQuotaOptions {
  node: string
  seeds: readonly string[]
  rules: RuleConfig[]
  limits: LimitsConfig
  clock: Clock
  /** How often idle keys are swept. @default 1000 */
  sweepIntervalMs?: number
  /** Keys examined per sweep. @default 20000 */
  sweepBudget?: number
  /** Decide through this (the cluster) instead of a Limiter of our own; it must wrap `limiter`. */
  cluster?: ClusterBinding
}

/** The cluster a node decides through (its core, and the core's limiter): replaced when the node starts a new incarnation in-process. */
export interface ClusterBinding {
    decider: Decider
    limiter: Limiter
    status: () => Record<string, unknown>
    urgent?: () => void
    /** A member's acquire decided at a seed (`decide: "seeds"`, forward.ts): its answer to come; null: decide here. */
    forward?: (key: string, count: number, waitMs: number, here: boolean) => Promise<Decision> | null
    /** Whether a key's acquires go to a seed (forward.ts `decidesAtSeeds`). */
    elsewhere?: (key: string) => boolean
}

export interface DecisionTiming {
  /** Whether to time this decision. */
  sample: () => boolean
  /** The time a sampled decision took (kept cheaply; metrics.ts). */
  record: (seconds: number) => void
}

class Handle implements WaitHandle {
  readonly waiting = true as const
  readonly promise: Promise<Decision>
  resolve!: (d: Decision) => void
  /** Only for an acquire decided after a reservation's write (lone-store.ts): its own error, as acquire would throw. */
  reject!: (err: unknown) => void
  waiter: Waiter | null = null
  /** The acquire this one became once its reservation was on disk (a lone node: lone-store.ts). */
  inner: WaitHandle | null = null
  cancelled = false
  private readonly owner: LocalQuota

  constructor (owner: LocalQuota) {
    this.owner = owner
    this.promise = new Promise<Decision>((resolve, reject) => { this.resolve = resolve; this.reject = reject })
  }

  cancel (): void {
    this.cancelled = true
    if (this.waiter !== null) this.owner.cancelWaiter(this.waiter)
    this.inner?.cancel()
  }
}

export class LocalQuota implements QuotaService {
  /** The limiter decisions go through (a cluster's core's: replaced with the cluster, `bindCluster`). */
  limiter: Limiter
  private decider: Decider
  private clusterStatus?: () => Record<string, unknown>
  /** A member's acquires of `decide: "seeds"` rules go to a seed (forward.ts). */
  private forward?: (key: string, count: number, waitMs: number, here: boolean) => Promise<Decision> | null
  private elsewhere?: (key: string) => boolean
  /** Ask the cluster to tick now (a first-use wait wants its want sent at once, not at the next tick). */
  private urgent?: () => void
  private readonly clock: Clock
  private readonly node: string
  private timer: NodeJS.Timeout | null = null
  private timerAt = Infinity
  private sweeper: NodeJS.Timeout | null = null
  private readonly sweepIntervalMs: number
  private readonly sweepBudget: number
  private readonly startedAt: number
  /** A lone node's calendar, pulled toward the wall clock on the sweep timer (the cluster syncs its own on ticks). */
  readonly calendar: Calendar | null = null
  /**
   * A lone node's durable state (set by the daemon before it serves): a hard
   * rule's tokens are spent only from reservations on disk, so a kill -9
   * never hands a spent token back (lone-store.ts).
   */
  store: LoneStore | null = null

  constructor (opts: LocalQuotaOptions) {
    this.clock = opts.clock
    this.node = opts.node
    if (opts.cluster !== undefined) {
      this.limiter = opts.cluster.limiter
      this.decider = opts.cluster.decider
      this.bind(opts.cluster)
    } else {
      const start = wallEdge(opts.clock)
      this.calendar = new Calendar(start.wallMs, start.monoMs, start.wallResolutionMs)
      this.limiter = new Limiter({ rules: opts.rules, limits: opts.limits, node: opts.node, seeds: opts.seeds, calendar: this.calendar })
      this.decider = this.limiter
    }
    this.sweepIntervalMs = opts.sweepIntervalMs ?? 1000
    this.sweepBudget = opts.sweepBudget ?? 20_000
    this.startedAt = opts.clock.mono()
  }

  private bind (c: ClusterBinding): void {
    this.limiter = c.limiter
    this.decider = c.decider
    this.clusterStatus = c.status
    this.urgent = c.urgent
    this.forward = c.forward
    this.elsewhere = c.elsewhere
  }

  /**
   * Decide through another cluster from now on: a new incarnation started
   * in-process (daemon.ts `renew`). The old one has stopped (it admits
   * nothing); its waiters are answered now, denied, as a removed rule's are.
   */
  bindCluster (c: ClusterBinding): void {
    const old = this.limiter
    this.bind(c)
    this.deliver(old.setRules([], this.clock.mono()))
    this.arm()
  }

  start (): void {
    if (this.sweeper !== null) return
    this.sweeper = setInterval(() => {
      const mono = this.clock.mono()
      this.calendar?.sync(this.clock.now(), mono)
      this.limiter.sweep(mono, this.sweepBudget)
      if (this.calendar !== null) this.store?.sweep(this.calendar.at(mono))
    }, this.sweepIntervalMs)
    this.sweeper.unref()
  }

  stop (): void {
    if (this.sweeper !== null) clearInterval(this.sweeper)
    this.sweeper = null
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.timerAt = Infinity
  }

  /** Set by the daemon once its metrics exist. */
  timing: DecisionTiming | null = null

  /** `here`: a peer's acquire this seed decides (node-effects.ts `serveForward`), never sent on to another seed. */
  acquire (key: string, count: number, waitMs: number, here = false): AcquireResult {
    if (this.timing?.sample() === true) {
      const t0 = performance.now()
      try { return this.decide(key, count, waitMs, here) } finally { this.timing.record((performance.now() - t0) / 1000) }
    }
    return this.decide(key, count, waitMs, here)
  }

  private decide (key: string, count: number, waitMs: number, here: boolean): AcquireResult {
    const forwarded = this.forward?.(key, count, waitMs, here) ?? null
    if (forwarded !== null) {
      // Decided at a seed: answered when its decision comes (or denied at the bound); a client that goes away
      // meanwhile cancels nothing there (the seed may have spent the token, never more than the limit allows).
      const handle = new Handle(this)
      void forwarded.then(d => handle.resolve(d))
      return handle
    }
    if (this.store !== null) {
      const r = this.guarded(this.store, key, count, waitMs)
      if (r !== null) return r
    }
    const now = this.clock.mono()
    let urgent = false
    if (waitMs <= 0) {
      // A key new here, with tokens at peers: a short wait for them beats a denial (first use).
      waitMs = this.decider.firstUseWaitMs?.(key, count, now) ?? 0
      if (waitMs <= 0) return this.decider.acquire(key, count, now)
      urgent = true
    }
    const handle = new Handle(this)
    const r = this.decider.acquireOrWait(key, count, waitMs, now, handle)
    if ('allowed' in r) return r
    if (urgent) this.urgent?.()
    handle.waiter = r
    this.arm()
    return handle
  }

  /**
   * An acquire that must be answered now (a batch item): decided from what
   * this node holds, never waited for (no first-use wait, no forward). A
   * lone node's hard key without a reservation on disk gets one written
   * synchronously (denied, retry in 1 ms, only if the write fails).
   */
  acquireNow (key: string, count: number): Decision {
    const now = this.clock.mono()
    const rule = this.store !== null && this.calendar !== null ? this.limiter.ruleFor(key) : undefined
    if (rule === undefined || this.store === null || this.calendar === null || !this.store.guards(rule)) return this.decider.acquire(key, count, now)
    const cal = this.calendar.at(now)
    let e = this.store.ahead.entry(key)
    if (e === undefined || availableIn(e, cal, cal) < count) {
      // Would be admitted, and has no reservation on disk: one is written now, on the event loop (a batch answers at once).
      const p = this.limiter.peek(key, count, now)
      if (!p.allowed) return this.limiter.acquire(key, count, now)
      if (!this.store.reserveNow(key, rule, count, cal)) return denied(p)
      e = this.store.ahead.entry(key) as NonNullable<typeof e>
    }
    const d = this.limiter.acquire(key, count, now)
    if (d.allowed && this.store.ahead.spend(e, rule, count, cal, cal)) this.store.reserve(key, rule, count, cal, cal)
    return d
  }

  /**
   * A lone node's acquire of a hard rule (null: not one): spent only from a
   * reservation on disk that lasts until the request's deadline. Without
   * one, the request waits for its write (group-committed: about one fsync),
   * unless it would be denied anyway. The next reservation is asked for
   * ahead of need, so a busy key rarely waits.
   */
  private guarded (store: LoneStore, key: string, count: number, waitMs: number): AcquireResult | null {
    const rule = this.limiter.ruleFor(key)
    if (rule === undefined || this.calendar === null || !store.guards(rule)) return null
    const now = this.clock.mono()
    const cal = this.calendar.at(now)
    const until = cal + Math.max(0, waitMs)
    const e = store.ahead.entry(key)
    if (e !== undefined && availableIn(e, cal, until) >= count) {
      if (waitMs <= 0) {
        const d = this.limiter.acquire(key, count, now)
        if (d.allowed && store.ahead.spend(e, rule, count, cal, until)) store.reserve(key, rule, count, cal, until)
        return d
      }
      const handle = new Handle(this)
      const r = this.limiter.acquireOrWait(key, count, waitMs, now, handle)
      // A queued waiter is covered too: its tokens are set aside in the reservation until its deadline.
      if (store.ahead.spend(e, rule, count, cal, until)) store.reserve(key, rule, count, cal, until)
      if ('allowed' in r) return r
      handle.waiter = r
      this.arm()
      return handle
    }
    // Checks the request now, as an acquire would (a count over the stock, a full table: thrown to the caller), and
    // whether it could be admitted at all: a denial needs no reservation.
    if (waitMs <= 0 && !this.limiter.peek(key, count, now).allowed) return this.limiter.acquire(key, count, now)
    const handle = new Handle(this)
    store.reserve(key, rule, count, cal, until, ok => {
      if (handle.cancelled) return
      const at = this.clock.mono()
      try {
        if (!ok) { handle.resolve(denied(this.limiter.peek(key, count, at))); return }
        const r = this.decide(key, count, Math.max(0, waitMs - (at - now)), false)
        if (!isWaitHandle(r)) { handle.resolve(r); return }
        handle.inner = r
        void r.promise.then(d => handle.resolve(d), (err: unknown) => handle.reject(err))
      } catch (err) {
        // Decided after the write, the request's own error (its rule reloaded away, a full table) goes to its client.
        handle.reject(err)
      }
    })
    return handle
  }

  decidedElsewhere (key: string): boolean {
    return this.elsewhere?.(key) ?? false
  }

  peek (key: string, count: number): Decision {
    if (this.decidedElsewhere(key)) throw elsewhereError(key, 'a peek')
    return this.decider.peek(key, count, this.clock.mono())
  }

  cancelWaiter (w: Waiter): void {
    this.limiter.cancel(w)
    this.arm()
  }

  /** Replace the rules; waiters on keys that no rule matches any more are answered (denied). */
  setRules (rules: RuleConfig[]): void {
    this.deliver(this.decider.setRules(rules, this.clock.mono()))
    this.arm()
  }

  status (): Record<string, unknown> {
    const now = this.clock.mono()
    return {
      node: this.node,
      uptimeMs: Math.round(now - this.startedAt),
      keys: this.limiter.keyCount,
      waiters: this.limiter.waiterCount,
      rules: this.limiter.rules.map(r => ({
        name: r.name,
        match: r.config.match,
        algorithm: r.config.algorithm,
        limit: r.config.limit,
        per: r.config.per,
        burst: r.config.algorithm === 'token-bucket' ? r.config.burst : undefined,
        mode: r.config.mode,
        hash: r.hash,
        keys: r.stats.keys,
        allowed: r.stats.allowed,
        denied: r.stats.denied
      })),
      activeKeys: this.limiter.keys(now, 100),
      ...(this.store === null ? {} : { durable: this.store.status() }),
      ...this.clusterStatus?.()
    }
  }

  /** Tokens arrived from elsewhere: serve waiters that can now be served. */
  kick (): void {
    this.deliver(this.limiter.poll(this.clock.mono()))
    this.arm()
  }

  private deliver (rs: Resolution[]): void {
    for (const r of rs) (r.ref as Handle).resolve(r.decision)
  }

  /** Keep exactly one timeout, at the limiter's earliest wake-up. */
  private arm (): void {
    const at = this.limiter.nextWakeAt()
    if (at === this.timerAt) return
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.timerAt = at
    if (at === Infinity) return
    // Whole milliseconds, at least 1: a float wake time must not spin the loop.
    const delay = Math.max(1, Math.ceil(at - this.clock.mono()))
    this.timer = setTimeout(() => {
      this.timer = null
      this.timerAt = Infinity
      this.deliver(this.limiter.poll(this.clock.mono()))
      this.arm()
    }, delay)
  }
}

/** A denial in the shape of `d` (a peek's): tried again in a millisecond, when a reservation is on disk. */
function denied (d: Decision): Decision {
  return { ...d, allowed: false, retryAfterMs: Math.max(1, d.retryAfterMs) }
}

