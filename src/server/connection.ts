/**
 * One client connection of the Unix-socket server: read frames, answer them,
 * keep the connection's waiting acquires, close cleanly.
 *
 * Hot path and its data structures:
 *
 * - A socket 'data' chunk goes through the FrameDecoder, which calls
 *   `onFrame` for every complete frame in it, synchronously, with the bytes
 *   still in the chunk. Each request is decoded (fast-read.ts for the usual
 *   flat maps, strict-read.ts otherwise), validated and answered right there:
 *   its reply frame is encoded straight into `out`, the connection's slab
 *   writer (out-buffer.ts; decisions and batches by hand in fast-write.ts).
 * - When the turn ends, `flush` hands everything in `out` to ONE
 *   socket.write, as one Buffer view, without a copy. So a client pipelining
 *   500 requests in one chunk costs one syscall each way.
 * - A waiting acquire (`service.acquire` returned a WaitHandle) is kept in the
 *   `waiters` set until its promise settles. Its reply joins `out` and a flush
 *   is scheduled with process.nextTick; waiters that settle in the same tick
 *   share that one write. If the connection goes away first, every waiter is
 *   cancelled (`WaitHandle.cancel()`: spends nothing).
 *
 * Turns (fairness and backpressure). The connection works in turns: a 'data'
 * chunk starts one, and so does the scheduler (scheduler.ts). A turn ends
 * when its budget (turn-budget.ts: frames, bytes, time) is spent, or as soon
 * as the replies waiting to be sent (`out` plus the socket's write buffer)
 * pass WRITE_HIGH_WATER. The decoder is paused
 * right after the frame that ended the turn, keeping the rest of the chunk,
 * and the socket stops reading. Then:
 * - replies above WRITE_HIGH_WATER (a client that does not read): nothing
 *   more is done for this client until the socket drains;
 * - input left: the connection queues for another turn, behind every other
 *   busy connection;
 * - nothing left: reading goes on.
 *
 * Bounds per connection: `waiters.size` <= limits.maxInflightPerConnection
 * (E_OVERLOADED past it); replies waiting to be sent <= WRITE_HIGH_WATER plus
 * one reply (a status reply is at most STATUS_MAX_BYTES, a batch reply about
 * 100 bytes per item); input held <= one partial frame (maxFrameBytes) plus
 * the chunks read before reading stopped (64 KiB each, one or two). A client
 * that never reads costs about WRITE_HIGH_WATER + 2 × 64 KiB; `bufferedBytes`
 * and `peakBufferedBytes` report it.
 *
 * Replies for synchronous requests leave in request order; a waiting acquire
 * answers later, after replies to requests sent behind it.
 */
import type net from 'node:net'
import { ErrorCodes, isQuotadError } from '../errors.js'
import { isWaitHandle, type Decision, type WaitHandle } from '../core/types.js'
import {
  FrameDecoder, type FrameHandler, encodeErrorReply, encodePongReply, toWireError, type BatchResult, type Request, OutBuffer, writeBatchReply, writeDecisionReply
} from '@quotad/client/wire'
import { checkBatchItem, decodeRequest, encodeStatusReply, RequestError } from '../protocol/requests.js'
import { closeSocketSoon, type ConnectionHost } from './host.js'
import type { Turned } from './scheduler.js'
import { TurnBudget, WRITE_HIGH_WATER } from './turn-budget.js'

interface Waiter {
  readonly id: number
  readonly handle: WaitHandle
}

export class Connection implements FrameHandler, Turned {
  readonly id: number
  readonly socket: net.Socket
  private readonly host: ConnectionHost
  private readonly decoder: FrameDecoder
  private readonly waiters = new Set<Waiter>()
  private readonly out = new OutBuffer()
  private flushScheduled = false
  /** The socket is paused (our turn ended with work left, or the client is not reading). */
  private readPaused = false
  /** More than WRITE_HIGH_WATER bytes of replies wait: no work until 'drain'. */
  private backlogged = false
  private closing = false
  private closed = false
  /** The client half-closed: close once the input we hold is answered. */
  private inputEnded = false
  private readonly budget = new TurnBudget()
  queued = false
  requests = 0
  /** Most bytes this connection ever held at once (see `bufferedBytes`). */
  peakBufferedBytes = 0

  constructor (id: number, socket: net.Socket, host: ConnectionHost) {
    this.id = id
    this.socket = socket
    this.host = host
    this.decoder = new FrameDecoder(this, host.limits.maxFrameBytes)
    socket.on('data', this.onData)
    socket.on('drain', this.onDrain)
    socket.on('end', this.onEnd)
    socket.on('error', this.onError)
    socket.on('close', this.onClose)
  }

  get waiting (): number {
    return this.waiters.size
  }

  /**
   * Bytes this connection holds now: replies not yet taken by the kernel
   * (`out` and the socket's write buffer) and input not yet answered (a
   * partial frame, input held by a paused decoder, the socket's read buffer).
   */
  get bufferedBytes (): number {
    if (this.closed) return 0
    return this.out.length + this.socket.writableLength + this.decoder.bufferedBytes + this.socket.readableLength
  }

  // Arrow properties: one closure per connection, none per request.
  private readonly onData = (chunk: Buffer): void => {
    this.beginTurn()
    this.decoder.push(chunk)
    this.endTurn()
  }

  private readonly onDrain = (): void => {
    if (!this.backlogged || this.closing) return
    this.backlogged = false
    // Held input waits its turn behind the other busy connections.
    this.host.scheduler.enqueue(this)
  }

  /** A turn given by the scheduler: go on with held input. */
  runTurn (): void {
    if (this.closing || this.backlogged) return
    this.beginTurn()
    this.decoder.resume()
    this.endTurn()
  }

  private beginTurn (): void {
    this.budget.begin(this.socket.writableLength, this.out.length)
  }

  /** Send what the turn produced, then decide whether to read on, queue, or wait for 'drain'. */
  private endTurn (): void {
    this.flush()
    if (this.closing) return
    const d = this.decoder
    if (this.socket.writableLength > WRITE_HIGH_WATER) {
      // The client is not reading: no more work for it. The write that got us
      // here returned false, so 'drain' (or 'close') follows.
      this.backlogged = true
      this.setReading(false)
    } else if (d.isPaused && d.pendingBytes > 0) {
      this.setReading(false)
      this.host.scheduler.enqueue(this)
    } else if (this.inputEnded) {
      this.close() // everything the client sent is answered
    } else {
      if (d.isPaused) d.resume() // stopped exactly at the end of the input
      this.setReading(true)
    }
  }

  /**
   * The client shut down its side (or closed). That counts as disconnecting
   * (docs/protocol.md), but only after the requests it sent: the decoder may
   * still hold some, because a turn ended before them, and Node reports the
   * end as soon as its own buffer is empty.
   */
  private readonly onEnd = (): void => {
    this.inputEnded = true
    if (this.decoder.pendingBytes === 0) this.close()
  }

  private setReading (on: boolean): void {
    if (on === !this.readPaused) return
    this.readPaused = !on
    if (on) this.socket.resume()
    else this.socket.pause()
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
    this.out.clear() // the socket is gone: replies not sent are dropped with it
    this.host.connectionClosed(this)
  }

  /** Replies of waiters that settled this tick: one write, and the same backlog rule as a turn. */
  private readonly flushTick = (): void => {
    this.flushScheduled = false
    this.flush()
    if (!this.closing && !this.backlogged && this.socket.writableLength > WRITE_HIGH_WATER) {
      this.backlogged = true
      this.setReading(false)
    }
  }

  onFrame (buf: Buffer, start: number, end: number): void {
    this.answer(buf, start, end)
    // The turn ends after this frame: the rest of the chunk waits in the decoder.
    if (this.budget.spent(end - start + 4, this.out.length)) this.decoder.pause()
  }

  private answer (buf: Buffer, start: number, end: number): void {
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
    const held = socket.writableLength + this.decoder.bufferedBytes + socket.readableLength
    if (held > this.peakBufferedBytes) {
      this.peakBufferedBytes = held
      if (held > this.host.counters.peakConnectionBytes) this.host.counters.peakConnectionBytes = held
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
