/**
 * One client connection of the Unix-socket server: read frames, have them
 * answered (answers.ts: the replies and the waiting acquires), write the
 * replies, close cleanly.
 *
 * Hot path and its data structures:
 *
 * - A socket 'data' chunk goes through the FrameDecoder, which calls
 *   `onFrame` for every complete frame in it, synchronously, with the bytes
 *   still in the chunk. Each request is decoded (fast-read.ts for the usual
 *   flat maps, strict-read.ts otherwise), validated and answered right there
 *   (answers.ts): its reply frame is encoded straight into `out`, the slab
 *   writer (out-buffer.ts; decisions and batches by hand in fast-write.ts).
 * - When the turn ends, `flush` hands everything in `out` to ONE
 *   socket.write, as one Buffer view, without a copy. So a client pipelining
 *   500 requests in one chunk costs one syscall each way.
 * - A waiting acquire (`service.acquire` returned a WaitHandle) is kept in
 *   the `waiters` set (answers.ts) until its promise settles. Its reply joins
 *   `out` and a flush is scheduled with process.nextTick; waiters that settle
 *   in the same tick share that one write. If the connection goes away
 *   first, every waiter is cancelled (`WaitHandle.cancel()`: spends nothing).
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
 * Bounds per connection: waiters <= limits.maxInflightPerConnection
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
import { ErrorCodes } from '../errors.js'
import { FrameDecoder, type FrameHandler } from '@quotad/client/wire'
import { Answers } from './answers.js'
import { closeSocketSoon, type ConnectionHost } from './host.js'
import type { Turned } from './scheduler.js'
import { TurnBudget, WRITE_HIGH_WATER } from './turn-budget.js'

export class Connection implements FrameHandler, Turned {
  readonly id: number
  readonly socket: net.Socket
  private readonly host: ConnectionHost
  private readonly decoder: FrameDecoder
  /** What the requests get back (answers.ts): the replies in `answers.out`, and the waiting acquires. */
  private readonly answers: Answers
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
    this.answers = new Answers(id, host, this.scheduleFlush)
    socket.on('data', this.onData)
    socket.on('drain', this.onDrain)
    socket.on('end', this.onEnd)
    socket.on('error', this.onError)
    socket.on('close', this.onClose)
  }

  get waiting (): number {
    return this.answers.waiting
  }

  /**
   * Bytes this connection holds now: replies not yet taken by the kernel
   * (`out` and the socket's write buffer) and input not yet answered (a
   * partial frame, input held by a paused decoder, the socket's read buffer).
   */
  get bufferedBytes (): number {
    if (this.closed) return 0
    return this.answers.out.length + this.socket.writableLength + this.decoder.bufferedBytes + this.socket.readableLength
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
    this.budget.begin(this.socket.writableLength, this.answers.out.length)
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
   * (docs/client-protocol.md), but only after the requests it sent: the decoder may
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
    this.answers.cancelWaiters(null)
    this.answers.drop() // the socket is gone: replies not sent are dropped with it
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

  /** A waiter's reply joined the queue: waiters that settle in the same tick share one write. */
  private readonly scheduleFlush = (): void => {
    if (!this.flushScheduled) {
      this.flushScheduled = true
      process.nextTick(this.flushTick)
    }
  }

  onFrame (buf: Buffer, start: number, end: number): void {
    this.requests++
    this.answers.answer(buf, start, end)
    // The turn ends after this frame: the rest of the chunk waits in the decoder.
    if (this.budget.spent(end - start + 4, this.answers.out.length)) this.decoder.pause()
  }

  onFrameTooLarge (length: number, maxFrameBytes: number): void {
    this.host.counters.framesTooLarge++
    const message = `frame of ${length} bytes exceeds maxFrameBytes ${maxFrameBytes}; closing the connection`
    if (this.host.events.wants('bad-frame')) {
      this.host.events.publish('bad-frame', { connection: this.id, code: ErrorCodes.FRAME_TOO_LARGE, message })
    }
    this.answers.replyError(null, ErrorCodes.FRAME_TOO_LARGE, message)
    // The stream's frame boundaries are lost: answer what was read, then hang up.
    this.close()
  }

  /** Write every queued reply in one socket.write. */
  private flush (): void {
    if (this.answers.out.length === 0) return
    const data = this.answers.out.take()
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
    this.answers.cancelWaiters(null)
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
    this.answers.cancelWaiters(ErrorCodes.SHUTTING_DOWN)
    this.answers.replyError(null, ErrorCodes.SHUTTING_DOWN, 'quotad is shutting down; closing the connection')
    this.close()
  }

  /** Tear down now (grace period over). */
  destroy (): void {
    this.socket.destroy()
  }
}
