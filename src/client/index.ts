/**
 * The typed client for a local quotad, used by apps, quotactl, the tests and
 * the benchmarks. A slow client makes the server look slow, so the request
 * path is kept short:
 *
 * - `pending` maps request id -> Pending (resolve, reject, deadline, kind).
 *   Ids are a wrapping uint32 counter; replies may arrive in any order.
 * - Frames are encoded straight into `out`, a slab writer (fast-codec.ts:
 *   acquire by hand, the rest with msgpackr); one process.nextTick flush
 *   writes everything issued in the tick with a single socket.write, so N
 *   requests issued in one tick cost one syscall.
 * - No timer per request: one unref'd sweeper interval rejects requests past
 *   their deadline with E_TIMEOUT (deadline = timeoutMs, plus waitMs for a
 *   waiting acquire; precision is the sweep period, at most 250 ms).
 * - Replies are decoded in place by the FrameDecoder, straight from the chunk.
 *
 * Connection loss rejects every pending request with E_CONNECTION (or with
 * the server's own code when it said why before closing, e.g. E_OVERLOADED).
 * With `reconnect` (default) the next request dials again, after a backoff
 * that grows with consecutive failures (0, 25, 50, ... up to 1000 ms).
 */
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { ErrorCodes, QuotadError, type ErrorCode } from '../errors.js'
import type { Decision } from '../core/types.js'
import { FrameDecoder, type FrameHandler } from '../protocol/frame.js'
import { OutBuffer, readDecisionReply, writeAcquireRequest } from '../protocol/fast-codec.js'
import { decodeReply, encodeMessage, MAX_REQUEST_ID, type BatchResult, type Reply } from '../protocol/messages.js'

export type { Decision } from '../core/types.js'
export type { BatchResult, WireError } from '../protocol/messages.js'

export interface ClientOptions {
  /** Path of the daemon's Unix socket. */
  socketPath: string
  /** Per-request timeout in ms; a waiting acquire gets `timeoutMs + waitMs`. @default 5000 */
  timeoutMs?: number
  /** Dial again on the next request after the connection drops. @default true */
  reconnect?: boolean
  /** Largest reply frame accepted; a larger one drops the connection. @default 64 MiB */
  maxFrameBytes?: number
}

export interface AcquireOptions {
  /** Tokens to spend. @default 1 */
  count?: number
  /** How long the daemon may queue the request for tokens, in ms. @default 0 */
  waitMs?: number
}

export interface PeekOptions {
  /** @default 1 */
  count?: number
}

export interface BatchItemInput {
  key: string
  count?: number
}

const DEFAULT_TIMEOUT_MS = 5000
const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
const MAX_BACKOFF_MS = 1000

/** What a reply is turned into for the caller. */
const KIND_DECISION = 0
const KIND_BATCH = 1
const KIND_STATUS = 2
const KIND_PONG = 3

class Pending {
  resolve!: (value: never) => void
  reject!: (err: QuotadError) => void
  readonly kind: number
  readonly deadline: number

  constructor (kind: number, deadline: number) {
    this.kind = kind
    this.deadline = deadline
  }
}

function connectionError (message: string, details?: unknown): QuotadError {
  return new QuotadError(ErrorCodes.CONNECTION, message, details)
}

export class QuotadClient {
  readonly socketPath: string
  readonly timeoutMs: number
  readonly reconnect: boolean
  readonly maxFrameBytes: number

  private readonly pending = new Map<number, Pending>()
  /** Frames not yet written: everything issued since the last flush. */
  private readonly out = new OutBuffer()
  private flushScheduled = false
  private seq = 0
  private socket: net.Socket | null = null
  private connected = false
  private connectWaiters: Array<(err: QuotadError | null) => void> = []
  private failures = 0
  private serverError: QuotadError | null = null
  private closed = false
  private readonly sweeper: NodeJS.Timeout

  private constructor (opts: ClientOptions) {
    if (typeof opts.socketPath !== 'string' || opts.socketPath.length === 0) {
      throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'socketPath must be a non-empty string')
    }
    this.socketPath = opts.socketPath
    this.timeoutMs = positive(opts.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs')
    this.reconnect = opts.reconnect ?? true
    this.maxFrameBytes = positive(opts.maxFrameBytes, DEFAULT_MAX_FRAME_BYTES, 'maxFrameBytes')
    const period = Math.max(5, Math.min(250, Math.floor(this.timeoutMs / 4)))
    this.sweeper = setInterval(this.sweep, period)
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

  /** Number of requests sent and not yet answered. */
  get inflight (): number {
    return this.pending.size
  }

  acquire (key: string, opts?: AcquireOptions): Promise<Decision> {
    const count = opts?.count
    const waitMs = opts?.waitMs
    const promise = this.register<Decision>(KIND_DECISION, typeof waitMs === 'number' && waitMs > 0 ? waitMs : 0)
    // The server validates arguments; an odd type simply takes the generic encoder.
    if (typeof key === 'string' && (count === undefined || typeof count === 'number') && (waitMs === undefined || typeof waitMs === 'number')) {
      writeAcquireRequest(this.out, this.seq, key, count, waitMs)
    } else {
      this.out.append(encodeMessage({ id: this.seq, op: 'acquire', key, count, waitMs }))
    }
    this.kick()
    return promise
  }

  peek (key: string, opts?: PeekOptions): Promise<Decision> {
    const msg: Record<string, unknown> = { id: 0, op: 'peek', key }
    if (opts?.count !== undefined) msg.count = opts.count
    return this.send(msg, KIND_DECISION, 0)
  }

  /** Acquire several keys at once, without waiting. Each item succeeds or fails alone. */
  batch (items: BatchItemInput[]): Promise<BatchResult[]> {
    return this.send({ id: 0, op: 'batch', items }, KIND_BATCH, 0)
  }

  status (): Promise<Record<string, unknown>> {
    return this.send({ id: 0, op: 'status' }, KIND_STATUS, 0)
  }

  /** Round-trip time in milliseconds. */
  async ping (): Promise<number> {
    const t0 = performance.now()
    await this.send<number>({ id: 0, op: 'ping' }, KIND_PONG, 0)
    return performance.now() - t0
  }

  /** Reject what is pending with E_CONNECTION and close the socket. Idempotent. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.sweeper)
    this.failAll(connectionError('client closed'))
    const socket = this.socket
    if (socket === null || socket.destroyed) return
    await new Promise<void>(resolve => {
      socket.once('close', () => resolve())
      socket.end()
      setTimeout(() => socket.destroy(), 1000).unref()
    })
  }

  // -------------------------------------------------------------------------

  private nextId (): number {
    do {
      this.seq = this.seq >= MAX_REQUEST_ID ? 1 : this.seq + 1
    } while (this.pending.has(this.seq))
    return this.seq
  }

  /** Send a generic request: the id is allocated here and put into `msg`. */
  private send<T> (msg: Record<string, unknown>, kind: number, extraMs: number): Promise<T> {
    const promise = this.register<T>(kind, extraMs)
    msg.id = this.seq
    this.out.append(encodeMessage(msg))
    this.kick()
    return promise
  }

  /**
   * Allocate the next id (left in `this.seq`) and its pending entry. When the
   * client cannot send, the entry is failed at once and the caller's frame is
   * simply dropped by the next flush or failAll.
   */
  private register<T> (kind: number, extraMs: number): Promise<T> {
    const id = this.nextId()
    const p = new Pending(kind, Date.now() + this.timeoutMs + extraMs)
    const promise = new Promise<T>((resolve, reject) => {
      p.resolve = resolve as (value: never) => void
      p.reject = reject
    })
    if (this.closed) {
      p.reject(connectionError('client closed'))
    } else if (!this.connected && this.socket === null && !this.reconnect) {
      p.reject(connectionError(`not connected to ${this.socketPath} (reconnect is off)`))
    } else {
      this.pending.set(id, p)
    }
    return promise
  }

  /** Make sure what was just queued gets written: this tick, or once connected. */
  private kick (): void {
    if (this.closed) {
      this.out.take()
    } else if (this.connected) {
      if (!this.flushScheduled) {
        this.flushScheduled = true
        process.nextTick(this.flush)
      }
    } else if (this.socket === null) {
      if (!this.reconnect) this.out.take()
      else this.dial().catch(() => { /* pending requests were rejected by the dial */ })
    }
  }

  private readonly flush = (): void => {
    this.flushScheduled = false
    if (!this.connected || this.out.length === 0) return
    this.socket?.write(this.out.take())
  }

  private readonly sweep = (): void => {
    if (this.pending.size === 0) return
    const now = Date.now()
    for (const [id, p] of this.pending) {
      if (p.deadline <= now) {
        this.pending.delete(id)
        p.reject(new QuotadError(ErrorCodes.TIMEOUT, `no reply within the timeout (timeoutMs ${this.timeoutMs}, plus waitMs)`))
      }
    }
  }

  /** Open a connection (after the backoff, if the last attempts failed). */
  private dial (): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.connectWaiters.push(err => err === null ? resolve() : reject(err))
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
      const err = this.serverError ?? (wasConnected
        ? connectionError(`connection to ${this.socketPath} closed`, lastError?.code)
        : connectionError(`cannot connect to ${this.socketPath}: ${lastError?.code ?? 'closed'}`, lastError?.code))
      this.settleDial(err)
      this.failAll(err)
    })
    const go = (): void => { if (this.closed) socket.destroy(); else socket.connect(this.socketPath) }
    if (delay === 0) go()
    else setTimeout(go, delay).unref()
    return done
  }

  private settleDial (err: QuotadError | null): void {
    const waiters = this.connectWaiters
    this.connectWaiters = []
    for (const w of waiters) w(err)
  }

  private failAll (err: QuotadError): void {
    this.out.take()
    if (this.pending.size === 0) return
    const pending = [...this.pending.values()]
    this.pending.clear()
    for (const p of pending) p.reject(err)
  }

  private readonly handler: FrameHandler = {
    onFrame: (buf, start, end) => this.onReply(buf, start, end),
    onFrameTooLarge: (length, max) => {
      this.serverError = connectionError(`reply frame of ${length} bytes exceeds maxFrameBytes ${max}`)
      this.socket?.destroy()
    }
  }

  private onReply (buf: Buffer, start: number, end: number): void {
    const fast = readDecisionReply(buf, start, end)
    if (fast !== undefined) {
      const p = this.pending.get(fast.id)
      if (p !== undefined && p.kind === KIND_DECISION) {
        this.pending.delete(fast.id)
        p.resolve(fast.decision as never)
        return
      }
    }
    let reply: Reply
    try {
      reply = decodeReply(buf, start, end)
    } catch (err) {
      this.serverError = connectionError(`bad reply from server: ${(err as Error).message}`)
      this.socket?.destroy()
      return
    }
    if (reply.id === null) {
      // A connection-level complaint (too many connections, oversized frame,
      // shutting down): the server closes next, and pending requests fail with it.
      if (!reply.ok) this.serverError = new QuotadError(reply.error.code as ErrorCode, reply.error.message)
      return
    }
    const p = this.pending.get(reply.id)
    if (p === undefined) return // timed out already
    this.pending.delete(reply.id)
    if (!reply.ok) {
      p.reject(new QuotadError(reply.error.code as ErrorCode, reply.error.message))
      return
    }
    switch (p.kind) {
      case KIND_DECISION: {
        const r = reply as Decision
        p.resolve({
          allowed: r.allowed,
          remaining: r.remaining,
          limit: r.limit,
          resetMs: r.resetMs,
          retryAfterMs: r.retryAfterMs,
          rule: r.rule
        } as never)
        return
      }
      case KIND_BATCH:
        p.resolve((reply as { results: BatchResult[] }).results as never)
        return
      case KIND_STATUS:
        p.resolve((reply as { status: Record<string, unknown> }).status as never)
        return
      case KIND_PONG:
        p.resolve((reply as { time: number }).time as never)
    }
  }
}

function positive (value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `${name} must be a positive number, got ${String(value)}`)
  }
  return value
}
