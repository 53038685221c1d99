/**
 * The gRPC transport of Envoy's Rate Limit Service (rls-service.ts decides
 * what is said): one @grpc/grpc-js server on a Unix socket or a loopback
 * port (nodes[].grpc, --grpc, QUOTAD_GRPC), serving
 * envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
 *
 * A bad request gets a gRPC status (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...)
 * and the server goes on; a request larger than limits.maxFrameBytes is
 * refused by grpc-js before it is decoded. A Unix socket path is taken as the
 * Unix-socket server takes its own (socket-file.ts: a live socket at the path
 * is E_SOCKET_IN_USE, a stale one is removed), then chmod'ed to the node's
 * socketMode, and removed at stop only if it is still ours.
 */
import { lstat, chmod } from 'node:fs/promises'
import { Server, ServerCredentials, status, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js'
import type { Clock } from '../clock.js'
import type { EnvoyConfig, LimitsConfig } from '../config/types.js'
import type { QuotaService } from '../core/types.js'
import { ErrorCodes, QuotadError, isQuotadError } from '../errors.js'
import { prepareSocketPath, removeSocketFile, type SocketFileIdentity } from '../server/socket-file.js'
import type { Logger } from '../util/log.js'
import { rateLimitService, type RlsRequest, type RlsResponse } from './rls-proto.js'
import { RlsService } from './rls-service.js'

/** How long a stop waits for calls in flight before it cuts them. */
const STOP_GRACE_MS = 2000

export interface RlsServerOptions {
  /** `unix:/abs/path` or a loopback HOST:PORT (validated by config/envoy-config.ts). */
  address: string
  /** Permission bits of a Unix socket file. */
  socketMode: number
  envoy: EnvoyConfig | undefined
  service: QuotaService
  limits: LimitsConfig
  clock: Clock
  log: Logger
}

export interface RlsCounters {
  requests: number
  /** Answers with overall_code OVER_LIMIT. */
  overLimit: number
  /** Calls answered with a gRPC error status. */
  errors: number
}

/** The gRPC status of a QuotadError: what the caller did wrong, or what the node lacks. */
function grpcStatus (code: string): status {
  switch (code) {
    case ErrorCodes.BAD_ARGUMENT: case ErrorCodes.KEY_TOO_LONG: case ErrorCodes.BAD_KEY: case ErrorCodes.BATCH_TOO_LARGE:
      return status.INVALID_ARGUMENT
    case ErrorCodes.KEY_TABLE_FULL: case ErrorCodes.QUEUE_FULL: case ErrorCodes.OVERLOADED:
      return status.RESOURCE_EXHAUSTED
    case ErrorCodes.SHUTTING_DOWN:
      return status.UNAVAILABLE
    default:
      return status.INTERNAL
  }
}

export class RlsServer {
  readonly rls: RlsService
  readonly counters: RlsCounters = { requests: 0, overLimit: 0, errors: 0 }
  private readonly opts: RlsServerOptions
  private readonly server: Server
  private socket: { path: string, identity: SocketFileIdentity } | null = null
  private stopping = false
  private bound: string | null = null

  constructor (opts: RlsServerOptions) {
    this.opts = opts
    this.rls = new RlsService({ envoy: opts.envoy, service: opts.service, limits: opts.limits, clock: opts.clock })
    // channelz: per-call bookkeeping for a debugging service quotad does not expose.
    this.server = new Server({ 'grpc.max_receive_message_length': opts.limits.maxFrameBytes, 'grpc.enable_channelz': 0 })
    this.server.addService(rateLimitService(), { ShouldRateLimit: this.shouldRateLimit.bind(this) })
  }

  /** Where it listens: `unix:/path`, or HOST:PORT with the port it got (port 0 in the file picks one). */
  get address (): string {
    return this.bound ?? this.opts.address
  }

  async start (): Promise<void> {
    const unix = this.opts.address.startsWith('unix:') ? this.opts.address.slice(5) : null
    if (unix !== null) await prepareSocketPath(unix)
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(this.opts.address, ServerCredentials.createInsecure(), (err, port) => {
        if (err !== null) {
          reject(/EADDRINUSE|address already in use/i.test(err.message)
            ? new QuotadError(ErrorCodes.SOCKET_IN_USE, `gRPC address ${this.opts.address} is in use`)
            : err)
        } else {
          resolve(port)
        }
      })
    })
    if (unix !== null) {
      await chmod(unix, this.opts.socketMode)
      const st = await lstat(unix)
      this.socket = { path: unix, identity: { dev: st.dev, ino: st.ino } }
      this.bound = this.opts.address
    } else {
      this.bound = this.opts.address.replace(/:\d+$/, `:${port}`)
    }
  }

  /** Stop taking calls; calls in flight are answered (or cut after a grace period). */
  async stop (): Promise<void> {
    if (this.stopping) return
    this.stopping = true
    await new Promise<void>(resolve => {
      const timer = setTimeout(() => { this.server.forceShutdown(); resolve() }, STOP_GRACE_MS)
      timer.unref()
      this.server.tryShutdown(() => { clearTimeout(timer); resolve() })
    })
    if (this.socket !== null) removeSocketFile(this.socket.path, this.socket.identity)
  }

  setConfig (envoy: EnvoyConfig | undefined): void {
    this.rls.setConfig(envoy)
  }

  private shouldRateLimit (call: ServerUnaryCall<RlsRequest, RlsResponse>, callback: sendUnaryData<RlsResponse>): void {
    this.counters.requests++
    if (this.stopping) {
      this.fail(callback, new QuotadError(ErrorCodes.SHUTTING_DOWN, 'quotad is shutting down'))
      return
    }
    let answer
    try {
      answer = this.rls.answer(call.request)
    } catch (err) {
      this.fail(callback, err)
      return
    }
    if (!('promise' in answer)) {
      this.ok(callback, answer)
      return
    }
    const pending = answer
    call.on('cancelled', () => pending.cancel())
    pending.promise.then(r => this.ok(callback, r), (err: unknown) => this.fail(callback, err))
  }

  private ok (callback: sendUnaryData<RlsResponse>, r: RlsResponse): void {
    if (r.overall_code === 'OVER_LIMIT') this.counters.overLimit++
    callback(null, r)
  }

  private fail (callback: sendUnaryData<RlsResponse>, err: unknown): void {
    this.counters.errors++
    if (!isQuotadError(err)) this.opts.log.error('ShouldRateLimit failed', { err })
    const code = isQuotadError(err) ? err.code : ErrorCodes.INTERNAL
    const details = err instanceof Error ? err.message : String(err)
    callback({ code: grpcStatus(code), details: `${code}: ${details}` })
  }
}
