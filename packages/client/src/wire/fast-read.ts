/**
 * Hand-written msgpack readers for the messages that dominate traffic, the
 * mirror of fast-write.ts: the server's flat requests (acquire, peek,
 * status, ping, and batch of flat items) and the client's decision and batch
 * replies.
 *
 * Every reader is strict and total: it accepts exactly the expected map (keys
 * in any order, any msgpack width for numbers) and returns undefined for
 * anything else, malformed or merely unusual; the caller then decodes with
 * msgpackr, which also produces the precise error. So a reader never has to
 * be complete to be correct. Reads never pass `end` (checked before every
 * multi-byte read) and keep their cursor in the module-level `rp`, which keeps
 * the helpers allocation-free. Strings that repeat (rule names, hot keys) come
 * from a small cache instead of a fresh UTF-8 decode.
 */
import { isUtf8 } from 'node:buffer'
import type { Decision } from '../decision.js'

let rp = 0

function ascii (s: string): Buffer {
  return Buffer.from(s, 'latin1')
}

const N_ID = ascii('id')
const N_OK = ascii('ok')
const N_OP = ascii('op')
const N_KEY = ascii('key')
const N_COUNT = ascii('count')
const N_WAIT = ascii('waitMs')
const N_ITEMS = ascii('items')
const N_ALLOWED = ascii('allowed')
const N_RESET = ascii('resetMs')
const N_RULE = ascii('rule')
const N_LIMIT = ascii('limit')
const N_REMAINING = ascii('remaining')
const N_RETRY = ascii('retryAfterMs')
const N_RESULTS = ascii('results')
const OP_NAMES = ['acquire', 'peek', 'status', 'ping', 'batch'].map(op => [ascii(op), op] as const)

function same (buf: Buffer, pos: number, name: Buffer): boolean {
  for (let i = 0; i < name.length; i++) if (buf[pos + i] !== name[i]) return false
  return true
}

/** Bytes (with the type byte) of 0xca float32 .. 0xd3 int64. */
const NUMBER_SIZES = [5, 9, 2, 3, 5, 9, 2, 3, 5, 9]

/** Any msgpack number at `rp` that ends by `end`; NaN for anything else. */
function readNumber (buf: Buffer, end: number): number {
  if (rp >= end) return NaN
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

/** A fixstr, str8 or str16 at `rp`, or undefined (also for invalid UTF-8: strict-read.ts names that). */
function readString (buf: Buffer, end: number): string | undefined {
  if (rp >= end) return undefined
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

/** The length of an array header at `rp` (advancing past it), or -1. */
function readArrayHeader (buf: Buffer, end: number): number {
  if (rp >= end) return -1
  const b = buf[rp]
  if ((b & 0xf0) === 0x90) { rp += 1; return b & 0x0f }
  if (b === 0xdc && rp + 3 <= end) { rp += 3; return buf.readUInt16BE(rp - 2) }
  if (b === 0xdd && rp + 5 <= end) { rp += 5; return buf.readUInt32BE(rp - 4) }
  return -1
}

/** A fixmap key at `rp`: returns its length and leaves `rp` after it (key bytes at rp - len), or -1. */
function readKey (buf: Buffer, end: number): number {
  if (rp >= end) return -1
  const k = buf[rp]
  if ((k & 0xe0) !== 0xa0) return -1
  const len = k & 0x1f
  if (rp + 1 + len >= end) return -1
  rp += 1 + len
  return len
}

/*
 * Decoded strings, direct-mapped by an FNV-1a hash of their bytes, a hit confirmed by
 * comparing every byte: skips the UTF-8 decode and the allocation.
 */
const STRING_SLOTS = 4096
const CACHE_MAX_BYTES = 64
const slotBytes: Array<Buffer | undefined> = new Array(STRING_SLOTS)
const slotStrings: string[] = new Array(STRING_SLOTS)

function cachedString (buf: Buffer, from: number, to: number): string | undefined {
  const len = to - from
  if (len === 0) return ''
  if (len > CACHE_MAX_BYTES) return validUtf8(buf, from, to) ? buf.toString('utf8', from, to) : undefined
  // FNV-1a over every byte: keys like `bench:123` differ only in a few bytes.
  let h = 0x811c9dc5
  for (let i = from; i < to; i++) h = Math.imul(h ^ buf[i], 0x01000193)
  const slot = (h >>> 0) & (STRING_SLOTS - 1)
  const known = slotBytes[slot]
  if (known !== undefined && known.length === len) {
    let i = 0
    while (i < len && known[i] === buf[from + i]) i++
    if (i === len) return slotStrings[slot] // cached bytes were checked when they went in
  }
  if (!validUtf8(buf, from, to)) return undefined
  const str = buf.toString('utf8', from, to)
  slotBytes[slot] = Buffer.from(buf.subarray(from, to))
  slotStrings[slot] = str
  return str
}

/**
 * Whether `buf[from, to)` is valid UTF-8. Decoding invalid bytes would give
 * U+FFFD, and `k:\xff` and `k:\xfe` would become one key. ASCII, the usual
 * case, is checked inline; the rest natively.
 */
function validUtf8 (buf: Buffer, from: number, to: number): boolean {
  let i = from
  while (i < to && buf[i] < 0x80) i++
  return i === to || isUtf8(buf.subarray(i, to))
}

// ---------------------------------------------------------------------------
// Replies (client side)

let decisionId = NaN
let decisionOk = false

/**
 * `n` entries of a decision map at `rp`. With `withIdOk`, `id` and `ok: true`
 * must be among them (left in decisionId / decisionOk).
 */
function readDecisionEntries (buf: Buffer, end: number, n: number, withIdOk: boolean): Decision | undefined {
  let allowed = -1
  let remaining = NaN
  let limit = NaN
  let resetMs = NaN
  let retryAfterMs = NaN
  let rule: string | undefined
  decisionId = NaN
  decisionOk = false
  for (let i = 0; i < n; i++) {
    const klen = readKey(buf, end)
    if (klen < 0) return undefined
    const kpos = rp - klen
    switch (klen) {
      case 2:
        if (!withIdOk) return undefined
        if (same(buf, kpos, N_ID)) decisionId = readNumber(buf, end)
        else if (same(buf, kpos, N_OK) && buf[rp] === 0xc3) { rp++; decisionOk = true } else return undefined
        break
      case 4:
        if (!same(buf, kpos, N_RULE)) return undefined
        rule = readString(buf, end)
        break
      case 5:
        if (!same(buf, kpos, N_LIMIT)) return undefined
        limit = readNumber(buf, end)
        break
      case 7:
        if (same(buf, kpos, N_ALLOWED) && (buf[rp] === 0xc2 || buf[rp] === 0xc3)) allowed = buf[rp++] - 0xc2
        else if (same(buf, kpos, N_RESET)) resetMs = readNumber(buf, end)
        else return undefined
        break
      case 9:
        if (!same(buf, kpos, N_REMAINING)) return undefined
        remaining = readNumber(buf, end)
        break
      case 12:
        if (!same(buf, kpos, N_RETRY)) return undefined
        retryAfterMs = readNumber(buf, end)
        break
      default:
        return undefined
    }
  }
  if (allowed < 0 || rule === undefined || Number.isNaN(remaining + limit + resetMs + retryAfterMs)) return undefined
  if (withIdOk && (!decisionOk || Number.isNaN(decisionId))) return undefined
  return { allowed: allowed === 1, remaining, limit, resetMs, retryAfterMs, rule }
}

export interface FastDecisionReply {
  id: number
  decision: Decision
}

/** `{id, ok: true, <decision>}` exactly, or undefined. */
export function readDecisionReply (buf: Buffer, start: number, end: number): FastDecisionReply | undefined {
  if (end - start < 60 || buf[start] !== 0x88) return undefined
  rp = start + 1
  const decision = readDecisionEntries(buf, end, 8, true)
  if (decision === undefined || rp !== end) return undefined
  return { id: decisionId, decision }
}

export interface FastBatchReply {
  id: number
  results: Decision[]
}

/** `{id, ok: true, results: [<decision>, ...]}` with no error items, or undefined. */
export function readBatchReply (buf: Buffer, start: number, end: number): FastBatchReply | undefined {
  if (buf[start] !== 0x83) return undefined
  rp = start + 1
  let id = NaN
  let ok = false
  let results: Decision[] | undefined
  for (let i = 0; i < 3; i++) {
    const klen = readKey(buf, end)
    if (klen < 0) return undefined
    const kpos = rp - klen
    if (klen === 2 && same(buf, kpos, N_ID)) {
      id = readNumber(buf, end)
    } else if (klen === 2 && same(buf, kpos, N_OK) && buf[rp] === 0xc3) {
      rp++
      ok = true
    } else if (klen === 7 && same(buf, kpos, N_RESULTS)) {
      const n = readArrayHeader(buf, end)
      // Each item takes at least 60 bytes: a lying header cannot make us allocate.
      if (n < 0 || n * 60 > end - rp) return undefined
      results = new Array<Decision>(n)
      for (let j = 0; j < n; j++) {
        if (buf[rp++] !== 0x86) return undefined
        const d = readDecisionEntries(buf, end, 6, false)
        if (d === undefined) return undefined
        results[j] = d
      }
    } else {
      return undefined
    }
  }
  if (!ok || results === undefined || Number.isNaN(id) || rp !== end) return undefined
  return { id, results }
}

// ---------------------------------------------------------------------------
// Requests (server side)

/** A batch item read by `readRequest`. */
export class FlatItem {
  key: unknown = undefined
  count: unknown = undefined
}

/** A request map read by `readRequest`. Fields keep msgpack's types; messages.ts validates them. */
export class FlatRequest {
  id: unknown = undefined
  op: unknown = undefined
  key: unknown = undefined
  count: unknown = undefined
  waitMs: unknown = undefined
  items: FlatItem[] | undefined = undefined
}

/** A number, a string or nil at `rp`; `undefined` for anything else. Numbers failing to read give undefined too. */
function readScalar (buf: Buffer, end: number): unknown {
  const b = buf[rp]
  if (b === 0xc0) {
    rp++
    return null
  }
  if ((b & 0xe0) === 0xa0 || b === 0xd9 || b === 0xda) return readString(buf, end)
  const v = readNumber(buf, end)
  return Number.isNaN(v) ? undefined : v
}

function readOp (buf: Buffer, end: number): string | undefined {
  if (rp >= end) return undefined
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

function readItems (buf: Buffer, end: number): FlatItem[] | undefined {
  const n = readArrayHeader(buf, end)
  // An item takes at least 6 bytes: a lying header cannot make us allocate.
  if (n < 0 || n * 6 > end - rp) return undefined
  const items = new Array<FlatItem>(n)
  for (let j = 0; j < n; j++) {
    const m = buf[rp++]
    if (m !== 0x81 && m !== 0x82) return undefined
    const it = new FlatItem()
    for (let i = m & 0x0f; i > 0; i--) {
      const klen = readKey(buf, end)
      const kpos = rp - klen
      const v = readScalar(buf, end)
      if (v === undefined) return undefined
      if (klen === 3 && same(buf, kpos, N_KEY)) it.key = v
      else if (klen === 5 && same(buf, kpos, N_COUNT)) it.count = v
      else return undefined
    }
    items[j] = it
  }
  return items
}

/**
 * A request that is a flat map of `id`, `op`, `key`, `count`, `waitMs`,
 * `items` (an array of `{key, count?}`) holding numbers, strings or nil:
 * every request our client sends. Undefined for anything else.
 */
export function readRequest (buf: Buffer, start: number, end: number): FlatRequest | undefined {
  const m = buf[start]
  if (m < 0x81 || m > 0x86) return undefined
  const req = new FlatRequest()
  rp = start + 1
  for (let i = m & 0x0f; i > 0; i--) {
    const klen = readKey(buf, end)
    if (klen < 0) return undefined
    const kpos = rp - klen
    if (klen === 2 && same(buf, kpos, N_OP)) {
      req.op = readOp(buf, end)
      if (req.op === undefined) return undefined
      continue
    }
    if (klen === 5 && same(buf, kpos, N_ITEMS)) {
      req.items = readItems(buf, end)
      if (req.items === undefined) return undefined
      continue
    }
    const v = readScalar(buf, end)
    if (v === undefined) return undefined
    if (klen === 2 && same(buf, kpos, N_ID)) req.id = v
    else if (klen === 3 && same(buf, kpos, N_KEY)) req.key = v
    else if (klen === 5 && same(buf, kpos, N_COUNT)) req.count = v
    else if (klen === 6 && same(buf, kpos, N_WAIT)) req.waitMs = v
    else return undefined
  }
  return rp === end ? req : undefined
}
