/**
 * Hand-written msgpack encoders for the messages that dominate traffic:
 * decision replies, batch replies, acquire and batch requests. Everything
 * else goes through msgpackr (messages.ts). This file exists for speed only
 * (msgpackr spends ~500 ns on a decision map, this ~100 ns): the bytes are
 * ordinary msgpack maps, decoded by msgpackr or any other library to the same
 * values, and test/frame.test.ts checks that they match.
 *
 * Each writer appends one complete frame (4-byte length + body) to an
 * OutBuffer: it reserves a safe upper bound first, writes with constant key
 * bytes and the shortest form of each number, then patches the length in.
 * Rule names are encoded once and cached (there are few rules).
 */
import type { Decision } from '../decision.js'
import type { BatchResult } from './messages.js'
import type { OutBuffer } from './out-buffer.js'

function ascii (s: string): Buffer {
  return Buffer.from(s, 'latin1')
}

const ID = ascii('\xa2id')
const OK_TRUE = ascii('\xa2ok\xc3')
const ALLOWED = ascii('\xa7allowed')
const REMAINING = ascii('\xa9remaining')
const LIMIT = ascii('\xa5limit')
const RESET = ascii('\xa7resetMs')
const RETRY = ascii('\xacretryAfterMs')
const RULE = ascii('\xa4rule')
const RESULTS = ascii('\xa7results')
const ERROR_CODE = ascii('\xa5error\x82\xa4code')
const MESSAGE = ascii('\xa7message')
const OP_ACQUIRE_KEY = ascii('\xa2op\xa7acquire\xa3key')
const OP_BATCH_ITEMS = ascii('\xa2op\xa5batch\xa5items')
const KEY = ascii('\xa3key')
const COUNT = ascii('\xa5count')
const WAIT = ascii('\xa6waitMs')

/** Bytes of a decision's six fields without the rule string: keys + 5 numbers of <= 9 bytes + bool. */
const DECISION_FIELDS_MAX = 8 + 10 + 6 + 8 + 13 + 5 + 1 + 5 * 9
/** Frame header, map header, id and ok. */
const REPLY_HEAD_MAX = 4 + 1 + 3 + 9 + 4

const EMPTY = Buffer.alloc(0)
const ruleCache = new Map<string, Buffer>()
const RULE_CACHE_MAX = 4096

function encodedRule (rule: string): Buffer {
  let b = ruleCache.get(rule)
  if (b === undefined) {
    const text = String(rule)
    b = Buffer.allocUnsafe(5 + Buffer.byteLength(text))
    b = b.subarray(0, putString(b, 0, text))
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

/** Most bytes `putString` may write for `s`. */
function stringMax (s: string): number {
  return 5 + s.length * 3
}

/** A msgpack str; the header size comes from an upper bound of the UTF-8 length. */
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

function putArrayHeader (buf: Buffer, pos: number, n: number): number {
  if (n < 16) { buf[pos] = 0x90 | n; return pos + 1 }
  if (n < 0x10000) { buf[pos] = 0xdc; buf.writeUInt16BE(n, pos + 1); return pos + 3 }
  buf[pos] = 0xdd
  buf.writeUInt32BE(n, pos + 1)
  return pos + 5
}

function putDecisionFields (buf: Buffer, p: number, d: Decision, rule: Buffer): number {
  p = put(buf, p, ALLOWED)
  buf[p++] = d.allowed ? 0xc3 : 0xc2
  p = put(buf, p, REMAINING)
  p = putNumber(buf, p, d.remaining)
  p = put(buf, p, LIMIT)
  p = putNumber(buf, p, d.limit)
  p = put(buf, p, RESET)
  p = putNumber(buf, p, d.resetMs)
  p = put(buf, p, RETRY)
  p = putNumber(buf, p, d.retryAfterMs)
  p = put(buf, p, RULE)
  return put(buf, p, rule)
}

function finishFrame (out: OutBuffer, frameStart: number, end: number): void {
  out.buf.writeUInt32BE(end - frameStart - 4, frameStart)
  out.pos = end
}

/** `{id, ok: true, allowed, remaining, limit, resetMs, retryAfterMs, rule}` */
export function writeDecisionReply (out: OutBuffer, id: number, d: Decision): void {
  const rule = encodedRule(d.rule)
  out.reserve(REPLY_HEAD_MAX + DECISION_FIELDS_MAX + rule.length)
  const buf = out.buf
  const frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x88
  p = put(buf, p, ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, OK_TRUE)
  finishFrame(out, frameStart, putDecisionFields(buf, p, d, rule))
}

/** `{id, ok: true, results: [decision map (6 fields) | {error: {code, message}}, ...]}` */
export function writeBatchReply (out: OutBuffer, id: number, results: BatchResult[]): void {
  out.reserve(REPLY_HEAD_MAX + 8 + 5)
  let buf = out.buf
  let frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x83
  p = put(buf, p, ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, OK_TRUE)
  p = put(buf, p, RESULTS)
  p = putArrayHeader(buf, p, results.length)
  for (let i = 0; i < results.length; i++) {
    const r = results[i]
    const isError = 'error' in r
    const rule = isError ? EMPTY : encodedRule(r.rule)
    const need = isError
      ? 1 + 11 + stringMax(r.error.code) + 8 + stringMax(r.error.message)
      : 1 + DECISION_FIELDS_MAX + rule.length
    if (p + need > buf.length) {
      // Grow: reserve() moves the untaken bytes, this frame's included, to a new slab.
      out.pos = p
      out.reserve(need)
      frameStart += out.pos - p
      p = out.pos
      buf = out.buf
    }
    if (isError) {
      buf[p++] = 0x81
      p = put(buf, p, ERROR_CODE)
      p = putString(buf, p, r.error.code)
      p = put(buf, p, MESSAGE)
      p = putString(buf, p, r.error.message)
    } else {
      buf[p++] = 0x86
      p = putDecisionFields(buf, p, r, rule)
    }
  }
  finishFrame(out, frameStart, p)
}

/** `{id, op: 'acquire', key, count?, waitMs?}` */
export function writeAcquireRequest (out: OutBuffer, id: number, key: string, count: number | undefined, waitMs: number | undefined): void {
  out.reserve(4 + 1 + 3 + 9 + 16 + stringMax(key) + 6 + 9 + 7 + 9)
  const buf = out.buf
  const frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x83 + (count !== undefined ? 1 : 0) + (waitMs !== undefined ? 1 : 0)
  p = put(buf, p, ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, OP_ACQUIRE_KEY)
  p = putString(buf, p, key)
  if (count !== undefined) {
    p = put(buf, p, COUNT)
    p = putNumber(buf, p, count)
  }
  if (waitMs !== undefined) {
    p = put(buf, p, WAIT)
    p = putNumber(buf, p, waitMs)
  }
  finishFrame(out, frameStart, p)
}

/**
 * `{id, op: 'batch', items: [{key, count?}, ...]}`. Returns false, writing
 * nothing, if an item is not `{key: string, count?: number}`: the caller then
 * sends the items as they are through msgpackr and the server judges them.
 */
export function writeBatchRequest (out: OutBuffer, id: number, items: ReadonlyArray<{ key: string, count?: number }>): boolean {
  let bytes = 4 + 1 + 3 + 9 + 16 + 5
  for (let i = 0; i < items.length; i++) {
    const it = items[i]
    if (it === null || typeof it !== 'object' || typeof it.key !== 'string' || (it.count !== undefined && typeof it.count !== 'number')) return false
    bytes += 1 + 4 + stringMax(it.key) + 6 + 9
  }
  out.reserve(bytes)
  const buf = out.buf
  const frameStart = out.pos
  let p = frameStart + 4
  buf[p++] = 0x83
  p = put(buf, p, ID)
  p = putNumber(buf, p, id)
  p = put(buf, p, OP_BATCH_ITEMS)
  p = putArrayHeader(buf, p, items.length)
  for (let i = 0; i < items.length; i++) {
    const it = items[i]
    buf[p++] = it.count !== undefined ? 0x82 : 0x81
    p = put(buf, p, KEY)
    p = putString(buf, p, it.key)
    if (it.count !== undefined) {
      p = put(buf, p, COUNT)
      p = putNumber(buf, p, it.count)
    }
  }
  finishFrame(out, frameStart, p)
  return true
}
