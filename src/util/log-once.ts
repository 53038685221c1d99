/**
 * Warnings a peer can cause, logged at most once per interval per (peer,
 * reason): the first at once, the rest counted and said with the next one
 * (`repeated`). A peer that sends a thousand bad messages then costs a
 * line an interval, not a thousand (issue 46: one 37-byte `hb` wrote 17).
 *
 * Memory is bounded: at most `maxKeys` (peer, reason) pairs are tracked;
 * past that the oldest is forgotten (its next warning is logged at once).
 */
import type { Logger } from './log.js'

export class LogOnce {
  private readonly intervalMs: number
  private readonly maxKeys: number
  private readonly now: () => number
  /** `${peer}\0${reason}` -> when it was last logged and how many were held back since. */
  private readonly seen = new Map<string, { at: number, held: number }>()

  /** `now`: a monotonic clock in ms. */
  constructor (now: () => number, intervalMs = 60_000, maxKeys = 1024) {
    this.now = now
    this.intervalMs = intervalMs
    this.maxKeys = maxKeys
  }

  /** Log `msg` at `level` for (peer, reason), unless one was logged within the interval (then it is counted). */
  log (log: Logger, level: 'info' | 'warn' | 'error', peer: string, reason: string, msg: string, fields: Record<string, unknown> = {}): void {
    const k = `${peer}\u0000${reason}`
    const t = this.now()
    const s = this.seen.get(k)
    if (s !== undefined && t - s.at < this.intervalMs) { s.held++; return }
    const repeated = s?.held ?? 0
    this.seen.delete(k)
    if (this.seen.size >= this.maxKeys) this.seen.delete(this.seen.keys().next().value as string)
    this.seen.set(k, { at: t, held: 0 })
    log[level](msg, repeated > 0 ? { ...fields, repeated } : fields)
  }
}
