/**
 * Waiting acquires: each key's FIFO queue of waiters, and one wake heap that
 * says when `poll` next has work (a waiter servable by the key's return
 * schedule, or one past its deadline).
 *
 * Pure: no I/O, no timers, no clock reads. Every `now` given here is already
 * clamped to be monotone by the Limiter, which owns the key table and hands
 * in the key's state.
 *
 * Invariants:
 * - A waiter is admitted only by `spend` (decide.ts), i.e. only from tokens
 *   the node holds above the key's reserve.
 * - Waiters on a key are served strictly FIFO: serving stops at the first
 *   one that cannot be admitted. While any are queued, a request that does
 *   not wait is denied (the Limiter checks `ks.queued`), so waiters cannot
 *   starve.
 * - A key is in the heap at its `wakeAt`; heap entries with another time are
 *   stale and skipped (wake-heap.ts).
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import type { LimitsConfig } from '../config/types.js'
import type { Decision } from './types.js'
import { WakeHeap } from './wake-heap.js'
import { decision, spend, waitFor } from './decide.js'
import type { KeyState, Resolution, Waiter } from './key-state.js'

export type WaitLimits = Pick<LimitsConfig, 'maxWaitersPerKey' | 'maxWaiters'>

export class WaitQueue {
  private readonly heap = new WakeHeap<KeyState>()
  private total = 0

  /**
   * @param limits read on every enqueue (the caller's object, not a copy)
   * @param beforeServe called before a key's waiters are served (LimiterOptions.beforeServe)
   */
  constructor (
    private readonly limits: WaitLimits,
    private readonly beforeServe?: (ks: KeyState, nowMs: number) => void
  ) {}

  /** Waiters queued on all keys. */
  get count (): number { return this.total }

  /**
   * Spend `count` of `ks` now if no one is queued ahead; else queue a waiter
   * if the request could be admitted within `waitMs`. Returns the decision,
   * or the queued Waiter (resolved later by `poll`, withdrawn by `cancel`).
   */
  acquireOrWait (ks: KeyState, count: number, waitMs: number, now: number, ref: unknown, elsewhere: boolean): Decision | Waiter {
    if (ks.queued === 0 && spend(ks, count, now)) return decision(ks, true, count, now)
    // Hopeless by the local return schedule: answer now rather than hold the
    // client. When the queue needs more than the whole share, tokens must be
    // reused and `waitFor` cannot say when; the waiter's deadline decides.
    // `elsewhere`: tokens held at other nodes may come by transfer (the cluster says so).
    const need = ks.queued + count
    if (waitMs <= 0 || (!elsewhere && need <= ks.bucket.share && ks.bucket.waitFor(need, now) > waitMs)) {
      return decision(ks, false, count, now)
    }
    if (ks.waiters !== null && ks.waiters.length >= this.limits.maxWaitersPerKey) {
      throw new QuotadError(ErrorCodes.QUEUE_FULL, `wait queue for key is full (${this.limits.maxWaitersPerKey} waiters)`)
    }
    if (this.total >= this.limits.maxWaiters) {
      throw new QuotadError(ErrorCodes.QUEUE_FULL, `node wait queue is full (${this.limits.maxWaiters} waiters)`)
    }
    const w: Waiter = { count, deadline: now + waitMs, ref, keyState: ks, done: false }
    if (ks.waiters === null) ks.waiters = []
    ks.waiters.push(w)
    ks.queued += count
    this.total++
    this.reschedule(ks, now)
    return w
  }

  /** Withdraw a queued waiter. Spends nothing. Idempotent. */
  cancel (w: Waiter, now: number): void {
    if (w.done) return
    const ks = w.keyState
    const ws = ks.waiters as Waiter[]
    ws.splice(ws.indexOf(w), 1)
    this.finish(ks, w)
    // The next waiter may now be servable at once.
    this.reschedule(ks, now, true)
  }

  /** Earliest time `poll` has work (Infinity: none). */
  nextWakeAt (): number {
    return this.heap.peekTime()
  }

  /** Serve due waiters: grant in FIFO order as tokens return, deny those past their deadline. */
  poll (now: number): Resolution[] {
    const out: Resolution[] = []
    while (this.heap.peekTime() <= now) {
      const t = this.heap.peekTime()
      const ks = this.heap.pop() as KeyState
      if (t !== ks.wakeAt) continue // stale entry: the key was rescheduled
      ks.wakeAt = Infinity
      this.serve(ks, now, out)
      this.reschedule(ks, now)
    }
    return out
  }

  /** Deny every waiter of `ks` (its rule is gone), appending to `out`. */
  denyAll (ks: KeyState, now: number, out: Resolution[]): void {
    for (const w of ks.waiters ?? []) {
      this.finish(ks, w)
      out.push({ ref: w.ref, decision: decision(ks, false, w.count, now) })
    }
    ks.waiters = null
    ks.wakeAt = Infinity
  }

  private serve (ks: KeyState, now: number, out: Resolution[]): void {
    const ws = ks.waiters
    if (ws === null) return
    this.beforeServe?.(ks, now)
    let granted = 0
    while (granted < ws.length && spend(ks, ws[granted].count, now)) {
      const w = ws[granted++]
      this.finish(ks, w)
      out.push({ ref: w.ref, decision: decision(ks, true, w.count, now) })
    }
    if (granted > 0) ws.splice(0, granted)
    let kept = 0
    for (let i = 0; i < ws.length; i++) {
      const w = ws[i]
      if (w.deadline <= now) {
        this.finish(ks, w)
        out.push({ ref: w.ref, decision: decision(ks, false, w.count, now) })
      } else {
        ws[kept++] = w
      }
    }
    ws.length = kept
  }

  private finish (ks: KeyState, w: Waiter): void {
    w.done = true
    ks.queued -= w.count
    this.total--
  }

  /**
   * Put `ks` in the heap at its next wake time: when its first waiter could be
   * spent above the reserve (`waitFor`, decide.ts), or the earliest deadline.
   * `force`: tokens may have arrived, so wake it even if due now.
   */
  reschedule (ks: KeyState, now: number, force = false): void {
    const ws = ks.waiters
    if (ws === null || ws.length === 0) {
      ks.waiters = null
      ks.wakeAt = Infinity
      return
    }
    let wake = now + waitFor(ks, ws[0].count, now)
    for (const w of ws) if (w.deadline < wake) wake = w.deadline
    // Invariant: a key whose waiters could not all be served now is not due again now (poll would loop for ever).
    if (wake <= now && !force && ks.wakeAt === Infinity) wake = now + 1
    if (wake !== ks.wakeAt || force) {
      ks.wakeAt = wake
      if (wake !== Infinity) this.heap.push(wake, ks)
    }
  }
}
