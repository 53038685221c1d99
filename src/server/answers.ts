/**
 * What one client connection answers (connection.ts): each request frame
 * decoded (fast-read.ts for the usual flat maps, strict-read.ts otherwise),
 * validated and answered at once, its reply encoded straight into `out`,
 * the connection's slab writer (out-buffer.ts; decisions and batches by
 * hand in fast-write.ts), never half a frame. A waiting acquire (the
 * service returned a WaitHandle) is kept in `waiters` until its promise
 * settles, at most limits.maxInflightPerConnection of them (E_OVERLOADED
 * past it); its reply joins `out` later and `replied` tells the connection
 * to flush. When the connection goes, every waiter is cancelled
 * (`WaitHandle.cancel()`: spends nothing).
 *
 * Apart from connection.ts, which decides when to read and when to write
 * (turns, backpressure, closing): this file decides what is said, and
 * never touches the socket. Once the socket is gone (`drop`), replies are
 * dropped, not queued.
 */
import { elsewhereError, ErrorCodes, isQuotadError } from '../errors.js'
import { isWaitHandle, type Decision, type WaitHandle } from '../core/types.js'
import {
  encodeErrorReply, encodePongReply, toWireError, type BatchResult, type Request, OutBuffer, writeBatchReply, writeDecisionReply
} from '@quotad/client/wire'
import { checkBatchItem, decodeRequest, encodeStatusReply, RequestError } from '../protocol/requests.js'
import type { ConnectionHost } from './host.js'

interface Waiter {
  readonly id: number
  readonly handle: WaitHandle
}

export class Answers {
  /** Replies not yet handed to the socket: the connection flushes them. */
  readonly out = new OutBuffer()
  /** The connection's id, for events. */
  private readonly connection: number
  private readonly host: ConnectionHost
  /** A waiter's reply joined `out` outside a turn: the connection schedules a flush. */
  private readonly replied: () => void
  private readonly waiters = new Set<Waiter>()
  /** The socket is gone: replies are dropped with it. */
  private dropped = false

  constructor (connection: number, host: ConnectionHost, replied: () => void) {
    this.connection = connection
    this.host = host
    this.replied = replied
  }

  get waiting (): number {
    return this.waiters.size
  }

  /** Answer the request frame at buf[start, end). */
  answer (buf: Buffer, start: number, end: number): void {
    this.host.counters.requests++
    let req: Request
    try {
      req = decodeRequest(buf, start, end, this.host.limits)
    } catch (err) {
      if (!(err instanceof RequestError)) {
        this.noteInternal(err)
        this.replyError(null, ErrorCodes.INTERNAL, toWireError(err).message)
        return
      }
      const e = err
      if (e.code === ErrorCodes.BAD_FRAME) {
        this.host.counters.badFrames++
        if (this.host.events.wants('bad-frame')) {
          this.host.events.publish('bad-frame', { connection: this.connection, code: e.code, message: e.message })
        }
      }
      this.replyError(e.id, e.code, e.message)
      return
    }
    if (this.host.stopping) {
      this.replyError(req.id, ErrorCodes.SHUTTING_DOWN, 'quotad is shutting down')
      return
    }
    try {
      this.dispatch(req)
    } catch (err) {
      this.replyFailure(req.id, err)
    }
  }

  private dispatch (req: Request): void {
    const service = this.host.service
    switch (req.op) {
      case 'acquire': {
        const r = service.acquire(req.key, req.count, req.waitMs)
        if (!isWaitHandle(r)) {
          this.pushDecision(req.id, r)
        } else if (this.waiters.size >= this.host.limits.maxInflightPerConnection) {
          r.cancel()
          this.host.counters.overloaded++
          this.replyError(req.id, ErrorCodes.OVERLOADED,
            `more than ${this.host.limits.maxInflightPerConnection} waiting requests on this connection`)
        } else {
          this.addWaiter(req.id, r)
        }
        return
      }
      case 'peek':
        this.pushDecision(req.id, service.peek(req.key, req.count))
        return
      case 'batch': {
        const results = this.runBatch(req.id, req.items)
        if (this.dropped) return
        const mark = this.out.length
        try {
          writeBatchReply(this.out, req.id, results)
        } catch (err) {
          this.out.truncate(mark) // never leave half a frame in the stream
          throw err
        }
        return
      }
      case 'status':
        this.push(encodeStatusReply(req.id, service.status()))
        return
      case 'ping':
        this.push(encodePongReply(req.id, this.host.clock.now()))
    }
  }

  private runBatch (id: number, items: unknown[]): BatchResult[] {
    const results: BatchResult[] = new Array(items.length)
    for (let i = 0; i < items.length; i++) {
      try {
        const item = checkBatchItem(items[i], this.host.limits, id)
        if (this.host.service.decidedElsewhere?.(item.key) === true) throw elsewhereError(item.key, 'a batch item')
        const service = this.host.service
        const r = service.acquireNow !== undefined ? service.acquireNow(item.key, item.count) : service.acquire(item.key, item.count, 0)
        if (isWaitHandle(r)) {
          // waitMs 0 must answer now; a service that queues anyway is a bug.
          r.cancel()
          throw new Error('service queued an acquire with waitMs 0')
        }
        results[i] = r
      } catch (err) {
        if (!isQuotadError(err)) this.noteInternal(err)
        results[i] = { error: toWireError(err) }
      }
    }
    return results
  }

  private addWaiter (id: number, handle: WaitHandle): void {
    const w: Waiter = { id, handle }
    this.waiters.add(w)
    this.host.counters.waiting++
    handle.promise.then(
      d => this.waiterDone(w, d, null),
      (err: unknown) => this.waiterDone(w, null, err)
    )
  }

  private waiterDone (w: Waiter, d: Decision | null, err: unknown): void {
    if (!this.waiters.delete(w)) return // cancelled: the connection is gone
    this.host.counters.waiting--
    try {
      if (d !== null) this.pushDecision(w.id, d)
      else this.replyFailure(w.id, err)
    } catch (e) {
      // Runs in a promise callback: a throw here would be an unhandled rejection.
      this.replyFailure(w.id, e)
    }
    this.replied()
  }

  /** Cancel every waiter; with a code, tell each client why (used at shutdown). */
  cancelWaiters (code: typeof ErrorCodes.SHUTTING_DOWN | null): void {
    for (const w of this.waiters) {
      this.host.counters.waiting--
      try {
        w.handle.cancel()
      } catch (err) {
        this.noteInternal(err)
      }
      if (code !== null) this.replyError(w.id, code, 'quotad is shutting down')
    }
    this.waiters.clear()
  }

  private replyFailure (id: number, err: unknown): void {
    if (!isQuotadError(err)) this.noteInternal(err)
    const e = toWireError(err)
    this.replyError(id, e.code, e.message)
  }

  replyError (id: number | null, code: string, message: string): void {
    this.host.counters.errorReplies++
    this.push(encodeErrorReply(id, code, message))
  }

  private noteInternal (err: unknown): void {
    this.host.counters.internalErrors++
    if (this.host.events.wants('internal-error')) {
      this.host.events.publish('internal-error', { connection: this.connection, error: err })
    }
  }

  private pushDecision (id: number, d: Decision): void {
    if (this.dropped) return
    const mark = this.out.length
    try {
      writeDecisionReply(this.out, id, d)
    } catch (err) {
      this.out.truncate(mark) // a malformed Decision: never leave half a frame in the stream
      throw err
    }
  }

  /** Queue a frame encoded elsewhere (msgpackr); rarer than decisions, so one small copy is fine. */
  private push (frame: Buffer): void {
    if (!this.dropped) this.out.append(frame)
  }

  /** The socket is gone: replies not sent are dropped with it, and later ones are never queued. */
  drop (): void {
    this.dropped = true
    this.out.clear()
  }
}
