/**
 * The client's public option and argument types, their defaults, and the
 * checks applied to them when a client is created.
 */
import { ErrorCodes, QuotadError } from './errors.js'

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
  /** How long the daemon may queue the request for tokens, in ms (<= the daemon's limits.maxWaitMs). @default 0 */
  waitMs?: number
}

export interface PeekOptions {
  /** Tokens the caller would spend. @default 1 */
  count?: number
}

export interface BatchItemInput {
  key: string
  /** @default 1 */
  count?: number
}

export const CLIENT_DEFAULTS = {
  timeoutMs: 5000,
  reconnect: true,
  maxFrameBytes: 64 * 1024 * 1024
} as const

export type ResolvedClientOptions = Required<ClientOptions>

export function resolveClientOptions (opts: ClientOptions): ResolvedClientOptions {
  if (opts === null || typeof opts !== 'object') {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'options must be an object {socketPath, timeoutMs?, reconnect?, maxFrameBytes?}')
  }
  if (typeof opts.socketPath !== 'string' || opts.socketPath.length === 0) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'socketPath must be a non-empty string')
  }
  if (opts.reconnect !== undefined && typeof opts.reconnect !== 'boolean') {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `reconnect must be a boolean, got ${typeof opts.reconnect}`)
  }
  return {
    socketPath: opts.socketPath,
    timeoutMs: positive(opts.timeoutMs, CLIENT_DEFAULTS.timeoutMs, 'timeoutMs'),
    reconnect: opts.reconnect ?? CLIENT_DEFAULTS.reconnect,
    maxFrameBytes: positive(opts.maxFrameBytes, CLIENT_DEFAULTS.maxFrameBytes, 'maxFrameBytes')
  }
}

function positive (value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `${name} must be a positive number, got ${String(value)}`)
  }
  return value
}
