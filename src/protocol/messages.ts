/**
 * The request and reply shapes of the Unix-socket protocol, their validation
 * and their encoding. docs/protocol.md is the prose version of this file.
 *
 * Bodies are standard msgpack maps (one shared msgpackr `Packr` with
 * `useRecords: false`), so any language's msgpack library can speak it. The
 * Packr is module-wide because msgpackr keeps per-instance state and encodes
 * into a shared slab: one instance is both the fast and the correct choice.
 *
 * Requests are read by hand: fast-read.ts for the usual flat maps, and
 * strict-read.ts for everything else. msgpackr only encodes here (and decodes
 * replies on the client), because as a general decoder it accepts what the
 * protocol forbids (extension types, invalid UTF-8). Whatever a client sends,
 * `decodeRequest` throws only RequestError, with the request's id whenever
 * the id could be read.
 *
 * Hot-path notes: `decodeRequest` validates the decoded map in place and
 * returns it (no second object), and every `encode*` writes the frame header
 * into 4 bytes reserved in front of the msgpack body (`RESERVE_START_SPACE`),
 * so a reply frame costs one msgpack encode and no copy. The most frequent
 * messages (flat requests, decision and batch replies) skip msgpackr
 * altogether: see fast-read.ts and fast-write.ts, which read and write the
 * same bytes by hand.
 */
import { Packr, RESERVE_START_SPACE } from 'msgpackr'
import { ErrorCodes, QuotadError, isQuotadError, type ErrorCode } from '../errors.js'
import type { Decision } from '../core/types.js'
import type { LimitsConfig } from '../config/types.js'
import { FRAME_HEADER_BYTES } from './frame.js'
import { readRequest } from './fast-read.js'
import { INVALID_UTF8, Opaque, readRequestStrict } from './strict-read.js'
import { boundStatus } from './status-bound.js'

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
/** `id` is null when the request's id could not be read (see docs/protocol.md). */
export interface ErrorReply { id: number | null, ok: false, error: WireError }
export type Reply = DecisionReply | BatchReply | StatusReply | PongReply | ErrorReply

/** A request that failed validation. `id` is what the reply must echo (null: unreadable). */
export class RequestError extends QuotadError {
  readonly id: number | null

  constructor (code: ErrorCode, message: string, id: number | null) {
    // A client's mistake, not ours: a stack trace would say nothing, and
    // capturing one was most of the cost of answering a bad frame.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      super(code, message)
    } finally {
      Error.stackTraceLimit = limit
    }
    this.name = 'RequestError'
    this.id = id
  }
}

type Limits = Pick<LimitsConfig, 'maxKeyBytes' | 'maxBatchItems' | 'maxWaitMs'>

// ---------------------------------------------------------------------------
// Requests (server side)

/**
 * Decode and validate one request body `buf[start, end)`. Returns the decoded
 * map itself, with `count` and `waitMs` defaults filled in. Throws
 * `RequestError` with the stable code and the id to echo.
 */
export function decodeRequest (buf: Buffer, start: number, end: number, limits: Limits): Request {
  if (end <= start) throw new RequestError(ErrorCodes.BAD_FRAME, 'empty request body', null)
  // The common flat requests take the fast reader; anything else (batch, odd encodings, damage) the strict one.
  let msg = readRequest(buf, start, end) as Record<string, unknown> | undefined
  if (msg === undefined) {
    const r = readRequestStrict(buf, start, end, limits.maxBatchItems)
    if (r.code !== null) throw new RequestError(r.code, r.message, r.map === null ? null : validId(r.map.id))
    if (r.map === null) throw new RequestError(ErrorCodes.BAD_FRAME, 'request body must be a msgpack map', null)
    msg = r.map as unknown as Record<string, unknown>
  }
  const id = validId(msg.id)
  if (id === null) {
    throw new RequestError(ErrorCodes.BAD_FRAME, 'request id must be an unsigned integer < 2^32', null)
  }
  switch (msg.op) {
    case 'acquire': {
      checkKey(msg.key, limits, id)
      msg.count = checkCount(msg.count, id)
      msg.waitMs = checkWaitMs(msg.waitMs, limits, id)
      break
    }
    case 'peek':
      checkKey(msg.key, limits, id)
      msg.count = checkCount(msg.count, id)
      break
    case 'batch': {
      const items = msg.items
      if (!Array.isArray(items)) throw new RequestError(ErrorCodes.BAD_ARGUMENT, 'items must be an array', id)
      if (items.length > limits.maxBatchItems) {
        throw new RequestError(ErrorCodes.BATCH_TOO_LARGE, `batch has ${items.length} items; the limit is ${limits.maxBatchItems}`, id)
      }
      break
    }
    case 'status':
    case 'ping':
      break
    default:
      throw new RequestError(ErrorCodes.UNKNOWN_OP, `unknown op ${describe(msg.op)}; expected one of ${OPS.join(', ')}`, id)
  }
  return msg as unknown as Request
}

/** The id to echo: an integer in [0, 2^32), or null. */
function validId (id: unknown): number | null {
  return typeof id === 'number' && Number.isInteger(id) && id >= 0 && id <= MAX_REQUEST_ID ? id : null
}

/** Validate one batch item; throws `RequestError` (with the batch's id) for this item only. */
export function checkBatchItem (item: unknown, limits: Limits, id: number): BatchItem {
  if (item === null || typeof item !== 'object' || Array.isArray(item) || item instanceof Opaque) {
    throw new RequestError(ErrorCodes.BAD_ARGUMENT, 'batch item must be a map {key, count?}', id)
  }
  // Validated in place, like requests: no second object per item.
  const it = item as Record<string, unknown>
  checkKey(it.key, limits, id)
  it.count = checkCount(it.count, id)
  return it as unknown as BatchItem
}

function checkKey (key: unknown, limits: Limits, id: number): void {
  // Decoding invalid UTF-8 would give U+FFFD, and different keys would share one counter.
  if (key === INVALID_UTF8) throw new RequestError(ErrorCodes.BAD_KEY, 'key is not valid UTF-8', id)
  if (typeof key !== 'string') throw new RequestError(ErrorCodes.BAD_ARGUMENT, 'key must be a string', id)
  if (key.length === 0) throw new RequestError(ErrorCodes.BAD_ARGUMENT, 'key must not be empty', id)
  // A UTF-16 code unit is at most 3 UTF-8 bytes, and at least 1: count bytes only when it matters.
  if (key.length * 3 <= limits.maxKeyBytes) return
  const bytes = key.length > limits.maxKeyBytes ? key.length : Buffer.byteLength(key, 'utf8')
  if (bytes > limits.maxKeyBytes) {
    throw new RequestError(ErrorCodes.KEY_TOO_LONG, `key is longer than ${limits.maxKeyBytes} UTF-8 bytes`, id)
  }
}

function checkCount (count: unknown, id: number): number {
  if (count === undefined || count === null) return 1
  if (typeof count === 'number' && Number.isSafeInteger(count) && count > 0) return count
  throw new RequestError(ErrorCodes.BAD_ARGUMENT, `count must be a positive integer, got ${describe(count)}`, id)
}

function checkWaitMs (waitMs: unknown, limits: Limits, id: number): number {
  if (waitMs === undefined || waitMs === null) return 0
  if (typeof waitMs === 'number' && waitMs >= 0 && waitMs <= limits.maxWaitMs) return waitMs
  throw new RequestError(ErrorCodes.BAD_ARGUMENT, `waitMs must be a number in [0, ${limits.maxWaitMs}], got ${describe(waitMs)}`, id)
}

/** A short, safe description of a value from a request, for error messages. */
function describe (v: unknown): string {
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (typeof v === 'string') return JSON.stringify(v.slice(0, 32))
  if (v instanceof Opaque) return v.what
  if (v === null) return 'nil'
  return Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'a map' : typeof v
}

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

/** The status reply, bounded to STATUS_MAX_BYTES (status-bound.ts): long lists and strings are cut, and `truncated` says so. */
export function encodeStatusReply (id: number, status: Record<string, unknown>): Buffer {
  return boundStatus(status, s => encodeMessage({ id, ok: true, status: s }))
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
