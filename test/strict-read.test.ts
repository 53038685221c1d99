/**
 * Request decoding of everything the fast reader declines: extension types,
 * invalid UTF-8, 64-bit integers, damage after the id, lying lengths, deep
 * nesting. Every outcome is a RequestError with a stable code, and with the
 * request's id whenever the id could be read.
 */
import test from 'ava'
import { encodeErrorReply, toWireError, type BatchRequest } from '@quotad/client/wire'
import { decodeRequest, RequestError, checkBatchItem } from '../src/protocol/requests.js'
import { readRequestStrict, MAX_DEPTH } from '../src/protocol/strict-read.js'
import { DEFAULT_LIMITS } from '../src/config/types.js'
import { ErrorCodes } from '../src/errors.js'
import { fuzzFrames } from './helpers/fuzz-frames.js'

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex')
const str = (s: string | Buffer): string => {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s)
  if (b.length >= 32) throw new Error('fixstr only')
  return (0xa0 | b.length).toString(16) + b.toString('hex')
}

function outcome (body: Buffer, limits = DEFAULT_LIMITS): [string, number | null] {
  try {
    const r = decodeRequest(body, 0, body.length, limits)
    return ['ok', r.id]
  } catch (err) {
    if (!(err instanceof RequestError)) throw err
    return [err.code, err.id]
  }
}

test('the frame from the issue: op as msgpackr\'s BigInt extension gets E_UNSUPPORTED_TYPE with its id', t => {
  const frame = hex('00 00 00 0b 82 a2 69 64 01 a2 6f 70 d4 42 01')
  t.deepEqual(outcome(frame.subarray(4)), [ErrorCodes.UNSUPPORTED_TYPE, 1])
})

test('an extension type anywhere is refused, also where msgpackr read it as absent', t => {
  const acquire = '84 a2 6964 07 a2 6f70 a7 61637175697265 a3 6b6579 a1 6b'
  t.deepEqual(outcome(hex(`${acquire} a5 636f756e74 d4 00 05`)), [ErrorCodes.UNSUPPORTED_TYPE, 7], 'count as ext type 0')
  t.deepEqual(outcome(hex(`${acquire} a5 636f756e74 d6 ff 00000001`)), [ErrorCodes.UNSUPPORTED_TYPE, 7], 'count as a timestamp')
  t.deepEqual(outcome(hex(`${acquire} a5 6f74686572 c7 03 01 aabbcc`)), [ErrorCodes.UNSUPPORTED_TYPE, 7], 'in an unknown field')
  t.deepEqual(outcome(hex('82 a2 6f70 d4 42 01 a2 6964 cd 0102')), [ErrorCodes.UNSUPPORTED_TYPE, 0x102], 'the id after the extension is still found')
  t.deepEqual(outcome(hex('82 a2 6964 d4 00 01 a2 6f70 a4 70696e67')), [ErrorCodes.UNSUPPORTED_TYPE, null], 'the id itself an extension: no id')
})

test('keys that are not valid UTF-8 get E_BAD_KEY with the id; they no longer share a counter', t => {
  for (const bad of [[0x6b, 0x3a, 0xff], [0x6b, 0x3a, 0xfe], [0x6b, 0x3a, 0xc0], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
    const key = str(Buffer.from(bad))
    // fixmap: takes the fast reader first
    t.deepEqual(outcome(hex(`83 a2 6964 09 a2 6f70 a7 61637175697265 a3 6b6579 ${key}`)), [ErrorCodes.BAD_KEY, 9], Buffer.from(bad).toString('hex'))
    // map16: the strict reader
    t.deepEqual(outcome(hex(`de 0003 a2 6964 09 a2 6f70 a4 7065656b a3 6b6579 ${key}`)), [ErrorCodes.BAD_KEY, 9])
  }
  // Valid multi-byte UTF-8 still works, on both readers.
  t.deepEqual(outcome(hex(`83 a2 6964 09 a2 6f70 a7 61637175697265 a3 6b6579 ${str('k:é🔑')}`)), ['ok', 9])
  t.deepEqual(outcome(hex(`de 0003 a2 6964 09 a2 6f70 a7 61637175697265 a3 6b6579 ${str('k:é🔑')}`)), ['ok', 9])
})

test('a batch item with an invalid UTF-8 key fails alone with E_BAD_KEY', t => {
  const body = hex(`83 a2 6964 05 a2 6f70 a5 6261746368 a5 6974656d73 92 81 a3 6b6579 a1 61 81 a3 6b6579 ${str(Buffer.from([0x6b, 0xff]))}`)
  const req = decodeRequest(body, 0, body.length, DEFAULT_LIMITS) as BatchRequest
  t.like(checkBatchItem(req.items[0], DEFAULT_LIMITS, 5), { key: 'a', count: 1 })
  t.throws(() => checkBatchItem(req.items[1], DEFAULT_LIMITS, 5), { code: ErrorCodes.BAD_KEY })
})

test('64-bit integers are plain numbers: a uint64 or int64 id works, nothing becomes a BigInt', t => {
  t.deepEqual(outcome(hex('82 a2 6964 cf 0000000000000001 a2 6f70 a4 70696e67')), ['ok', 1])
  t.deepEqual(outcome(hex('82 a2 6964 d3 00000000ffffffff a2 6f70 a4 70696e67')), ['ok', 0xffffffff])
  t.deepEqual(outcome(hex('82 a2 6964 d3 ffffffffffffffff a2 6f70 a4 70696e67')), [ErrorCodes.BAD_FRAME, null], 'id -1')
  t.deepEqual(outcome(hex('84 a2 6964 03 a2 6f70 a4 7065656b a3 6b6579 a1 6b a1 78 de 0000')), ['ok', 3], 'an empty map16 as an unknown value: skipped')
  const huge = hex('84 a2 6964 04 a2 6f70 a7 61637175697265 a3 6b6579 a1 6b a5 636f756e74 cf ffffffffffffffff')
  t.deepEqual(outcome(huge), [ErrorCodes.BAD_ARGUMENT, 4], 'count 2^64-1 is not a safe integer')
})

test('damage after the id keeps the id; damage before it cannot', t => {
  const head = '83 a2 6964 0b a2 6f70 a4 70696e67'
  t.deepEqual(outcome(hex(`${head} a3 6b6579 d9 ff 41`)), [ErrorCodes.BAD_FRAME, 11], 'truncated string')
  t.deepEqual(outcome(hex(`${head} a3 6b6579 c1`)), [ErrorCodes.BAD_FRAME, 11], 'byte 0xc1')
  t.deepEqual(outcome(hex('82 a2 6964 0b a2 6f70 a4 70696e67 c0')), [ErrorCodes.BAD_FRAME, 11], 'trailing bytes')
  t.deepEqual(outcome(hex(`${head} 05 06`)), [ErrorCodes.BAD_FRAME, 11], 'a non-string map key')
  t.deepEqual(outcome(hex('83 a3 6b6579 c1 a2 6964 0b a2 6f70 a4 70696e67')), [ErrorCodes.BAD_FRAME, null], 'damage before the id')
  t.deepEqual(outcome(hex(`${head} a5 6974656d73 dd ffffffff`)), [ErrorCodes.BAD_FRAME, 11], 'a lying array header')
  t.deepEqual(outcome(hex(`${head} a1 78 df ffffffff`)), [ErrorCodes.BAD_FRAME, 11], 'a lying map header')
})

test('nesting deeper than MAX_DEPTH is refused without recursing further', t => {
  const deep = Buffer.concat([hex('82 a2 6964 0c a1 78'), Buffer.alloc(100_000, 0x91), Buffer.from([0xc0])])
  // The map is 2 entries but "op" never comes: what matters is no stack overflow and the id.
  t.deepEqual(outcome(deep), [ErrorCodes.BAD_FRAME, 12])
  const r = readRequestStrict(deep, 0, deep.length, 1000)
  t.regex(r.message, new RegExp(`deeper than ${MAX_DEPTH}`))
})

test('more batch items than maxBatchItems: E_BATCH_TOO_LARGE without building them', t => {
  const n = 5000
  const items = Buffer.concat([hex('dc'), Buffer.from([n >> 8, n & 0xff]), Buffer.alloc(n, 0x80)])
  const body = Buffer.concat([hex('83 a2 6964 0d a2 6f70 a5 6261746368 a5 6974656d73'), items])
  t.deepEqual(outcome(body), [ErrorCodes.BATCH_TOO_LARGE, 13])
})

test('a __proto__ field is an unknown field, not a prototype', t => {
  const body = hex(`de 0004 a2 6964 0e a2 6f70 a7 61637175697265 a3 6b6579 a1 6b a9 ${Buffer.from('__proto__').toString('hex')} 81 a5 636f756e74 63`)
  const r = decodeRequest(body, 0, body.length, DEFAULT_LIMITS)
  t.like(r, { id: 14, op: 'acquire', key: 'k', count: 1 })
})

test('toWireError and encodeErrorReply never throw, and messages stay short', t => {
  const evil = { toString () { throw new Error('no') } }
  t.like(toWireError(evil), { code: ErrorCodes.INTERNAL })
  t.like(toWireError(Object.create(null)), { code: ErrorCodes.INTERNAL })
  const f = encodeErrorReply(3, 'E_X', 'm'.repeat(100_000))
  t.true(f.length < 2000)
})

test('50,000 fuzzed bodies: only RequestErrors, and every readable id is echoed', t => {
  let ok = 0
  const internal: string[] = []
  const wrongId: string[] = []
  for (const f of fuzzFrames(20240611, 50_000)) {
    const [code, id] = outcome(f.frame.subarray(4))
    if (code === 'ok') ok++
    if (code === ErrorCodes.INTERNAL) internal.push(f.frame.toString('hex'))
    if (f.id !== undefined && id !== f.id) wrongId.push(`${f.frame.toString('hex')}: id ${String(id)}, expected ${String(f.id)} (${code})`)
  }
  t.deepEqual(internal, [])
  t.deepEqual(wrongId, [])
  t.true(ok > 1000, 'the generator also makes valid requests')
})
