/**
 * The request and reply shapes of the Unix-socket protocol and their msgpack
 * encoding, shared by the client and the daemon. docs/client-protocol.md is the prose
 * version of this file; the daemon's request validation is in its
 * src/protocol/requests.ts.
 *
 * Bodies are standard msgpack maps (one shared msgpackr `Packr` with
 * `useRecords: false`), so any language's msgpack library can speak it. The
 * Packr is module-wide because msgpackr keeps per-instance state and encodes
 * into a shared slab: one instance is both the fast and the correct choice.
 *
 * Every `encode*` writes the frame header into 4 bytes reserved in front of
 * the msgpack body (`RESERVE_START_SPACE`), so a frame costs one msgpack
 * encode and no copy. The most frequent messages (flat requests, decision and
 * batch replies) skip msgpackr altogether: see fast-read.ts and fast-write.ts,
 * which read and write the same bytes by hand.
 */
import { Packr, RESERVE_START_SPACE } from 'msgpackr'
import { ErrorCodes, QuotadError, isQuotadError } from '../errors.js'
import type { Decision } from '../decision.js'
import { FRAME_HEADER_BYTES } from './frame.js'

export const packr = new Packr({
  useRecords: false,
  // Small maps as fixmap (0x80-0x8f) rather than msgpackr's default map16.
  variableMapSize: true,
  // Other languages send small ids and counts as uint64 without a second thought.
  int64AsType: 'number',
  encodeUndefinedAsNil: true
})

const RESERVE_HEADER = RESERVE_START_SPACE | FRAME_HEADER_BYTES
/** Largest request id (ids are unsigned 32-bit). */
export const MAX_REQUEST_ID = 0xffff_ffff

export type Op = 'acquire' | 'peek' | 'batch' | 'status' | 'ping'
export const OPS: readonly Op[] = ['acquire', 'peek', 'batch', 'status', 'ping']

export interface AcquireRequest { id: number, op: 'acquire', key: string, count: number, waitMs: number }
export interface PeekRequest { id: number, op: 'peek', key: string, count: number }
/** Batch items are validated one by one by `checkBatchItem`, so each can fail alone. */
export interface BatchRequest { id: number, op: 'batch', items: unknown[] }
export interface StatusRequest { id: number, op: 'status' }
export interface PingRequest { id: number, op: 'ping' }
export type Request = AcquireRequest | PeekRequest | BatchRequest | StatusRequest | PingRequest

export interface BatchItem { key: string, count: number }

export interface WireError { code: string, message: string }
export type BatchResult = Decision | { error: WireError }

export interface DecisionReply extends Decision { id: number, ok: true }
export interface BatchReply { id: number, ok: true, results: BatchResult[] }
export interface StatusReply { id: number, ok: true, status: Record<string, unknown> }
export interface PongReply { id: number, ok: true, pong: true, time: number }
/** `id` is null when the request's id could not be read (see docs/client-protocol.md). */
export interface ErrorReply { id: number | null, ok: false, error: WireError }
export type Reply = DecisionReply | BatchReply | StatusReply | PongReply | ErrorReply

/** Error messages carry at most this many characters, so an error reply stays small. */
const MAX_MESSAGE_CHARS = 1024

function clip (message: string): string {
  return message.length <= MAX_MESSAGE_CHARS ? message : message.slice(0, MAX_MESSAGE_CHARS - 1) + '…'
}

/**
 * The `{code, message}` sent for any exception: QuotadError passes through,
 * anything else is E_INTERNAL. Never throws, whatever `err` is.
 */
export function toWireError (err: unknown): WireError {
  try {
    if (isQuotadError(err)) return { code: String(err.code), message: clip(String(err.message)) }
    return { code: ErrorCodes.INTERNAL, message: clip(`internal error: ${err instanceof Error ? err.message : String(err)}`) }
  } catch {
    // An object whose toString throws, a revoked proxy, ...
    return { code: ErrorCodes.INTERNAL, message: 'internal error (the exception could not be printed)' }
  }
}

// ---------------------------------------------------------------------------
// Encoding (both sides)

/** Encode any value as one complete frame (header + msgpack body), without a copy. */
export function encodeMessage (value: unknown): Buffer {
  const frame = packr.pack(value, RESERVE_HEADER)
  frame.writeUInt32BE(frame.length - FRAME_HEADER_BYTES, 0)
  return frame
}

/** The msgpackr form of a decision reply. The server writes the same bytes faster with fast-write.ts. */
export function encodeDecisionReply (id: number, d: Decision): Buffer {
  return encodeMessage({
    id,
    ok: true,
    allowed: d.allowed,
    remaining: d.remaining,
    limit: d.limit,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    rule: d.rule
  })
}

/** Never throws: an error reply is what the server sends when everything else failed. */
export function encodeErrorReply (id: number | null, code: string, message: string): Buffer {
  try {
    return encodeMessage({ id, ok: false, error: { code: String(code), message: clip(String(message)) } })
  } catch {
    return encodeMessage({ id: typeof id === 'number' ? id : null, ok: false, error: { code: ErrorCodes.INTERNAL, message: 'the error reply could not be encoded' } })
  }
}

export function encodePongReply (id: number, time: number): Buffer {
  return encodeMessage({ id, ok: true, pong: true, time })
}

// ---------------------------------------------------------------------------
// Replies (client side)

/**
 * Decode one reply body. The server is trusted to send well-formed replies, so
 * this checks only what the client needs to route it (`id`, `ok`); a reply
 * failing that throws E_BAD_FRAME and the client drops the connection.
 */
export function decodeReply (buf: Buffer, start: number, end: number): Reply {
  if (end <= start) throw new QuotadError(ErrorCodes.BAD_FRAME, 'empty reply body')
  let msg: Record<string, unknown>
  try {
    msg = packr.unpack(buf, { start, end })
  } catch (err) {
    throw new QuotadError(ErrorCodes.BAD_FRAME, `undecodable reply: ${(err as Error).message}`)
  }
  if (msg === null || typeof msg !== 'object' || typeof msg.ok !== 'boolean' ||
      (typeof msg.id !== 'number' && msg.id !== null)) {
    throw new QuotadError(ErrorCodes.BAD_FRAME, 'reply is not a map with id and ok')
  }
  return msg as unknown as Reply
}
