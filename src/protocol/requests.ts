/**
 * Request validation, the daemon's side of the protocol (the shapes and the
 * encoding are shared with the client, in @quotad/client/wire).
 *
 * Requests are read by hand: fast-read.ts for the usual flat maps, and
 * strict-read.ts for everything else. msgpackr never decodes a request,
 * because as a general decoder it accepts what the protocol forbids
 * (extension types, invalid UTF-8). Whatever a client sends, `decodeRequest`
 * throws only RequestError, with the request's id whenever the id could be
 * read. It validates the decoded map in place and returns it (no second
 * object).
 */
import {
  MAX_REQUEST_ID, OPS, encodeMessage, readRequest, type BatchItem, type Request
} from '@quotad/client/wire'
import { ErrorCodes, QuotadError, type ErrorCode } from '../errors.js'
import type { LimitsConfig } from '../config/types.js'
import { INVALID_UTF8, Opaque, readRequestStrict } from './strict-read.js'
import { boundStatus } from './status-bound.js'

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

/** The status reply, bounded to STATUS_MAX_BYTES (status-bound.ts): long lists and strings are cut, and `truncated` says so. */
export function encodeStatusReply (id: number, status: Record<string, unknown>): Buffer {
  return boundStatus(status, s => encodeMessage({ id, ok: true, status: s }))
}

