/**
 * How many forwarded acquires (forward.ts) a member has in flight to one
 * seed. They go on one call session (transport/calls.ts), and a seed holds
 * at most MAX_CALLS_IN_FLIGHT (256) calls of a session at once, dropping
 * the rest unanswered. (Before the sessions each forward was a transfer
 * stream of its own, of which a seed takes 64 at once from one peer:
 * measured on real processes, 100 concurrent acquires at a member had 36
 * refused and denied.) So a member sends at most FORWARDS_PER_SEED at once
 * to a seed, half the bound (a call that timed out here may still be held
 * there), and queues the others, in order, each until its own deadline: a
 * queued acquire is sent when a slot frees, or denied when its time is up,
 * never dropped for the bound.
 */
import { MAX_CALLS_IN_FLIGHT } from './transport/calls.js'

/** Forwards in flight to one seed at most: half of what a seed holds of one session. */
export const FORWARDS_PER_SEED = MAX_CALLS_IN_FLIGHT / 2

interface Queued { start: () => void, cancel: (() => void) | null }

/** Run `f` after `ms` (the node's timer: the daemon's setTimeout, the simulator's event queue); returns its cancel. */
export type After = (ms: number, f: () => void) => () => void

const realTimer: After = (ms, f) => { const t = setTimeout(f, ms); return () => { clearTimeout(t) } }

export class ForwardSlots {
  private readonly inflight = new Map<string, number>()
  private readonly queues = new Map<string, Queued[]>()

  constructor (private readonly per = FORWARDS_PER_SEED, private readonly after: After = realTimer) {}

  /**
   * Run `send` to `seed` once a slot is free (at once when one is); `send`
   * calls its `release` when its forward is answered or failed, freeing the
   * slot (a second call does nothing). If no slot frees within `waitMs`,
   * `expire` runs instead and `send` never does.
   */
  run (seed: string, waitMs: number, send: (release: () => void) => void, expire: () => void): void {
    const start = (): void => {
      this.inflight.set(seed, (this.inflight.get(seed) ?? 0) + 1)
      let released = false
      send(() => { if (!released) { released = true; this.release(seed) } })
    }
    if ((this.inflight.get(seed) ?? 0) < this.per) { start(); return }
    const q: Queued = { start, cancel: null }
    q.cancel = this.after(waitMs, () => {
      const list = this.queues.get(seed)
      const i = list?.indexOf(q) ?? -1
      if (list !== undefined && i >= 0) list.splice(i, 1)
      expire()
    })
    let list = this.queues.get(seed)
    if (list === undefined) this.queues.set(seed, list = [])
    list.push(q)
  }

  /** Queued forwards, for status. */
  get queued (): number {
    let n = 0
    for (const l of this.queues.values()) n += l.length
    return n
  }

  private release (seed: string): void {
    const n = (this.inflight.get(seed) ?? 1) - 1
    if (n <= 0) this.inflight.delete(seed)
    else this.inflight.set(seed, n)
    const list = this.queues.get(seed)
    const next = list?.shift()
    if (list !== undefined && list.length === 0) this.queues.delete(seed)
    if (next === undefined) return
    next.cancel?.()
    next.start()
  }
}
