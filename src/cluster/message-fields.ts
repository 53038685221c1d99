/**
 * The checks every field of a cluster message goes through (messages.ts,
 * gossip-parse.ts): names, numbers, keys and lists, each bounded, each
 * failing with E_BAD_FRAME and what was wrong. Apart from the message
 * types so both parsers share one set of rules and neither imports the
 * other at run time.
 */
import { ErrorCodes, QuotadError } from '../errors.js'

export interface MessageBounds {
  maxKeyBytes: number
  /** Most keys (or grant items) in one message. */
  maxEntries: number
  /** Most rules in one gossip. */
  maxRules: number
  /** Most ack entries (peers) in one gossip. */
  maxPeers: number
  /** Most members in one seed's gossip. */
  maxMembers: number
}

export const DEFAULT_BOUNDS: MessageBounds = { maxKeyBytes: 256, maxEntries: 4096, maxRules: 10_000, maxPeers: 1024, maxMembers: 300 }

/** Most refusals a seed's gossip lists. */
export const MAX_REFUSED = 16

/** Most epochs a gossip's `carries` lists. */
export const MAX_CARRIES = 8

/** Fields in a gossip key line. */
export const KEY_LINE_FIELDS = 8

export function bad (what: string): never {
  throw new QuotadError(ErrorCodes.BAD_FRAME, `cluster message: ${what}`)
}

const NAME = /^[A-Za-z0-9._:-]{1,64}$/
/** A peer id as the transport prints it (base58; the simulator's are `id:<name>`). */
export const PEER_ID = /^[A-Za-z0-9._:-]{1,100}$/

export function name (v: unknown, what: string): string {
  if (typeof v !== 'string' || !NAME.test(v)) bad(`${what} must be a name`)
  return v as string
}

export function num (v: unknown, what: string, min = 0): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) bad(`${what} must be a finite number >= ${min}`)
  return v as number
}

export function seq (v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) bad(`${what} must be a whole number`)
  return v as number
}

export function key (v: unknown, b: MessageBounds): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > b.maxKeyBytes || Buffer.byteLength(v) > b.maxKeyBytes) bad('key must be a string within the key bound')
  return v as string
}

export function list (v: unknown, max: number, what: string): unknown[] {
  if (!Array.isArray(v)) bad(`${what} must be an array`)
  if ((v as unknown[]).length > max) bad(`${what} has more than ${max} entries`)
  return v as unknown[]
}

export function tuple (v: unknown, n: number, what: string): unknown[] {
  if (!Array.isArray(v) || v.length !== n) bad(`${what} must be a ${n}-tuple`)
  return v as unknown[]
}
