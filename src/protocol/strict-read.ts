/**
 * The strict msgpack reader for request bodies that the fast path
 * (fast-read.ts) declines: batches with unusual items, wide encodings, and
 * everything malformed or hostile. It replaces msgpackr for requests because
 * msgpackr is a general decoder: it turns extension types into BigInts,
 * Dates, errors or `undefined` (a `count` sent as ext type 0 read as absent),
 * and invalid UTF-8 into U+FFFD (so `k:\xff` and `k:\xfe` were one key).
 * The protocol allows none of that, and a request must never reach the
 * service with a value it did not mean.
 *
 * What it returns for a body:
 * - `map`: the top-level map, as far as it was read (a failure half way still
 *   leaves the fields before it, so the reply can carry the request's `id`);
 *   null when the body is not a map.
 * - `code`/`message`: the first problem, or null. Structural damage
 *   (truncation, byte 0xc1, trailing bytes, lying lengths, nesting deeper
 *   than MAX_DEPTH) is E_BAD_FRAME and stops the read. Extension types
 *   (E_UNSUPPORTED_TYPE) and non-string map keys (E_BAD_FRAME) are noted and
 *   the read goes on, so a later `id` is still found.
 *
 * Values: nil, booleans, numbers (64-bit integers as the nearest double, never
 * a BigInt), strings (invalid UTF-8 as the INVALID_UTF8 marker). The request
 * and its batch items are read into fixed-shape objects with only the fields
 * the protocol knows (so a `__proto__` field is just an unknown field); any
 * other map or array, binary data and extension values are checked and
 * become Opaque markers, which no field accepts. Nothing is built for fields
 * a request does not use, and a lying array or map header is caught before
 * anything is allocated for it.
 */
import { isUtf8 } from 'node:buffer'
import { ErrorCodes, type ErrorCode } from '../errors.js'

/** A value no request field accepts; `what` names it in error messages. */
export class Opaque {
  constructor (readonly what: string) {}
}

/** A msgpack string whose bytes are not valid UTF-8. */
export const INVALID_UTF8 = new Opaque('a string that is not valid UTF-8')
const BINARY = new Opaque('binary data')
const EXTENSION = new Opaque('a msgpack extension type')
/** Maps and arrays are only ever valid as the request, `items` and its entries: anywhere else they are checked, not built. */
const ARRAY = new Opaque('an array')
const MAP = new Opaque('a map')

/** Deepest nesting read; requests need 3 (map, items array, item map). */
export const MAX_DEPTH = 32

/** The request map, as read. Fields keep msgpack's types; messages.ts validates them. */
export class StrictRequest {
  id: unknown = undefined
  op: unknown = undefined
  key: unknown = undefined
  count: unknown = undefined
  waitMs: unknown = undefined
  items: unknown = undefined
}

/** A batch item map, as read. */
export class StrictItem {
  key: unknown = undefined
  count: unknown = undefined
}

export interface StrictResult {
  /** The request's fields read before any damage; null when the body is not a map. */
  map: StrictRequest | null
  code: ErrorCode | null
  message: string
}

/** Structural damage: nothing after it can be read. Thrown without a stack (not an Error: no capture cost). */
class Malformed {
  constructor (readonly message: string) {}
}

// The cursor and the first problem, module-wide like fast-read.ts: no allocation per value.
let src: Buffer = Buffer.alloc(0)
let pos = 0
let lim = 0
let maxItems = 0
let code: ErrorCode | null = null
let message = ''

function note (c: ErrorCode, m: string): void {
  if (code === null) {
    code = c
    message = m
  }
}

/** Read one request body `buf[start, end)`; `batchLimit` bounds what is built for `items`. */
export function readRequestStrict (buf: Buffer, start: number, end: number, batchLimit: number): StrictResult {
  src = buf
  pos = start
  lim = end
  maxItems = batchLimit
  code = null
  message = ''
  let map: StrictRequest | null = null
  try {
    if (pos >= lim) throw new Malformed('empty request body')
    const n = mapHeader()
    if (n < 0) {
      value(0, false) // still a well-formed value? Its own damage is the better message.
      note(ErrorCodes.BAD_FRAME, 'request body must be a msgpack map')
    } else {
      map = new StrictRequest()
      readRequestEntries(map, n)
    }
    if (pos !== lim) throw new Malformed(`${lim - pos} bytes after the msgpack value`)
  } catch (err) {
    if (!(err instanceof Malformed)) throw err
    code = ErrorCodes.BAD_FRAME
    message = `malformed msgpack: ${err.message}`
  }
  const result = { map, code, message }
  src = EMPTY // do not keep a socket chunk alive
  return result
}

const EMPTY = Buffer.alloc(0)

function need (n: number): void {
  if (n > lim - pos) throw new Malformed('truncated')
}

function u8 (): number {
  need(1)
  return src[pos++]
}

function u16 (): number {
  need(2)
  pos += 2
  return src.readUInt16BE(pos - 2)
}

function u32 (): number {
  need(4)
  pos += 4
  return src.readUInt32BE(pos - 4)
}

/** The entry count of a map header at `pos` (moving past it), or -1 (not moving) for anything else. */
function mapHeader (): number {
  need(1)
  const b = src[pos]
  if (b >= 0x80 && b <= 0x8f) { pos++; return b & 0x0f }
  if (b === 0xde) { pos++; return u16() }
  if (b === 0xdf) { pos++; return u32() }
  return -1
}

/** Every entry takes at least 2 bytes: a lying header is refused before its loop. */
function checkEntries (n: number): void {
  if (n > (lim - pos) / 2) throw new Malformed(`a map header declares ${n} entries in ${lim - pos} bytes`)
}

function readRequestEntries (req: StrictRequest, n: number): void {
  checkEntries(n)
  for (let i = 0; i < n; i++) {
    switch (mapKey(1, true)) {
      case 'id': req.id = value(1, true); break
      case 'op': req.op = value(1, true); break
      case 'key': req.key = value(1, true); break
      case 'count': req.count = value(1, true); break
      case 'waitMs': req.waitMs = value(1, true); break
      case 'items': req.items = items(1); break
      default: value(1, false) // unknown fields (an invalid UTF-8 name cannot be a known one) are checked, not kept
    }
  }
}

function readItemEntries (item: StrictItem, n: number, depth: number): void {
  checkEntries(n)
  for (let i = 0; i < n; i++) {
    switch (mapKey(depth + 1, true)) {
      case 'key': item.key = value(depth + 1, true); break
      case 'count': item.count = value(depth + 1, true); break
      default: value(depth + 1, false)
    }
  }
}

/** Map entries that are checked and skipped. */
function skipEntries (n: number, depth: number): void {
  checkEntries(n)
  for (let i = 0; i < n; i++) {
    mapKey(depth + 1, false)
    value(depth + 1, false)
  }
}

/** A map key: its string (undefined when not kept), INVALID_UTF8, or NOT_A_STRING after noting it. */
function mapKey (depth: number, keep: boolean): string | Opaque | undefined {
  need(1)
  const b = src[pos]
  if ((b & 0xe0) === 0xa0) { pos++; return str(b & 0x1f, keep) }
  if (b === 0xd9) { pos++; return str(u8(), keep) }
  if (b === 0xda) { pos++; return str(u16(), keep) }
  if (b === 0xdb) { pos++; return str(u32(), keep) }
  note(ErrorCodes.BAD_FRAME, 'map keys must be strings')
  value(depth, false)
  return NOT_A_STRING
}

const NOT_A_STRING = new Opaque('a map key that is not a string')

/** The `items` field: an array of item maps, or any value (then validation refuses it). */
function items (depth: number): unknown {
  need(1)
  const b = src[pos]
  let n: number
  if ((b & 0xf0) === 0x90) { pos++; n = b & 0x0f } else if (b === 0xdc) { pos++; n = u16() } else if (b === 0xdd) { pos++; n = u32() } else return value(depth, true)
  if (n > lim - pos) throw new Malformed(`an array header declares ${n} entries in ${lim - pos} bytes`)
  if (n > maxItems) {
    // Too many: the request fails whole (E_BATCH_TOO_LARGE), so build nothing,
    // but read on for the damage and the fields after it.
    for (let i = 0; i < n; i++) value(depth + 1, false)
    const tooMany: unknown[] = []
    tooMany.length = n
    return tooMany
  }
  const out = new Array<unknown>(n)
  for (let i = 0; i < n; i++) {
    const len = mapHeader()
    if (len < 0) {
      out[i] = value(depth + 1, true) // not a map: that item alone fails
    } else {
      const item = new StrictItem()
      readItemEntries(item, len, depth + 1)
      out[i] = item
    }
  }
  return out
}

function array (n: number, depth: number): Opaque {
  if (depth >= MAX_DEPTH) throw new Malformed(`nested deeper than ${MAX_DEPTH}`)
  // Every element takes at least 1 byte.
  if (n > lim - pos) throw new Malformed(`an array header declares ${n} entries in ${lim - pos} bytes`)
  for (let i = 0; i < n; i++) value(depth + 1, false)
  return ARRAY
}

function map (n: number, depth: number): Opaque {
  if (depth >= MAX_DEPTH) throw new Malformed(`nested deeper than ${MAX_DEPTH}`)
  skipEntries(n, depth)
  return MAP
}

function str (len: number, keep: boolean): string | Opaque | undefined {
  need(len)
  pos += len
  if (!keep) return undefined
  const from = pos - len
  if (!isAscii(from, pos) && !isUtf8(src.subarray(from, pos))) return INVALID_UTF8
  return src.toString('utf8', from, pos)
}

function isAscii (from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (src[i] >= 0x80) return false
  return true
}

function bin (len: number): Opaque {
  need(len)
  pos += len
  return BINARY
}

function ext (len: number): Opaque {
  need(1 + len)
  const type = src.readInt8(pos)
  pos += 1 + len
  note(ErrorCodes.UNSUPPORTED_TYPE, `msgpack extension type ${type} is not allowed in a request`)
  return EXTENSION
}

/** 64-bit integers as the nearest double: exact up to 2^53, which is all any field accepts. */
function u64 (): number {
  need(8)
  pos += 8
  return src.readUInt32BE(pos - 8) * 0x1_0000_0000 + src.readUInt32BE(pos - 4)
}

function i64 (): number {
  need(8)
  pos += 8
  return src.readInt32BE(pos - 8) * 0x1_0000_0000 + src.readUInt32BE(pos - 4)
}

/** One value at `pos`. With `keep` false it is only checked and skipped (unknown fields). */
function value (depth: number, keep: boolean): unknown {
  const b = u8()
  if (b <= 0x7f) return b
  if (b >= 0xe0) return b - 0x100
  if (b <= 0x8f) return map(b & 0x0f, depth)
  if (b <= 0x9f) return array(b & 0x0f, depth)
  if (b <= 0xbf) return str(b & 0x1f, keep)
  switch (b) {
    case 0xc0: return null
    case 0xc1: throw new Malformed('byte 0xc1 is never used')
    case 0xc2: return false
    case 0xc3: return true
    case 0xc4: return bin(u8())
    case 0xc5: return bin(u16())
    case 0xc6: return bin(u32())
    case 0xc7: return ext(u8())
    case 0xc8: return ext(u16())
    case 0xc9: return ext(u32())
    case 0xca: need(4); pos += 4; return src.readFloatBE(pos - 4)
    case 0xcb: need(8); pos += 8; return src.readDoubleBE(pos - 8)
    case 0xcc: return u8()
    case 0xcd: return u16()
    case 0xce: return u32()
    case 0xcf: return u64()
    case 0xd0: need(1); pos += 1; return src.readInt8(pos - 1)
    case 0xd1: need(2); pos += 2; return src.readInt16BE(pos - 2)
    case 0xd2: need(4); pos += 4; return src.readInt32BE(pos - 4)
    case 0xd3: return i64()
    case 0xd4: return ext(1)
    case 0xd5: return ext(2)
    case 0xd6: return ext(4)
    case 0xd7: return ext(8)
    case 0xd8: return ext(16)
    case 0xd9: return str(u8(), keep)
    case 0xda: return str(u16(), keep)
    case 0xdb: return str(u32(), keep)
    case 0xdc: return array(u16(), depth)
    case 0xdd: return array(u32(), depth)
    case 0xde: return map(u16(), depth)
    default: return map(u32(), depth) // 0xdf, the last type byte
  }
}
