/**
 * The contract between the server and its connections: what a Connection
 * reads from its UnixServer (limits, service, clock, events, counters), and
 * the one way either of them closes a socket.
 */
import type net from 'node:net'
import type { LimitsConfig } from '../config/types.js'
import type { QuotaService } from '../core/types.js'
import type { Clock } from '../clock.js'
import type { Connection } from './connection.js'
import type { EventSink } from './events.js'
import type { TurnScheduler } from './scheduler.js'

/** How long a closing connection may take to flush before it is destroyed. */
const CLOSE_GRACE_MS = 2000

/** What a connection needs from its server. */
export interface ConnectionHost {
  readonly limits: LimitsConfig
  readonly service: QuotaService
  readonly clock: Clock
  readonly events: EventSink
  readonly stopping: boolean
  readonly counters: ServerCounters
  /** Round-robin turns for connections with more input than one turn handles. */
  readonly scheduler: TurnScheduler
  connectionClosed: (conn: Connection) => void
}

export interface ServerCounters {
  requests: number
  errorReplies: number
  badFrames: number
  framesTooLarge: number
  waiting: number
  overloaded: number
  internalErrors: number
  /** Most bytes one connection ever held at once: replies not yet sent plus input not yet answered. */
  peakConnectionBytes: number
}

/** Close `socket` after what was written reaches the kernel, or after a grace period. */
export function closeSocketSoon (socket: net.Socket, last?: Buffer): void {
  if (socket.destroyed) return
  socket.once('finish', () => socket.destroy())
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref()
  if (last !== undefined && socket.writable) socket.end(last)
  else socket.end()
}
