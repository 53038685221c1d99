/**
 * The single-node decision core: the key table, rule lookup and decisions,
 * over conserved-token buckets. Waiting acquires are the WaitQueue's
 * (wait-queue.ts); the Limiter clamps time and finds the key's state for it.
 *
 * Pure: no I/O, no timers, no clock reads. Time comes in as `nowMs`; the
 * caller (the node service, a test, the simulator) owns the clock and asks
 * `nextWakeAt()` when to call `poll()` again.
 *
 * Invariants:
 * - A request is admitted only by `bucket.trySpend`, i.e. only from tokens
 *   this node holds.
 * - A key's state is dropped only when dropping it loses nothing: no waiters,
 *   nothing outstanding, and held equal to the share it would be recreated
 *   with. So eviction can never reset a limit early.
 * - Past `maxKeys` (glob keys in all), or past its rule's share of the
 *   table (`capOf`), a new glob key is refused with E_KEY_TABLE_FULL;
 *   existing state is never reset to make room. Exact keys (one per exact
 *   rule) always get their state, so no glob rule can crowd them out.
 * - Waiting acquires on a key are served strictly FIFO. While any are queued,
 *   a request that does not wait is denied, so waiters cannot starve.
 * - `nowMs` is clamped to be monotone, so a wall clock stepping back cannot
 *   return tokens early.
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import type { Decision } from './types.js'
import { bucketSpec, EPSILON, makeBucket, type BucketSpec } from './algorithms/index.js'
import { RuleSet, type CompiledRule } from './rules.js'
import { initialShare, seedOrder } from './share.js'
import { WaitQueue } from './wait-queue.js'
import { IDENTITY_CALENDAR, type CalendarView } from './calendar.js'
import { checkKey, decision, spend } from './decide.js'
import { snapshotKeys, type KeySnapshot, type KeyState, type Resolution, type Waiter } from './key-state.js'
import { KeyTable } from './key-table.js'

export type LimiterLimits = Pick<LimitsConfig, 'maxKeys' | 'maxKeyBytes' | 'maxWaitersPerKey' | 'maxWaiters'>

export interface LimiterOptions {
  rules: RuleConfig[]
  limits: LimiterLimits
  /** This node's name. */
  node: string
  /** The seed nodes' names (the cluster file's `nodes`). @default [node] */
  seeds?: readonly string[]
  /** Dead seeds' heirs (share.ts `Homes`; the cluster's map, read at every key creation). @default none */
  homes?: ReadonlyMap<string, string>
  /**
   * Whether this node may materialize pre-allocated shares for keys it has
   * no state for. False after an unclean restart: the node starts with
   * nothing so that it can never spend a token twice. @default true
   */
  allocate?: boolean
  /** Extra eviction veto for layers that keep per-key data (the cluster). */
  canEvict?: (ks: KeyState, nowMs: number) => boolean
  /**
   * Called before a key's waiters are served (`poll`), so a layer above can
   * bring `ks.reserve` up to date for this moment (the cluster: burns owed
   * elsewhere, and a lease that may have lapsed since the key was last used).
   */
  beforeServe?: (ks: KeyState, nowMs: number) => void
  /**
   * How a key's bucket is rebuilt when a reload changes its rule. The default
   * starts from the node's new share and carries its outstanding spends; the
   * cluster replaces it (tokens may have moved between nodes).
   */
  onRuleChange?: (ks: KeyState, next: CompiledRule, nowMs: number) => void
  /**
   * Called when a key's state is created for use (not by `restore`), after
   * its share is in the bucket: the cluster defers a share materialized
   * while a crashed predecessor's spends may still be out (recovery.ts).
   */
  onCreate?: (ks: KeyState, nowMs: number) => void
  /**
   * Where calendar windows fall. Methods take monotonic `nowMs`; windowed
   * buckets read the calendar from it. @default calendar time = nowMs
   */
  calendar?: CalendarView
}

export type { KeyState, Waiter, Resolution } from './key-state.js'

const SWEEP_ON_FULL = 1024

/** E_NO_RULE, naming the rules nearest to the key (a typo in a key or a rule is the usual cause). */
function noRule (key: string, rules: RuleSet): QuotadError {
  const near = rules.nearest(key)
  const hint = near.length === 0 ? 'the node has no rules' : `closest rule${near.length === 1 ? '' : 's'}: ${near.map(r => `${r.name} (match ${JSON.stringify(r.config.match)})`).join(', ')}`
  return new QuotadError(ErrorCodes.NO_RULE, `no rule matches key ${JSON.stringify(key)}; ${hint}`, { closest: near.map(r => r.name) })
}

export class Limiter {
  private ruleSet: RuleSet
  private readonly limits: LimiterLimits
  private readonly node: string
  private readonly seeds: string[]
  private readonly homes: ReadonlyMap<string, string> | undefined
  /** The key table: open-addressing shards of states (key-table.ts: ~19 B a key at 1M keys, a `Map` ~29). */
  private readonly table = new KeyTable()
  private readonly waits: WaitQueue
  /** Each rule's bucket spec, shared by its keys (cleared when the rules change). */
  private readonly specs = new Map<CompiledRule, BucketSpec>()
  private sweepCursor: Iterator<KeyState> | null = null
  private lastNow = -Infinity
  allocate: boolean
  private readonly canEvict?: (ks: KeyState, nowMs: number) => boolean
  private readonly onRuleChange?: (ks: KeyState, next: CompiledRule, nowMs: number) => void
  private readonly onCreate?: (ks: KeyState, nowMs: number) => void
  readonly calendar: CalendarView

  constructor (opts: LimiterOptions) {
    this.calendar = opts.calendar ?? IDENTITY_CALENDAR
    this.ruleSet = new RuleSet(opts.rules)
    this.limits = opts.limits
    this.node = opts.node
    this.seeds = seedOrder(opts.seeds ?? [opts.node])
    this.homes = opts.homes
    this.allocate = opts.allocate ?? true
    this.canEvict = opts.canEvict
    this.waits = new WaitQueue(opts.limits, opts.beforeServe)
    this.onRuleChange = opts.onRuleChange
    this.onCreate = opts.onCreate
  }

  get keyCount (): number { return this.table.size }
  get waiterCount (): number { return this.waits.count }
  get rules (): readonly CompiledRule[] { return this.ruleSet.rules }

  private clamp (nowMs: number): number {
    if (nowMs > this.lastNow) this.lastNow = nowMs
    return this.lastNow
  }

  /** Spend `count` tokens of `key` if this node holds them. */
  acquire (key: string, count: number, nowMs: number): Decision {
    const now = this.clamp(nowMs)
    return this.acquireOn(this.state(key, count, now), count, now)
  }

  /** `acquire` on a state already looked up with `keyState`. */
  acquireOn (ks: KeyState, count: number, nowMs: number): Decision {
    const now = this.clamp(nowMs)
    const allowed = ks.queued === 0 && spend(ks, count, now)
    return decision(ks, allowed, count, now)
  }

  /** Find or create a key's state (throws like `acquire` for bad keys, counts and a full table). */
  keyState (key: string, count: number, nowMs: number): KeyState {
    return this.state(key, count, this.clamp(nowMs))
  }

  /** The rule `key` would get (undefined: none). */
  ruleFor (key: string): CompiledRule | undefined {
    return this.ruleSet.match(key)
  }

  /** The state of `key` if the table holds it; never creates. */
  existing (key: string): KeyState | undefined {
    return this.table.get(key)
  }

  /** Every key state (for the cluster's gossip and status). */
  states (): IterableIterator<KeyState> {
    return this.table.values()
  }

  /**
   * Recreate a key's state from durable state: an empty bucket (the caller
   * credits what was held) that remembers the share it was created with, so
   * eviction still requires every token of that share to be back.
   */
  restore (key: string, initial: number, nowMs: number): KeyState {
    const now = this.clamp(nowMs)
    const rule = this.ruleSet.match(key)
    if (rule === undefined) throw noRule(key, this.ruleSet)
    const allocate = this.allocate
    this.allocate = false
    const ks = this.create(key, rule, now)
    this.allocate = allocate
    ks.initial = initial
    this.table.set(key, ks)
    return ks
  }

  /** A decision for a state whose admission was decided by a layer above (soft-mode policies). */
  decide (ks: KeyState, allowed: boolean, count: number, nowMs: number): Decision {
    return decision(ks, allowed, count, this.clamp(nowMs))
  }

  /** The clamped (monotone) time of the last call. */
  get now (): number { return this.lastNow }

  /** Tokens arrived from outside (a transfer): serve waiters that can now be served. */
  touched (ks: KeyState, nowMs: number): void {
    this.waits.reschedule(ks, this.clamp(nowMs), true)
  }

  /**
   * Like `acquire`, but a request that cannot be admitted now and could be
   * within `waitMs` joins the key's FIFO queue. Returns the decision, or the
   * queued Waiter (resolved later by `poll`, withdrawn by `cancel`).
   */
  acquireOrWait (key: string, count: number, waitMs: number, nowMs: number, ref: unknown, elsewhere = false): Decision | Waiter {
    const now = this.clamp(nowMs)
    return this.waits.acquireOrWait(this.state(key, count, now), count, waitMs, now, ref, elsewhere)
  }

  /** Withdraw a queued waiter. Spends nothing. Idempotent. */
  cancel (w: Waiter): void {
    this.waits.cancel(w, this.lastNow)
  }

  /** The state of `key` without spending. `allowed` says whether `count` would be admitted now. */
  peek (key: string, count: number, nowMs: number): Decision {
    const now = this.clamp(nowMs)
    const ks = this.state(key, count, now)
    ks.bucket.advance(now)
    const allowed = ks.queued === 0 && ks.bucket.held - ks.reserve + EPSILON >= count
    return decision(ks, allowed, count, now, false)
  }

  /** Earliest time `poll` has work (Infinity: none). */
  nextWakeAt (): number {
    return this.waits.nextWakeAt()
  }

  /** Serve due waiters: grant in FIFO order as tokens return, deny those past their deadline. */
  poll (nowMs: number): Resolution[] {
    return this.waits.poll(this.clamp(nowMs))
  }

  /** Find or create the state of `key`. Throws for bad keys, counts and a full table. */
  private state (key: string, count: number, now: number): KeyState {
    let ks = this.table.get(key)
    if (ks === undefined) {
      checkKey(key, this.limits.maxKeyBytes)
      const rule = this.ruleSet.match(key)
      if (rule === undefined) throw noRule(key, this.ruleSet)
      // Exact keys are bounded by the rules themselves and always get their state: a glob rule's
      // keys can never block them. Glob keys count against the table and against their rule's share.
      if (rule.glob && this.full(rule)) {
        this.sweep(now, SWEEP_ON_FULL)
        if (this.full(rule)) {
          const cap = this.capOf(rule)
          throw new QuotadError(ErrorCodes.KEY_TABLE_FULL, rule.stats.keys >= cap
            ? `rule "${rule.name}" has ${cap} keys (its maxKeys) and none is idle`
            : `key table is full (${this.limits.maxKeys} keys) and no key is idle`)
        }
      }
      ks = this.create(key, rule, now)
      this.table.set(key, ks)
      this.onCreate?.(ks, now)
    }
    if (count > ks.rule.stock) {
      throw new QuotadError(ErrorCodes.COUNT_TOO_LARGE, `count ${count} exceeds rule "${ks.rule.name}" stock of ${ks.rule.stock}: it can never be admitted`)
    }
    return ks
  }

  /**
   * What a key of `rule` first used here now would hold at once (its share:
   * `initialShare`): an exact rule's one key, or for a glob rule a key this
   * node is home to (the whole stock at a seed, 0 at a member). 0 while this
   * node allocates nothing (an unclean restart). For the metrics of a rule
   * with no key state yet: what the node could spend, not 0.
   */
  freshShare (rule: CompiledRule): number {
    if (!this.allocate) return 0
    if (rule.glob) return this.seeds.includes(this.node) ? rule.stock : 0
    return initialShare(rule.stock, false, rule.config.match, this.node, this.seeds, this.homes)
  }

  /** A glob rule's share of the key table: its `maxKeys`, or an even split of `limits.maxKeys` over the glob rules. */
  capOf (rule: CompiledRule): number {
    if (rule.config.maxKeys !== undefined) return rule.config.maxKeys
    const globs = this.ruleSet.rules.reduce((n, r) => n + (r.glob ? 1 : 0), 0)
    return Math.max(1, Math.floor(this.limits.maxKeys / Math.max(1, globs)))
  }

  private full (rule: CompiledRule): boolean {
    if (rule.stats.keys >= this.capOf(rule)) return true
    let globKeys = 0
    for (const r of this.ruleSet.rules) if (r.glob) globKeys += r.stats.keys
    return globKeys >= this.limits.maxKeys
  }

  private create (key: string, rule: CompiledRule, now: number): KeyState {
    const c = rule.config
    const share = this.allocate ? initialShare(rule.stock, rule.glob, key, this.node, this.seeds, this.homes) : 0
    let spec = this.specs.get(rule)
    if (spec === undefined) this.specs.set(rule, spec = bucketSpec({ limit: c.limit, perMs: c.perMs, burst: rule.stock }, now, this.calendar))
    rule.stats.keys++
    // The bucket is the key's state: one object per key (key-state.ts).
    return makeBucket(c.algorithm, spec, share, now).bind(key, rule, share)
  }

  /** Whether dropping the state loses nothing: recreating it would give the same state. */
  isIdle (ks: KeyState, nowMs: number): boolean {
    return ks.waiters === null &&
      ks.bucket.outstanding(nowMs) <= EPSILON &&
      Math.abs(ks.bucket.held - ks.initial) <= EPSILON &&
      (this.canEvict === undefined || this.canEvict(ks, nowMs))
  }

  /** Drop up to `budget` idle keys' state, resuming where the last sweep stopped. Returns how many were dropped. */
  sweep (nowMs: number, budget: number): number {
    const now = this.clamp(nowMs)
    let evicted = 0
    for (let seen = 0; seen < budget && this.table.size > 0; seen++) {
      if (this.sweepCursor === null) this.sweepCursor = this.table.values()
      const next = this.sweepCursor.next()
      if (next.done === true) { this.sweepCursor = null; continue }
      const ks = next.value
      if (this.isIdle(ks, now)) {
        this.table.delete(ks.key)
        ks.bucket.release?.()
        ks.rule.stats.keys--
        evicted++
      }
    }
    return evicted
  }

  /**
   * Replace the rules (SIGHUP). Keys whose rule is unchanged keep their state.
   * A key whose rule changed gets a bucket for the new rule that carries its
   * outstanding spends (spent again at `now`, so they return no earlier than
   * before): a reload can tighten a limit at once but never hand back tokens
   * early. Keys no rule matches any more are dropped, with their waiters denied.
   */
  setRules (rules: RuleConfig[], nowMs: number): Resolution[] {
    const now = this.clamp(nowMs)
    const next = new RuleSet(rules)
    const old = this.ruleSet
    const out: Resolution[] = []
    for (const r of next.rules) {
      const prev = old.get(r.name)
      if (prev !== undefined && prev.hash === r.hash) r.stats = prev.stats
    }
    for (const r of next.rules) r.stats.keys = 0
    this.ruleSet = next
    this.specs.clear()
    for (const ks of [...this.table.values()]) {
      const rule = next.match(ks.key)
      if (rule === undefined) {
        this.waits.denyAll(ks, now, out)
        this.table.delete(ks.key)
        ks.bucket.release?.()
        continue
      }
      if (rule.hash !== ks.rule.hash && this.onRuleChange !== undefined) {
        this.onRuleChange(ks, rule, now)
      } else if (rule.hash !== ks.rule.hash) {
        const carried = ks.bucket.outstanding(now)
        const fresh = this.create(ks.key, rule, now)
        fresh.bucket.forceSpend(Math.ceil(carried - EPSILON), now)
        const old = ks.bucket
        ks.bucket = fresh.bucket
        old.release?.()
        ks.initial = fresh.initial
        rule.stats.keys--
      }
      ks.rule = rule
      rule.stats.keys++
      this.waits.reschedule(ks, now, true)
    }
    this.sweepCursor = null
    return out
  }

  /** Snapshot of up to `max` key states, for status. */
  keys (nowMs: number, max: number): KeySnapshot[] {
    return snapshotKeys(this.table.values(), this.clamp(nowMs), max)
  }
}
