/**
 * The client's table of requests in flight: id -> Pending.
 *
 * Ids are a wrapping uint32 counter (skipping 0 and ids still in flight), so
 * a reply is routed with one Map lookup whatever order replies come back in.
 * There is no timer per request: `sweep` is called from one coarse interval
 * and fails everything past its deadline.
 */
import type { QuotadError } from './errors.js'
import { MAX_REQUEST_ID } from './wire/messages.js'

/** What the reply of a request is turned into for the caller. */
export const KIND_DECISION = 0
export const KIND_BATCH = 1
export const KIND_STATUS = 2
export const KIND_PONG = 3

export class Pending {
  resolve!: (value: never) => void
  reject!: (err: QuotadError) => void
  readonly kind: number
  /** performance.now() milliseconds (monotonic). */
  readonly deadline: number

  constructor (kind: number, deadline: number) {
    this.kind = kind
    this.deadline = deadline
  }
}

export class PendingTable {
  private readonly map = new Map<number, Pending>()
  private seq = 0

  get size (): number {
    return this.map.size
  }

  /** A fresh id, not 0 and not in flight. */
  nextId (): number {
    do {
      this.seq = this.seq >= MAX_REQUEST_ID ? 1 : this.seq + 1
    } while (this.map.has(this.seq))
    return this.seq
  }

  add (id: number, p: Pending): void {
    this.map.set(id, p)
  }

  /** Remove and return the request `id` (undefined if unknown, e.g. timed out already). */
  take (id: number): Pending | undefined {
    const p = this.map.get(id)
    if (p !== undefined) this.map.delete(id)
    return p
  }

  get (id: number): Pending | undefined {
    return this.map.get(id)
  }

  /** Fail every request whose deadline is <= now. */
  sweep (now: number, makeError: () => QuotadError): void {
    if (this.map.size === 0) return
    for (const [id, p] of this.map) {
      if (p.deadline <= now) {
        this.map.delete(id)
        p.reject(makeError())
      }
    }
  }

  failAll (err: QuotadError): void {
    if (this.map.size === 0) return
    const all = [...this.map.values()]
    this.map.clear()
    for (const p of all) p.reject(err)
  }
}
