/**
 * Codec tests: framing with split and joined chunks, the size bound, and the
 * hand-written fast paths agreeing byte for byte with msgpackr.
 */
import test from 'ava'
import {
  encodeFrame, FrameDecoder, type FrameHandler, decodeReply, encodeDecisionReply, encodeMessage, packr, OutBuffer, writeAcquireRequest, writeBatchReply, writeBatchRequest, writeDecisionReply, readBatchReply, readDecisionReply, readRequest
} from '@quotad/client/wire'
import { decodeRequest, RequestError } from '../src/protocol/requests.js'
import { DEFAULT_LIMITS } from '../src/config/types.js'
import { ErrorCodes } from '../src/errors.js'

class Collect implements FrameHandler {
  frames: Buffer[] = []
  tooLarge: number[] = []
  onFrame (buf: Buffer, start: number, end: number): void {
    // Copy: a chunk's bytes are only valid during the call.
    this.frames.push(Buffer.from(buf.subarray(start, end)))
  }

  onFrameTooLarge (length: number): void {
    this.tooLarge.push(length)
  }
}

function bodies (n: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => packr.pack({ i, pad: 'x'.repeat(i % 37) }))
}

test('encodeFrame writes a big-endian length prefix', t => {
  const f = encodeFrame(Buffer.from([1, 2, 3]))
  t.deepEqual([...f], [0, 0, 0, 3, 1, 2, 3])
})

test('many frames in one chunk', t => {
  const bs = bodies(200)
  const c = new Collect()
  new FrameDecoder(c, 1024).push(Buffer.concat(bs.map(encodeFrame)))
  t.deepEqual(c.frames, bs)
})

test('byte by byte', t => {
  const bs = bodies(30)
  const all = Buffer.concat(bs.map(encodeFrame))
  const c = new Collect()
  const d = new FrameDecoder(c, 1024)
  for (let i = 0; i < all.length; i++) d.push(all.subarray(i, i + 1))
  t.deepEqual(c.frames, bs)
  t.is(d.bufferedBytes, 0)
})

test('random splits and joins', t => {
  const bs = bodies(500)
  const all = Buffer.concat(bs.map(encodeFrame))
  for (let round = 0; round < 20; round++) {
    const c = new Collect()
    const d = new FrameDecoder(c, 1024)
    let off = 0
    while (off < all.length) {
      const n = 1 + Math.floor(Math.random() * (Math.random() < 0.5 ? 8 : 400))
      d.push(all.subarray(off, off + n))
      off += n
    }
    t.deepEqual(c.frames, bs)
  }
})

test('a frame split exactly after its header, and empty chunks', t => {
  const body = packr.pack({ a: 1 })
  const f = encodeFrame(body)
  const c = new Collect()
  const d = new FrameDecoder(c, 1024)
  d.push(f.subarray(0, 4))
  d.push(Buffer.alloc(0))
  d.push(f.subarray(4))
  t.deepEqual(c.frames, [body])
})

test('a zero-length frame is delivered as an empty body', t => {
  const c = new Collect()
  new FrameDecoder(c, 1024).push(Buffer.from([0, 0, 0, 0, 0, 0, 0, 1, 0xc0]))
  t.deepEqual(c.frames.map(f => f.length), [0, 1])
})

test('a declared length above maxFrameBytes stops the decoder without buffering', t => {
  const c = new Collect()
  const d = new FrameDecoder(c, 100)
  const ok = encodeFrame(Buffer.alloc(100, 1))
  const header = Buffer.alloc(4)
  header.writeUInt32BE(101)
  d.push(Buffer.concat([ok, header, Buffer.alloc(50)]))
  t.is(c.frames.length, 1)
  t.deepEqual(c.tooLarge, [101])
  t.true(d.isStopped)
  t.is(d.bufferedBytes, 0)
  d.push(ok)
  t.is(c.frames.length, 1, 'nothing is decoded after the stream went bad')
})

test('a huge declared length split over chunks is refused at the header', t => {
  const c = new Collect()
  const d = new FrameDecoder(c, 1024 * 1024)
  d.push(Buffer.from([0xff, 0xff]))
  d.push(Buffer.from([0xff, 0xff]))
  t.deepEqual(c.tooLarge, [0xffffffff])
  t.is(d.bufferedBytes, 0)
})

test('memory follows received bytes, not the declared length', t => {
  const c = new Collect()
  const d = new FrameDecoder(c, 1024 * 1024)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(1024 * 1024)
  d.push(Buffer.concat([header, Buffer.alloc(10)]))
  t.is(d.bufferedBytes, 10)
})

test('encodeMessage frames msgpack without a copy and msgpackr reads it back', t => {
  const f = encodeMessage({ id: 7, op: 'ping' })
  t.is(f.readUInt32BE(0), f.length - 4)
  t.deepEqual(packr.unpack(f.subarray(4)), { id: 7, op: 'ping' })
})

const decision = { allowed: false, remaining: 0, limit: 100, resetMs: 123.5, retryAfterMs: -1, rule: 'päyments' }

test('the hand-written decision reply is the map msgpackr writes', t => {
  const numbers = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, -1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53) + 1, 0.5, 1e300, -2.25]
  const out = new OutBuffer()
  for (const n of numbers) {
    const d = { ...decision, remaining: n, limit: n, resetMs: n, retryAfterMs: n, allowed: n > 0, rule: 'r'.repeat(Math.abs(n) % 300) }
    const id = Math.abs(Math.trunc(n)) % 2 ** 32
    writeDecisionReply(out, id, d)
    const fast = out.take()
    const slow = encodeDecisionReply(id, d)
    t.is(fast.readUInt32BE(0), fast.length - 4)
    t.deepEqual(packr.unpack(fast.subarray(4)), packr.unpack(slow.subarray(4)))
    t.deepEqual(readDecisionReply(fast, 4, fast.length), { id, decision: d })
    t.deepEqual(readDecisionReply(slow, 4, slow.length), { id, decision: d }, 'msgpackr bytes take the fast path too')
  }
})

test('readDecisionReply declines anything but a decision reply', t => {
  for (const v of [{ id: 1, ok: true, pong: true, time: 5 }, { id: 1, ok: false, error: { code: 'E_X', message: 'm' } },
    { ...decision, id: 1, ok: true, extra: 1 }, { ...decision, id: 1, ok: false }, { ...decision, id: 'x', ok: true },
    { ...decision, id: 1, ok: true, rule: 5 }, { ...decision, id: 1, ok: true, allowed: 1 }]) {
    const f = encodeMessage(v)
    t.is(readDecisionReply(f, 4, f.length), undefined, JSON.stringify(v))
  }
  const f = encodeDecisionReply(3, decision)
  for (let cut = 5; cut < f.length; cut++) t.is(readDecisionReply(f, 4, cut), undefined)
})

test('the hand-written acquire request decodes like msgpackr and takes the fast reader', t => {
  const out = new OutBuffer()
  for (const [key, count, waitMs] of [['k', undefined, undefined], ['ключ'.repeat(20), 3, undefined], ['x'.repeat(300), undefined, 250.5], ['a', 2 ** 40, 0]] as const) {
    writeAcquireRequest(out, 4_000_000_000, key, count, waitMs)
    const f = out.take()
    const expected: Record<string, unknown> = { id: 4_000_000_000, op: 'acquire', key }
    if (count !== undefined) expected.count = count
    if (waitMs !== undefined) expected.waitMs = waitMs
    t.deepEqual(packr.unpack(f.subarray(4)), expected)
    t.truthy(readRequest(f, 4, f.length))
  }
})

test('readRequest agrees with msgpackr on flat requests and declines the rest', t => {
  const flat = [{ id: 1, op: 'acquire', key: 'a', count: 2, waitMs: 10 }, { op: 'ping', id: 0 }, { id: 5, op: 'peek', key: 'k', count: null },
    { id: 2, op: 'status' }, { id: 1, op: 'acquire', key: 'k', count: -5 }, { id: 1.5, op: 'ping' }]
  for (const v of flat) {
    const f = encodeMessage(v)
    const r = readRequest(f, 4, f.length)
    t.truthy(r, JSON.stringify(v))
    t.deepEqual({ ...r }, Object.assign({ id: undefined, op: undefined, key: undefined, count: undefined, waitMs: undefined, items: undefined }, v))
  }
  // Unknown ops, batches and anything unusual go to msgpackr, which reports the precise error.
  for (const v of [{ id: 1, op: 'nope' }, { id: 1, op: 'batch', items: [{ key: 'a', x: 1 }] }, { id: 1, op: 'ping', other: 1 }, [1, 2], 5, { id: 1, op: 'acquire', key: ['a'] }, {}]) {
    const f = encodeMessage(v)
    t.is(readRequest(f, 4, f.length), undefined, JSON.stringify(v))
  }
})

test('decodeRequest: codes for every kind of bad input', t => {
  const limits = { ...DEFAULT_LIMITS, maxKeyBytes: 8, maxBatchItems: 2, maxWaitMs: 100 }
  const code = (b: Buffer): [string, number | null] => {
    try {
      decodeRequest(b, 0, b.length, limits)
      return ['ok', null]
    } catch (err) {
      return [(err as RequestError).code, (err as RequestError).id]
    }
  }
  const m = (v: unknown): Buffer => packr.pack(v)
  t.deepEqual(code(Buffer.from([0xc1])), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(Buffer.from([0x92, 0x01])), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m([1, 2])), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m('hello')), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m({ op: 'ping' })), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m({ id: -1, op: 'ping' })), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m({ id: 2 ** 32, op: 'ping' })), [ErrorCodes.BAD_FRAME, null])
  t.deepEqual(code(m({ id: 9, op: 'fly' })), [ErrorCodes.UNKNOWN_OP, 9])
  t.deepEqual(code(m({ id: 9 })), [ErrorCodes.UNKNOWN_OP, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: '' })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 5 })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'k', count: 0 })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'k', count: 1.5 })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'k', count: '2' })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'k', waitMs: -1 })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'k', waitMs: 101 })), [ErrorCodes.BAD_ARGUMENT, 9])
  t.deepEqual(code(m({ id: 9, op: 'peek', key: 'k', waitMs: 101 })), ['ok', null], 'peek ignores waitMs')
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: '123456789' })), [ErrorCodes.KEY_TOO_LONG, 9])
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'ééééé' })), [ErrorCodes.KEY_TOO_LONG, 9], '10 UTF-8 bytes')
  t.deepEqual(code(m({ id: 9, op: 'acquire', key: 'éééé' })), ['ok', null], '8 UTF-8 bytes')
  t.deepEqual(code(m({ id: 9, op: 'batch', items: [{ key: 'a' }, { key: 'b' }, { key: 'c' }] })), [ErrorCodes.BATCH_TOO_LARGE, 9])
  t.deepEqual(code(m({ id: 9, op: 'batch', items: 'x' })), [ErrorCodes.BAD_ARGUMENT, 9])
  const r = decodeRequest(m({ id: 3, op: 'acquire', key: 'k' }), 0, m({ id: 3, op: 'acquire', key: 'k' }).length, limits)
  t.like(r, { id: 3, op: 'acquire', key: 'k', count: 1, waitMs: 0 })
})

test('decodeReply accepts error replies with a null id', t => {
  const f = encodeMessage({ id: null, ok: false, error: { code: 'E_BAD_FRAME', message: 'x' } })
  t.like(decodeReply(f, 4, f.length), { id: null, ok: false })
  t.throws(() => decodeReply(Buffer.from([0x01]), 0, 1), { code: ErrorCodes.BAD_FRAME })
})

test('batch replies: hand-written bytes match msgpackr, with error items and slab growth', t => {
  const out = new OutBuffer()
  writeDecisionReply(out, 1, decision) // leave untaken bytes in front, so growth has to move them
  const results = Array.from({ length: 700 }, (_, i) => i % 7 === 3
    ? { error: { code: 'E_BAD_ARGUMENT', message: 'ключ '.repeat(i % 50) } }
    : { ...decision, remaining: i, rule: `rule-${i % 5}` })
  writeBatchReply(out, 77, results)
  const all = out.take()
  const first = all.readUInt32BE(0) + 4
  const f = all.subarray(first)
  t.is(f.readUInt32BE(0), f.length - 4)
  t.deepEqual(packr.unpack(f.subarray(4)), { id: 77, ok: true, results })
  t.is(readBatchReply(f, 4, f.length), undefined, 'error items take msgpackr')
  const clean = results.filter(r => !('error' in r))
  writeBatchReply(out, 78, clean)
  const g = out.take()
  t.deepEqual(readBatchReply(g, 4, g.length), { id: 78, results: clean })
  for (let cut = 5; cut < 200; cut++) t.is(readBatchReply(g, 4, cut), undefined)
})

test('batch requests: hand-written bytes match msgpackr and the fast reader', t => {
  const out = new OutBuffer()
  const items = [{ key: 'a' }, { key: 'b', count: 3 }, { key: 'é'.repeat(40), count: 2 ** 40 }]
  t.true(writeBatchRequest(out, 5, items))
  const f = out.take()
  t.deepEqual(packr.unpack(f.subarray(4)), { id: 5, op: 'batch', items })
  const r = readRequest(f, 4, f.length)
  t.is(r?.op, 'batch')
  t.deepEqual(r?.items?.map(i => ({ ...i })), items.map(i => ({ key: i.key, count: i.count })))
  t.false(writeBatchRequest(out, 6, [{ key: 'a' }, { key: 5 } as unknown as { key: string }]))
  t.is(out.length, 0, 'nothing written for a batch the fast writer declines')
  const lying = Buffer.from([0x83, 0xa2, 0x69, 0x64, 0x01, 0xa2, 0x6f, 0x70, 0xa5, ...Buffer.from('batch'), 0xa5, ...Buffer.from('items'), 0xdd, 0xff, 0xff, 0xff, 0xff])
  t.is(readRequest(lying, 0, lying.length), undefined, 'a lying array header allocates nothing')
})

test('pause() from onFrame holds the rest of the chunk, and later chunks, until resume()', t => {
  const bs = bodies(50)
  const all = Buffer.concat(bs.map(encodeFrame))
  const got: Buffer[] = []
  let budget = 7
  const d: FrameDecoder = new FrameDecoder({
    onFrame: (b, s, e) => {
      got.push(Buffer.from(b.subarray(s, e)))
      if (--budget === 0) d.pause()
    },
    onFrameTooLarge: () => t.fail()
  }, 1024)
  // Two chunks, the second starting mid-frame.
  const cut = Math.floor(all.length / 3)
  d.push(all.subarray(0, cut))
  t.is(got.length, 7)
  t.true(d.isPaused)
  t.is(d.pendingBytes, cut - Buffer.concat(bs.slice(0, 7).map(encodeFrame)).length)
  d.push(all.subarray(cut))
  t.is(got.length, 7, 'nothing is delivered while paused')
  t.is(d.pendingBytes + Buffer.concat(bs.slice(0, 7).map(encodeFrame)).length, all.length)
  while (d.isPaused) {
    budget = 7
    d.resume()
  }
  t.deepEqual(got, bs, 'every frame, once, in order')
  t.is(d.bufferedBytes, 0)
})

test('stop() drops held input', t => {
  const c = new Collect()
  const d = new FrameDecoder(c, 1024)
  d.pause()
  d.push(encodeFrame(Buffer.from([0xc0])))
  t.is(d.pendingBytes, 5)
  d.stop()
  t.is(d.bufferedBytes, 0)
  d.resume()
  t.is(c.frames.length, 0)
})
