/**
 * The Unix-socket server: owns the listening socket, the socket file and the
 * set of live connections. Per-connection work (framing, requests, waiters,
 * backpressure) lives in connection.ts; the socket file's rules live in
 * socket-file.ts.
 *
 * Life cycle: `start()` prepares the path (refusing a live daemon or a
 * non-socket file, replacing a stale socket), listens with exact permission
 * bits, and accepts connections up to `limits.maxConnections` (the one after
 * that gets a single E_OVERLOADED frame with id null and is closed). `stop()`
 * stops accepting, answers every waiting acquire with E_SHUTTING_DOWN (after
 * cancelling it), closes every connection, waits for them (at most
 * `shutdownGraceMs`), and unlinks the socket file if it is still ours.
 */
import net from 'node:net'
import type { LimitsConfig } from '../config/types.js'
import { DEFAULT_SOCKET_MODE } from '../config/types.js'
import type { QuotaService } from '../core/types.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import { systemClock, type Clock } from '../clock.js'
import { encodeErrorReply } from '@quotad/client/wire'
import { Connection } from './connection.js'
import { closeSocketSoon, type ConnectionHost, type ServerCounters } from './host.js'
import { EventSink, type ServerEventListener } from './events.js'
import { TurnScheduler } from './scheduler.js'
import { listenOnSocket, prepareSocketPath, removeSocketFile, type SocketFileIdentity } from './socket-file.js'

export interface UnixServerOptions {
  /** Absolute path of the socket file. */
  path: string
  /** Permission bits of the socket file. @default 0o660 */
  socketMode?: number
  limits: LimitsConfig
  service: QuotaService
  /** Time source for `ping` replies. @default systemClock */
  clock?: Clock
  /** Called for every server event (also published on diagnostics_channel `quotad:server:<name>`). */
  onEvent?: ServerEventListener
  /** How long `stop()` waits for connections to close before destroying them. @default 2000 */
  shutdownGraceMs?: number
}

export interface ServerStats extends ServerCounters {
  listening: boolean
  path: string
  connections: number
  connectionsTotal: number
  connectionsRefused: number
}

export interface ConnectionStats {
  id: number
  requests: number
  waiting: number
  bufferedBytes: number
  peakBufferedBytes: number
}

type State = 'new' | 'starting' | 'listening' | 'stopping' | 'stopped'

export class UnixServer implements ConnectionHost {
  readonly path: string
  readonly socketMode: number
  readonly limits: LimitsConfig
  readonly service: QuotaService
  readonly clock: Clock
  readonly events: EventSink
  readonly counters: ServerCounters = {
    requests: 0,
    errorReplies: 0,
    badFrames: 0,
    framesTooLarge: 0,
    waiting: 0,
    overloaded: 0,
    internalErrors: 0,
    peakConnectionBytes: 0
  }

  readonly scheduler = new TurnScheduler()

  private readonly shutdownGraceMs: number
  private readonly connections = new Set<Connection>()
  private server: net.Server | null = null
  private identity: SocketFileIdentity | null = null
  private state: State = 'new'
  private nextConnectionId = 1
  private connectionsTotal = 0
  private connectionsRefused = 0
  private allClosed: (() => void) | null = null
  private starting: Promise<void> | null = null
  private stopPromise: Promise<void> | null = null

  constructor (opts: UnixServerOptions) {
    if (typeof opts.path !== 'string' || opts.path.length === 0) {
      throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'path must be a non-empty string')
    }
    const mode = opts.socketMode ?? DEFAULT_SOCKET_MODE
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) {
      throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `socketMode must be permission bits in [0, 0o777], got ${mode}`)
    }
    const grace = opts.shutdownGraceMs ?? 2000
    if (!Number.isFinite(grace) || grace < 0) {
      throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `shutdownGraceMs must be a non-negative number, got ${grace}`)
    }
    this.path = opts.path
    this.socketMode = mode
    this.limits = opts.limits
    this.service = opts.service
    this.clock = opts.clock ?? systemClock
    this.events = new EventSink(opts.onEvent)
    this.shutdownGraceMs = grace
  }

  get stopping (): boolean {
    return this.state === 'stopping' || this.state === 'stopped'
  }

  /** Take the socket path and listen. Rejects with E_SOCKET_IN_USE if the path is taken. */
  start (): Promise<void> {
    if (this.state !== 'new') return Promise.reject(new QuotadError(ErrorCodes.INTERNAL, `start() called on a ${this.state} server`))
    this.state = 'starting'
    this.starting = this.listen()
    return this.starting
  }

  private async listen (): Promise<void> {
    try {
      await prepareSocketPath(this.path)
      // Half-open: a client's end of input is handled by the Connection, which
      // first answers the input it still holds (see Connection.onEnd).
      const server = net.createServer({ allowHalfOpen: true }, this.onConnection)
      this.identity = await listenOnSocket(server, this.path, this.socketMode)
      server.on('error', err => this.events.publish('socket-error', { code: (err as NodeJS.ErrnoException).code, message: err.message }))
      this.server = server
    } catch (err) {
      this.state = 'stopped'
      throw err
    }
    this.state = 'listening'
    this.events.publish('listening', { path: this.path, mode: this.socketMode })
  }

  /** Stop accepting, answer waiters with E_SHUTTING_DOWN, close every connection, remove the socket file. */
  stop (): Promise<void> {
    this.stopPromise ??= this.shutdown()
    return this.stopPromise
  }

  private async shutdown (): Promise<void> {
    if (this.state === 'starting') await this.starting?.catch(() => {})
    if (this.state !== 'listening') {
      this.state = 'stopped'
      return
    }
    this.state = 'stopping'
    const server = this.server
    const closed = server === null
      ? Promise.resolve()
      : new Promise<void>(resolve => server.close(() => resolve()))
    // The listener is closed now: the path may go, so a successor can start at once.
    if (this.identity !== null) removeSocketFile(this.path, this.identity)
    if (this.connections.size > 0) {
      const drained = new Promise<void>(resolve => { this.allClosed = resolve })
      for (const conn of this.connections) conn.shutdown()
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<void>(resolve => { timer = setTimeout(resolve, this.shutdownGraceMs) })
      await Promise.race([drained, grace])
      clearTimeout(timer)
      for (const conn of this.connections) conn.destroy()
    }
    await closed
    this.server = null
    this.state = 'stopped'
    this.events.publish('close', { path: this.path })
  }

  stats (): ServerStats {
    return {
      listening: this.state === 'listening',
      path: this.path,
      connections: this.connections.size,
      connectionsTotal: this.connectionsTotal,
      connectionsRefused: this.connectionsRefused,
      ...this.counters
    }
  }

  /** Per connection: requests read, bytes held now and at most (see Connection.bufferedBytes). */
  connectionStats (): ConnectionStats[] {
    return [...this.connections].map(c => ({
      id: c.id, requests: c.requests, waiting: c.waiting, bufferedBytes: c.bufferedBytes, peakBufferedBytes: c.peakBufferedBytes
    }))
  }

  connectionClosed (conn: Connection): void {
    this.connections.delete(conn)
    if (this.events.wants('disconnect')) {
      this.events.publish('disconnect', { connection: conn.id, requests: conn.requests })
    }
    if (this.connections.size === 0 && this.allClosed !== null) {
      this.allClosed()
      this.allClosed = null
    }
  }

  private readonly onConnection = (socket: net.Socket): void => {
    if (this.stopping) {
      socket.on('error', noop)
      closeSocketSoon(socket, encodeErrorReply(null, ErrorCodes.SHUTTING_DOWN, 'quotad is shutting down'))
      return
    }
    if (this.connections.size >= this.limits.maxConnections) {
      this.connectionsRefused++
      socket.on('error', noop)
      closeSocketSoon(socket, encodeErrorReply(null, ErrorCodes.OVERLOADED,
        `too many connections (limit ${this.limits.maxConnections})`))
      this.events.publish('refused', { reason: 'maxConnections', limit: this.limits.maxConnections })
      return
    }
    const id = this.nextConnectionId++
    this.connectionsTotal++
    const conn = new Connection(id, socket, this)
    this.connections.add(conn)
    if (this.events.wants('connection')) this.events.publish('connection', { connection: id })
  }
}

function noop (): void {}
