/**
 * One client connection of the Unix-socket server: read frames, answer them,
 * keep the connection's waiting acquires, close cleanly.
 *
 * Hot path and its data structures:
 *
 * - A socket 'data' chunk goes through the FrameDecoder, which calls
 *   `onFrame` for every complete frame in it, synchronously, with the bytes
 *   still in the chunk. Each request is decoded (fast-read.ts for the usual
 *   flat maps, msgpackr otherwise), validated and answered right there: its
 *   reply frame is encoded straight into `out`, the connection's slab writer
 *   (out-buffer.ts; decisions and batches by hand in fast-write.ts).
 * - When the chunk is consumed, `flush` hands everything in `out` to ONE
 *   socket.write, as one Buffer view, without a copy. So a client pipelining
 *   500 requests in one chunk costs one syscall each way.
 * - A waiting acquire (`service.acquire` returned a WaitHandle) is kept in the
 *   `waiters` set until its promise settles. Its reply joins `out` and a flush
 *   is scheduled with process.nextTick; waiters that settle in the same tick
 *   share that one write. If the connection goes away first, every waiter is
 *   cancelled (`WaitHandle.cancel()`: spends nothing).
 *
 * Bounds: `waiters.size` <= limits.maxInflightPerConnection (E_OVERLOADED past
 * it); reading pauses while more than WRITE_HIGH_WATER bytes wait in the
 * socket's write buffer, so a client that does not read cannot grow our memory.
 *
 * Replies for synchronous requests leave in request order; a waiting acquire
 * answers later, after replies to requests sent behind it.
 */
import type net from 'node:net'
import { ErrorCodes, isQuotadError } from '../errors.js'
import { isWaitHandle, type Decision, type WaitHandle } from '../core/types.js'
import { FrameDecoder, type FrameHandler } from '../protocol/frame.js'
import {
  checkBatchItem, decodeRequest, encodeErrorReply, encodePongReply,
  encodeStatusReply, RequestError, toWireError, type BatchResult, type Request
} from '../protocol/messages.js'
import { OutBuffer } from '../protocol/out-buffer.js'
import { writeBatchReply, writeDecisionReply } from '../protocol/fast-write.js'
import { closeSocketSoon, type ConnectionHost } from './host.js'

/** Pause reading while the socket holds more than this many unwritten bytes. */
export const WRITE_HIGH_WATER = 1024 * 1024

interface Waiter {
  readonly id: number
  readonly handle: WaitHandle
}

export class Connection implements FrameHandler {
  readonly id: number
  readonly socket: net.Socket
  private readonly host: ConnectionHost
  private readonly decoder: FrameDecoder
  private readonly waiters = new Set<Waiter>()
  private readonly out = new OutBuffer()
  private flushScheduled = false
  private readPaused = false
  private closing = false
  private closed = false
  requests = 0

  constructor (id: number, socket: net.Socket, host: ConnectionHost) {
    this.id = id
    this.socket = socket
    this.host = host
    this.decoder = new FrameDecoder(this, host.limits.maxFrameBytes)
    socket.on('data', this.onData)
    socket.on('drain', this.onDrain)
    socket.on('error', this.onError)
    socket.on('close', this.onClose)
  }

  get waiting (): number {
    return this.waiters.size
  }

  // Arrow properties: one closure per connection, none per request.
  private readonly onData = (chunk: Buffer): void => {
    this.decoder.push(chunk)
    this.flush()
  }

  private readonly onDrain = (): void => {
    if (this.readPaused && !this.closing) {
      this.readPaused = false
      this.socket.resume()
    }
  }

  private readonly onError = (err: NodeJS.ErrnoException): void => {
    // EPIPE / ECONNRESET are a client going away; 'close' follows and cleans up.
    if (this.host.events.wants('socket-error')) {
      this.host.events.publish('socket-error', { connection: this.id, code: err.code, message: err.message })
    }
  }

  private readonly onClose = (): void => {
    if (this.closed) return
    this.closed = true
    this.closing = true
    this.decoder.stop()
    this.cancelWaiters(null)
    this.host.connectionClosed(this)
  }

  private readonly flushTick = (): void => {
    this.flushScheduled = false
    this.flush()
  }

  onFrame (buf: Buffer, start: number, end: number): void {
    this.requests++
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
          this.host.events.publish('bad-frame', { connection: this.id, code: e.code, message: e.message })
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

  onFrameTooLarge (length: number, maxFrameBytes: number): void {
    this.host.counters.framesTooLarge++
    const message = `frame of ${length} bytes exceeds maxFrameBytes ${maxFrameBytes}; closing the connection`
    if (this.host.events.wants('bad-frame')) {
      this.host.events.publish('bad-frame', { connection: this.id, code: ErrorCodes.FRAME_TOO_LARGE, message })
    }
    this.replyError(null, ErrorCodes.FRAME_TOO_LARGE, message)
    // The stream's frame boundaries are lost: answer what was read, then hang up.
    this.close()
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
        if (this.closed) return
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
        const r = this.host.service.acquire(item.key, item.count, 0)
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
    if (!this.flushScheduled) {
      this.flushScheduled = true
      process.nextTick(this.flushTick)
    }
  }

  /** Cancel every waiter; with a code, tell each client why (used at shutdown). */
  private cancelWaiters (code: typeof ErrorCodes.SHUTTING_DOWN | null): void {
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

  private replyError (id: number | null, code: string, message: string): void {
    this.host.counters.errorReplies++
    this.push(encodeErrorReply(id, code, message))
  }

  private noteInternal (err: unknown): void {
    this.host.counters.internalErrors++
    if (this.host.events.wants('internal-error')) {
      this.host.events.publish('internal-error', { connection: this.id, error: err })
    }
  }

  private pushDecision (id: number, d: Decision): void {
    if (this.closed) return
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
    if (!this.closed) this.out.append(frame)
  }

  /** Write every queued reply in one socket.write. */
  private flush (): void {
    if (this.out.length === 0) return
    const data = this.out.take()
    const socket = this.socket
    if (!socket.writable) return
    socket.write(data)
    if (socket.writableLength > WRITE_HIGH_WATER && !this.readPaused && !this.closing) {
      this.readPaused = true
      socket.pause()
    }
  }

  /** Stop reading, drop waiters, send what is queued, then close. */
  close (): void {
    if (this.closing) return
    this.closing = true
    this.decoder.stop()
    this.cancelWaiters(null)
    this.flush()
    closeSocketSoon(this.socket)
  }

  /**
   * Server stop: each waiter gets E_SHUTTING_DOWN, then one E_SHUTTING_DOWN
   * with id null says why the connection closes (for requests still in
   * flight, which will not be read), then the connection closes.
   */
  shutdown (): void {
    if (this.closing) return
    this.cancelWaiters(ErrorCodes.SHUTTING_DOWN)
    this.replyError(null, ErrorCodes.SHUTTING_DOWN, 'quotad is shutting down; closing the connection')
    this.close()
  }

  /** Tear down now (grace period over). */
  destroy (): void {
    this.socket.destroy()
  }
}
