/**
 * Hand-written msgpack for the one message that dominates traffic: the
 * decision reply `{id, ok, allowed, remaining, limit, resetMs, retryAfterMs,
 * rule}`. Everything else goes through msgpackr (messages.ts). This file
 * exists for speed only: the bytes are ordinary msgpack, the same map msgpackr
 * would decode, so a client in another language sees no difference.
 *
 * - `OutBuffer` is a per-connection slab writer. Replies are encoded straight
 *   into the slab; `take()` hands out the bytes written since the last take as
 *   one Buffer view for one socket.write. Handed-out bytes are never written
 *   again (the socket may still hold them), so when the slab runs out a fresh
 *   one is allocated rather than recycled, as msgpackr does with its own.
 * - `writeDecisionReply` writes the frame header and the map with constant
 *   key bytes and the shortest msgpack form of each number. Rule names are
 *   encoded once and cached (there are few rules).
 * - `readDecisionReply` is the client's mirror: it parses exactly that map
 *   (keys in any order) and returns undefined for anything else, in which case
 *   the caller falls back to msgpackr. So it can be strict without being
 *   fragile.
 */
import type { Decision } from '../core/types.js'

const SLAB_BYTES = 16 * 1024

export class OutBuffer {
  buf: Buffer = Buffer.allocUnsafe(SLAB_BYTES)
  /** First byte not yet handed out. */
  private start = 0
  pos = 0

  get length (): number {
    return this.pos - this.start
  }

  /** Make room for `n` more bytes, keeping the not-yet-taken bytes contiguous. */
  reserve (n: number): void {
    if (this.pos + n <= this.buf.length) return
    const pendingBytes = this.pos - this.start
    const next = Buffer.allocUnsafe(Math.max(SLAB_BYTES, 2 * (pendingBytes + n)))
    this.buf.copy(next, 0, this.start, this.pos)
    this.buf = next
    this.start = 0
    this.pos = pendingBytes
  }

  append (bytes: Uint8Array): void {
    this.reserve(bytes.length)
    this.buf.set(bytes, this.pos)
    this.pos += bytes.length
  }

  /** The bytes written since the last take, as a view the caller may keep. */
  take (): Buffer {
    const out = this.buf.subarray(this.start, this.pos)
    this.start = this.pos
    return out
  }
}

const KEY_ID = ascii('\xa2id')
const KEY_OK_TRUE_ALLOWED = ascii('\xa2ok\xc3\xa7allowed')
const KEY_REMAINING = ascii('\xa9remaining')
const KEY_LIMIT = ascii('\xa5limit')
const KEY_RESET = ascii('\xa7resetMs')
const KEY_RETRY = ascii('\xacretryAfterMs')
const KEY_RULE = ascii('\xa4rule')
/** Upper bound of a decision reply without its rule string: header, keys and 5 numbers of 9 bytes. */
const FIXED_MAX = 4 + 1 + 3 + 5 + 11 + 10 + 6 + 8 + 13 + 5 + 5 * 9

const ruleCache = new Map<string, Buffer>()
const RULE_CACHE_MAX = 4096

function ascii (s: string): Buffer {
  return Buffer.from(s, 'latin1')
}

function encodedRule (rule: string): Buffer {
  let b = ruleCache.get(rule)
  if (b === undefined) {
    const bytes = Buffer.from(rule, 'utf8')
    const n = bytes.length
    const head = n < 32 ? [0xa0 | n] : n < 256 ? [0xd9, n] : n < 65536 ? [0xda, n >> 8, n & 0xff] : [0xdb, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]
    b = Buffer.concat([Buffer.from(head), bytes])
    if (ruleCache.size >= RULE_CACHE_MAX) ruleCache.clear()
    ruleCache.set(rule, b)
  }
  return b
}

function put (buf: Buffer, pos: number, bytes: Buffer): number {
  for (let i = 0; i < bytes.length; i++) buf[pos + i] = bytes[i]
  return pos + bytes.length
}

/** The shortest msgpack encoding of a number. Returns the new position. */
function putNumber (buf: Buffer, pos: number, v: number): number {
  if (Number.isInteger(v)) {
    if (v >= 0) {
      if (v < 0x80) { buf[pos] = v; return pos + 1 }
      if (v < 0x100) { buf[pos] = 0xcc; buf[pos + 1] = v; return pos + 2 }
      if (v < 0x10000) { buf[pos] = 0xcd; buf.writeUInt16BE(v, pos + 1); return pos + 3 }
      if (v <= 0xffffffff) { buf[pos] = 0xce; buf.writeUInt32BE(v, pos + 1); return pos + 5 }
      if (Number.isSafeInteger(v)) { buf[pos] = 0xcf; buf.writeBigUInt64BE(BigInt(v), pos + 1); return pos + 9 }
    } else {
      if (v >= -32) { buf[pos] = v & 0xff; return pos + 1 }
      if (v >= -0x80) { buf[pos] = 0xd0; buf.writeInt8(v, pos + 1); return pos + 2 }
      if (v >= -0x8000) { buf[pos] = 0xd1; buf.writeInt16BE(v, pos + 1); return pos + 3 }
      if (v >= -0x80000000) { buf[pos] = 0xd2; buf.writeInt32BE(v, pos + 1); return pos + 5 }
      if (Number.isSafeInteger(v)) { buf[pos] = 0xd3; buf.writeBigInt64BE(BigInt(v), pos + 1); return pos + 9 }
    }
  }
  buf[pos] = 0xcb
  buf.writeDoubleBE(v, pos + 1)
  return pos + 9
}

/** Append one complete decision-reply frame (header + body) to `out`. */
export function writeDecisionReply (out: OutBuffer, id: number, d: Decision): void {
  const rule = encodedRule(d.rule)
  out.reserve(FIXED_MAX + rule.length)
  const buf = out.buf
  const frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x88
  p = put(buf, p, KEY_ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, KEY_OK_TRUE_ALLOWED)
  buf[p++] = d.allowed ? 0xc3 : 0xc2
  p = put(buf, p, KEY_REMAINING)
  p = putNumber(buf, p, d.remaining)
  p = put(buf, p, KEY_LIMIT)
  p = putNumber(buf, p, d.limit)
  p = put(buf, p, KEY_RESET)
  p = putNumber(buf, p, d.resetMs)
  p = put(buf, p, KEY_RETRY)
  p = putNumber(buf, p, d.retryAfterMs)
  p = put(buf, p, KEY_RULE)
  p = put(buf, p, rule)
  buf.writeUInt32BE(p - frameStart - 4, frameStart)
  out.pos = p
}

// ---------------------------------------------------------------------------
// Client side

/** A decision reply as the client needs it: the Decision plus the id to route it. */
export interface FastDecisionReply {
  id: number
  decision: Decision
}

let rp = 0 // read position, module-level so the helpers below stay allocation-free

const NAME_ID = ascii('id')
const NAME_OK = ascii('ok')
const NAME_ALLOWED = ascii('allowed')
const NAME_RESET = ascii('resetMs')
const NAME_RULE = ascii('rule')
const NAME_LIMIT = ascii('limit')
const NAME_REMAINING = ascii('remaining')
const NAME_RETRY = ascii('retryAfterMs')

/**
 * Parse `buf[start, end)` if it is exactly a successful decision reply;
 * otherwise return undefined (the caller then decodes it with msgpackr).
 */
export function readDecisionReply (buf: Buffer, start: number, end: number): FastDecisionReply | undefined {
  if (end - start < 60 || buf[start] !== 0x88) return undefined
  rp = start + 1
  let id = NaN
  let ok = false
  let allowed = -1
  let remaining = NaN
  let limit = NaN
  let resetMs = NaN
  let retryAfterMs = NaN
  let rule: string | undefined
  for (let i = 0; i < 8; i++) {
    // Keys are fixstr: dispatch on their length, then check every byte.
    const k = buf[rp]
    if (k < 0xa2 || k > 0xac) return undefined
    const klen = k & 0x1f
    const kpos = rp + 1
    rp = kpos + klen
    if (rp >= end) return undefined
    switch (klen) {
      case 2:
        if (same(buf, kpos, NAME_ID)) id = readNumber(buf, end)
        else if (same(buf, kpos, NAME_OK) && buf[rp] === 0xc3) { rp++; ok = true } else return undefined
        break
      case 4:
        if (!same(buf, kpos, NAME_RULE)) return undefined
        rule = readString(buf, end)
        break
      case 5:
        if (!same(buf, kpos, NAME_LIMIT)) return undefined
        limit = readNumber(buf, end)
        break
      case 7:
        if (same(buf, kpos, NAME_ALLOWED) && (buf[rp] === 0xc2 || buf[rp] === 0xc3)) allowed = buf[rp++] - 0xc2
        else if (same(buf, kpos, NAME_RESET)) resetMs = readNumber(buf, end)
        else return undefined
        break
      case 9:
        if (!same(buf, kpos, NAME_REMAINING)) return undefined
        remaining = readNumber(buf, end)
        break
      case 12:
        if (!same(buf, kpos, NAME_RETRY)) return undefined
        retryAfterMs = readNumber(buf, end)
        break
      default:
        return undefined
    }
  }
  if (rp !== end || !ok || allowed < 0 || rule === undefined || Number.isNaN(id + remaining + limit + resetMs + retryAfterMs)) {
    return undefined
  }
  return { id, decision: { allowed: allowed === 1, remaining, limit, resetMs, retryAfterMs, rule } }
}

function same (buf: Buffer, pos: number, name: Buffer): boolean {
  for (let i = 0; i < name.length; i++) if (buf[pos + i] !== name[i]) return false
  return true
}

/** Any msgpack number at `rp` that ends by `end`; NaN for anything else (which fails the parse). */
function readNumber (buf: Buffer, end: number): number {
  const b = buf[rp]
  if (b < 0x80) { rp += 1; return b }
  if (b >= 0xe0) { rp += 1; return b - 0x100 }
  const size = b >= 0xca && b <= 0xd3 ? NUMBER_SIZES[b - 0xca] : 0
  if (size === 0 || rp + size > end) return NaN
  rp += size
  const at = rp - size + 1
  switch (b) {
    case 0xca: return buf.readFloatBE(at)
    case 0xcb: return buf.readDoubleBE(at)
    case 0xcc: return buf[at]
    case 0xcd: return buf.readUInt16BE(at)
    case 0xce: return buf.readUInt32BE(at)
    case 0xcf: return Number(buf.readBigUInt64BE(at))
    case 0xd0: return buf.readInt8(at)
    case 0xd1: return buf.readInt16BE(at)
    case 0xd2: return buf.readInt32BE(at)
    default: return Number(buf.readBigInt64BE(at))
  }
}
/** Bytes (with the type byte) of 0xca float32 .. 0xd3 int64. */
const NUMBER_SIZES = [5, 9, 2, 3, 5, 9, 2, 3, 5, 9]

function readString (buf: Buffer, end: number): string | undefined {
  const b = buf[rp]
  let len: number
  if ((b & 0xe0) === 0xa0) {
    len = b & 0x1f
    rp += 1
  } else if (b === 0xd9 && rp + 2 <= end) {
    len = buf[rp + 1]
    rp += 2
  } else if (b === 0xda && rp + 3 <= end) {
    len = buf.readUInt16BE(rp + 1)
    rp += 3
  } else {
    return undefined
  }
  if (rp + len > end) return undefined
  rp += len
  return cachedString(buf, rp - len, rp)
}

/*
 * Rule names repeat in every reply, so decoded ones are kept in a small
 * direct-mapped cache (slot chosen by length and two bytes, hit confirmed by
 * comparing every byte). A hit skips the UTF-8 decode and the string allocation.
 */
const STRING_SLOTS = 64
const slotBytes: Array<Buffer | undefined> = new Array(STRING_SLOTS)
const slotStrings: string[] = new Array(STRING_SLOTS)

function cachedString (buf: Buffer, from: number, to: number): string {
  const len = to - from
  if (len === 0) return ''
  const slot = (len * 31 + buf[from] * 7 + buf[to - 1]) & (STRING_SLOTS - 1)
  const known = slotBytes[slot]
  if (known !== undefined && known.length === len) {
    let i = 0
    while (i < len && known[i] === buf[from + i]) i++
    if (i === len) return slotStrings[slot]
  }
  const str = buf.toString('utf8', from, to)
  if (len <= 64) {
    slotBytes[slot] = Buffer.from(buf.subarray(from, to))
    slotStrings[slot] = str
  }
  return str
}

// ---------------------------------------------------------------------------
// Requests: the client's acquire encoder and the server's flat-map reader

const OP_ACQUIRE = ascii('\xa2op\xa7acquire\xa3key')
const KEY_COUNT = ascii('\xa5count')
const KEY_WAIT = ascii('\xa6waitMs')

/** Append an acquire request frame `{id, op:'acquire', key, count?, waitMs?}` to `out`. */
export function writeAcquireRequest (out: OutBuffer, id: number, key: string, count: number | undefined, waitMs: number | undefined): void {
  // Worst case: 3 bytes of UTF-8 per UTF-16 unit, a 5-byte str header, two 9-byte numbers.
  out.reserve(64 + key.length * 3)
  const buf = out.buf
  const frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x83 + (count !== undefined ? 1 : 0) + (waitMs !== undefined ? 1 : 0)
  p = put(buf, p, KEY_ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, OP_ACQUIRE)
  p = putString(buf, p, key)
  if (count !== undefined) {
    p = put(buf, p, KEY_COUNT)
    p = putNumber(buf, p, count)
  }
  if (waitMs !== undefined) {
    p = put(buf, p, KEY_WAIT)
    p = putNumber(buf, p, waitMs)
  }
  buf.writeUInt32BE(p - frameStart - 4, frameStart)
  out.pos = p
}

/** Write a msgpack str; the header size is chosen from an upper bound of the UTF-8 length. */
function putString (buf: Buffer, pos: number, s: string): number {
  const max = s.length * 3
  const hdr = max < 32 ? 1 : max < 256 ? 2 : max < 65536 ? 3 : 5
  const n = buf.write(s, pos + hdr, 'utf8')
  if (hdr === 1) {
    buf[pos] = 0xa0 | n
  } else if (hdr === 2) {
    buf[pos] = 0xd9
    buf[pos + 1] = n
  } else if (hdr === 3) {
    buf[pos] = 0xda
    buf.writeUInt16BE(n, pos + 1)
  } else {
    buf[pos] = 0xdb
    buf.writeUInt32BE(n, pos + 1)
  }
  return pos + hdr + n
}

/** A request map read by `readRequest`. Fields keep msgpack's types; messages.ts validates them. */
export class FlatRequest {
  id: unknown = undefined
  op: unknown = undefined
  key: unknown = undefined
  count: unknown = undefined
  waitMs: unknown = undefined
}

const NAME_OP = ascii('op')
const NAME_KEY = ascii('key')
const NAME_COUNT = ascii('count')
const NAME_WAIT = ascii('waitMs')
const OP_NAMES = ['acquire', 'peek', 'status', 'ping'].map(op => [ascii(op), op] as const)

/**
 * Read a request that is a flat map of `id`, `op`, `key`, `count`, `waitMs`
 * holding numbers, strings or nil (every acquire, peek, status and ping a
 * client sends). Returns undefined for anything else (a batch, another key, a
 * nested value, a malformed body): the caller then decodes with msgpackr,
 * which also produces the precise error.
 */
export function readRequest (buf: Buffer, start: number, end: number): FlatRequest | undefined {
  const m = buf[start]
  if (m < 0x81 || m > 0x85) return undefined
  const req = new FlatRequest()
  rp = start + 1
  for (let i = m & 0x0f; i > 0; i--) {
    if (rp >= end) return undefined
    const k = buf[rp]
    if (k < 0xa2 || k > 0xa6 || rp + 1 + (k & 0x1f) >= end) return undefined
    const kpos = rp + 1
    const klen = k & 0x1f
    rp = kpos + klen
    let value: unknown
    const b = buf[rp]
    if (b === 0xc0) {
      rp++
      value = null
    } else if ((b & 0xe0) === 0xa0 || b === 0xd9 || b === 0xda) {
      if (klen === 2 && same(buf, kpos, NAME_OP)) {
        value = readOp(buf, end)
        if (value === undefined) return undefined
      } else {
        value = readString(buf, end)
        if (value === undefined) return undefined
      }
    } else {
      value = readNumber(buf, end)
      if (Number.isNaN(value)) return undefined
    }
    if (klen === 2 && same(buf, kpos, NAME_ID)) req.id = value
    else if (klen === 2 && same(buf, kpos, NAME_OP)) req.op = value
    else if (klen === 3 && same(buf, kpos, NAME_KEY)) req.key = value
    else if (klen === 5 && same(buf, kpos, NAME_COUNT)) req.count = value
    else if (klen === 6 && same(buf, kpos, NAME_WAIT)) req.waitMs = value
    else return undefined
  }
  return rp === end ? req : undefined
}

/** A known op name as its interned string, or undefined (fall back to msgpackr). */
function readOp (buf: Buffer, end: number): string | undefined {
  const b = buf[rp]
  if ((b & 0xe0) !== 0xa0) return undefined
  const len = b & 0x1f
  if (rp + 1 + len > end) return undefined
  for (const [bytes, op] of OP_NAMES) {
    if (bytes.length === len && same(buf, rp + 1, bytes)) {
      rp += 1 + len
      return op
    }
  }
  return undefined
}
