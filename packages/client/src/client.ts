/**
 * The typed client for a local quotad, used by apps, quotactl, the tests and
 * the benchmarks. A slow client makes the server look slow, so the request
 * path is kept short:
 *
 * - `pending` (pending.ts) maps request id -> Pending; replies may arrive in
 *   any order and are routed by id.
 * - Frames are encoded straight into `out`, a slab writer (out-buffer.ts):
 *   acquire and batch by hand (fast-write.ts), the rest with msgpackr. One
 *   process.nextTick flush writes everything issued in the tick with a single
 *   socket.write, so N requests issued in one tick cost one syscall.
 * - Replies are decoded in place from the socket chunk; decision and batch
 *   replies by hand (fast-read.ts), anything else with msgpackr.
 * - No timer per request: one unref'd sweeper interval fails requests past
 *   their deadline with E_TIMEOUT (deadline: timeoutMs, plus waitMs for a
 *   waiting acquire; precision: the sweep period, timeoutMs / 4 capped to
 *   [5, 250] ms).
 *
 * Connection loss fails every pending request with E_CONNECTION, or with the
 * server's own code when it said why before closing (E_OVERLOADED,
 * E_FRAME_TOO_LARGE, E_SHUTTING_DOWN). With `reconnect` (the default) the next
 * request dials again, after a backoff that grows with consecutive failed
 * dials (0, 25, 50, ... 1000 ms).
 */
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { ErrorCodes, QuotadError, type ErrorCode } from './errors.js'
import type { Decision } from './decision.js'
import { FrameDecoder, type FrameHandler } from './wire/frame.js'
import { OutBuffer } from './wire/out-buffer.js'
import { writeAcquireRequest, writeBatchRequest } from './wire/fast-write.js'
import { readBatchReply, readDecisionReply } from './wire/fast-read.js'
import { decodeReply, encodeMessage, type BatchResult, type Reply } from './wire/messages.js'
import {
  resolveClientOptions, type AcquireOptions, type BatchItemInput, type ClientOptions, type PeekOptions
} from './options.js'
import { KIND_BATCH, KIND_DECISION, KIND_PONG, KIND_STATUS, Pending, PendingTable } from './pending.js'

/** Queued bytes (about 3 small acquires; measured best of 40-256) after which the client writes without waiting for the end of the tick. */
const EARLY_FLUSH_BYTES = 96

const MAX_BACKOFF_MS = 1000

function connectionError (message: string, details?: unknown): QuotadError {
  return new QuotadError(ErrorCodes.CONNECTION, message, details)
}

export class QuotadClient {
  readonly socketPath: string
  readonly timeoutMs: number
  readonly reconnect: boolean
  readonly maxFrameBytes: number

  private readonly pending = new PendingTable()
  /** Frames issued since the last flush. */
  private readonly out = new OutBuffer()
  private flushScheduled = false
  private socket: net.Socket | null = null
  private connected = false
  private dialWaiters: Array<(err: QuotadError | null) => void> = []
  private failures = 0
  /** Why the server said it would close this connection (a reply with id null). */
  private serverError: QuotadError | null = null
  private closed = false
  private readonly sweeper: NodeJS.Timeout

  private constructor (opts: ClientOptions) {
    const o = resolveClientOptions(opts)
    this.socketPath = o.socketPath
    this.timeoutMs = o.timeoutMs
    this.reconnect = o.reconnect
    this.maxFrameBytes = o.maxFrameBytes
    this.sweeper = setInterval(this.sweep, Math.max(5, Math.min(250, Math.floor(this.timeoutMs / 4))))
    this.sweeper.unref()
  }

  /** Connect to the daemon. Rejects with E_CONNECTION if nothing answers at `socketPath`. */
  static async connect (opts: ClientOptions): Promise<QuotadClient> {
    const client = new QuotadClient(opts)
    try {
      await client.dial()
    } catch (err) {
      await client.close()
      throw err
    }
    return client
  }

  /** Requests sent and not yet answered. */
  get inflight (): number {
    return this.pending.size
  }

  /** Spend `count` tokens of `key`, waiting up to `waitMs` for them. */
  acquire (key: string, opts?: AcquireOptions): Promise<Decision> {
    const count = opts?.count
    const waitMs = opts?.waitMs
    const id = this.pending.nextId()
    const promise = this.register<Decision>(id, KIND_DECISION, typeof waitMs === 'number' && waitMs > 0 ? waitMs : 0)
    // Odd argument types take the generic encoder, and the server answers E_BAD_ARGUMENT.
    if (typeof key === 'string' && (count === undefined || typeof count === 'number') && (waitMs === undefined || typeof waitMs === 'number')) {
      writeAcquireRequest(this.out, id, key, count, waitMs)
    } else {
      this.out.append(encodeMessage({ id, op: 'acquire', key, count, waitMs }))
    }
    this.kick()
    return promise
  }

  /** Would `count` tokens of `key` be granted now? Spends nothing. */
  peek (key: string, opts?: PeekOptions): Promise<Decision> {
    const msg: Record<string, unknown> = { op: 'peek', key }
    if (opts?.count !== undefined) msg.count = opts.count
    return this.send(msg, KIND_DECISION)
  }

  /** Acquire several keys at once, without waiting. Each item succeeds or fails alone. */
  batch (items: BatchItemInput[]): Promise<BatchResult[]> {
    const id = this.pending.nextId()
    const promise = this.register<BatchResult[]>(id, KIND_BATCH, 0)
    if (!Array.isArray(items) || !writeBatchRequest(this.out, id, items)) {
      this.out.append(encodeMessage({ id, op: 'batch', items }))
    }
    this.kick()
    return promise
  }

  /** The daemon's status snapshot. */
  status (): Promise<Record<string, unknown>> {
    return this.send({ op: 'status' }, KIND_STATUS)
  }

  /** Round-trip time in milliseconds. */
  async ping (): Promise<number> {
    const t0 = performance.now()
    await this.send<number>({ op: 'ping' }, KIND_PONG)
    return performance.now() - t0
  }

  /**
   * Fail what is pending with E_CONNECTION and close the socket. Idempotent.
   * Call it when done: an open connection keeps the process running.
   */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.sweeper)
    this.fail(connectionError('client closed'))
    const socket = this.socket
    if (socket === null || socket.destroyed) return
    // The daemon closes its side when ours ends; one that does not is cut off
    // after 1 s. The timer is cleared, so a closed client leaves nothing on
    // the event loop and a script that closes its client exits at once.
    await new Promise<void>(resolve => {
      const cutOff = setTimeout(() => socket.destroy(), 1000)
      socket.once('close', () => { clearTimeout(cutOff); resolve() })
      socket.end()
    })
  }

  // -------------------------------------------------------------------------

  private send<T> (msg: Record<string, unknown>, kind: number): Promise<T> {
    const id = this.pending.nextId()
    const promise = this.register<T>(id, kind, 0)
    msg.id = id
    this.out.append(encodeMessage(msg))
    this.kick()
    return promise
  }

  /**
   * Create the pending entry of request `id`. When the client cannot send, the
   * promise is rejected at once and `kick` drops the frame the caller writes.
   */
  private register<T> (id: number, kind: number, extraMs: number): Promise<T> {
    // Deadlines on the monotonic clock: a wall-clock step (NTP, suspend) must not time out or stall requests.
    const p = new Pending(kind, performance.now() + this.timeoutMs + extraMs)
    const promise = new Promise<T>((resolve, reject) => {
      p.resolve = resolve as (value: never) => void
      p.reject = reject
    })
    if (this.closed) {
      p.reject(connectionError('client closed'))
    } else if (!this.connected && this.socket === null && !this.reconnect) {
      p.reject(connectionError(`not connected to ${this.socketPath} (reconnect is off)`))
    } else {
      this.pending.add(id, p)
    }
    return promise
  }

  /** Get what was just queued written: this tick, or once connected. */
  private kick (): void {
    if (this.connected) {
      // Write early once a few frames are queued, so the daemon starts on them
      // while this tick queues the rest: with one write per tick, client and
      // daemon take turns idling, and each wake-up costs tens of µs.
      if (this.out.length >= EARLY_FLUSH_BYTES) { this.flush(); return }
      if (!this.flushScheduled) {
        this.flushScheduled = true
        process.nextTick(this.flush)
      }
    } else if (this.closed || (this.socket === null && !this.reconnect)) {
      this.out.take()
    } else if (this.socket === null) {
      this.dial().catch(() => { /* the dial failed the pending requests itself */ })
    }
  }

  private readonly flush = (): void => {
    this.flushScheduled = false
    if (!this.connected || this.closed || this.out.length === 0) return
    this.socket?.write(this.out.take())
  }

  private readonly sweep = (): void => {
    this.pending.sweep(performance.now(), () =>
      new QuotadError(ErrorCodes.TIMEOUT, `no reply within timeoutMs (${this.timeoutMs} ms, plus waitMs for a waiting acquire)`))
  }

  private fail (err: QuotadError): void {
    this.out.take()
    this.pending.failAll(err)
  }

  /** Open a connection (after the backoff, if the last dials failed). */
  private dial (): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.dialWaiters.push(err => err === null ? resolve() : reject(err))
    })
    if (this.connected) this.settleDial(null)
    if (this.socket !== null) return done
    const delay = this.failures === 0 ? 0 : Math.min(MAX_BACKOFF_MS, 25 * 2 ** (this.failures - 1))
    const socket = new net.Socket()
    this.socket = socket
    this.serverError = null
    const decoder = new FrameDecoder(this.handler, this.maxFrameBytes)
    let lastError: NodeJS.ErrnoException | null = null
    socket.on('connect', () => {
      this.connected = true
      this.failures = 0
      this.settleDial(null)
      this.flush()
    })
    socket.on('data', (chunk: Buffer) => decoder.push(chunk))
    socket.on('error', (err: NodeJS.ErrnoException) => { lastError = err })
    socket.on('close', () => {
      const wasConnected = this.connected
      this.socket = null
      this.connected = false
      decoder.stop()
      if (!wasConnected) this.failures++
      const code = lastError?.code
      const err = this.serverError ?? (wasConnected
        ? connectionError(`connection to ${this.socketPath} closed${code !== undefined ? ` (${code})` : ''}`, code)
        : connectionError(`cannot connect to ${this.socketPath} (${code ?? 'closed'}): is quotad running at ${this.socketPath}?`, code))
      this.settleDial(err)
      this.fail(err)
    })
    const go = (): void => {
      if (this.closed) socket.destroy()
      else socket.connect(this.socketPath)
    }
    if (delay === 0) go()
    else setTimeout(go, delay).unref()
    return done
  }

  private settleDial (err: QuotadError | null): void {
    const waiters = this.dialWaiters
    this.dialWaiters = []
    for (const w of waiters) w(err)
  }

  private readonly handler: FrameHandler = {
    onFrame: (buf, start, end) => this.onReply(buf, start, end),
    onFrameTooLarge: (length, max) => {
      this.serverError = connectionError(`reply frame of ${length} bytes exceeds maxFrameBytes ${max}`)
      this.socket?.destroy()
    }
  }

  private onReply (buf: Buffer, start: number, end: number): void {
    // The two frequent replies, read by hand.
    const fast = readDecisionReply(buf, start, end) ?? readBatchReply(buf, start, end)
    if (fast !== undefined) {
      const p = this.pending.get(fast.id)
      const value = 'decision' in fast ? fast.decision : fast.results
      if (p !== undefined && p.kind === ('decision' in fast ? KIND_DECISION : KIND_BATCH)) {
        this.pending.take(fast.id)
        p.resolve(value as never)
        return
      }
    }
    let reply: Reply
    try {
      reply = decodeReply(buf, start, end)
    } catch (err) {
      this.serverError = connectionError(`bad reply from the server: ${(err as Error).message}`)
      this.socket?.destroy()
      return
    }
    if (reply.id === null) {
      // A complaint about the connection itself (too many connections, an
      // oversized frame, shutting down): the server closes it next, and the
      // pending requests fail with this code.
      if (!reply.ok) this.serverError = new QuotadError(reply.error.code as ErrorCode, reply.error.message)
      return
    }
    const p = this.pending.take(reply.id)
    if (p === undefined) return // timed out already
    if (!reply.ok) {
      p.reject(new QuotadError(reply.error.code as ErrorCode, reply.error.message))
      return
    }
    const r = reply as unknown as Record<string, unknown>
    switch (p.kind) {
      case KIND_DECISION:
        p.resolve({
          allowed: r.allowed,
          remaining: r.remaining,
          limit: r.limit,
          resetMs: r.resetMs,
          retryAfterMs: r.retryAfterMs,
          rule: r.rule
        } as never)
        return
      case KIND_BATCH:
        p.resolve(r.results as never)
        return
      case KIND_STATUS:
        p.resolve(r.status as never)
        return
      default:
        p.resolve(r.time as never)
    }
  }
}
