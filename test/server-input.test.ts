/**
 * Hostile request bodies over a real Unix socket: extension types and keys
 * that are not valid UTF-8 are refused with their own codes and the request's
 * id, spend nothing, and leave the connection usable.
 */
import test from 'ava'
import { ErrorCodes } from '../src/errors.js'
import { frameOf, Raw, startServer } from './helpers/socket-server.js'

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex')

test('the frame from the issue gets E_UNSUPPORTED_TYPE with id 1, not E_INTERNAL with id null', async t => {
  const { path, server } = await startServer(t)
  const c = await Raw.open(path)
  c.send(hex('00 00 00 0b 82 a2 69 64 01 a2 6f 70 d4 42 01'))
  const [r] = await c.waitFor(1)
  t.like(r, { id: 1, ok: false, error: { code: ErrorCodes.UNSUPPORTED_TYPE } })
  t.is(server.stats().internalErrors, 0)
  t.like(await c.request({ id: 2, op: 'ping' }), { id: 2, ok: true })
  c.destroy()
})

test('count as extension type 0 is refused and spends nothing', async t => {
  const { path, service } = await startServer(t)
  const c = await Raw.open(path)
  c.send(frameOf(hex('84 a2 6964 03 a2 6f70 a7 61637175697265 a3 6b6579 a1 6b a5 636f756e74 d4 00 05')))
  const [r] = await c.waitFor(1)
  t.like(r, { id: 3, ok: false, error: { code: ErrorCodes.UNSUPPORTED_TYPE } })
  t.is(service.used.size, 0)
  c.destroy()
})

test('k:\\xff, k:\\xfe and k:\\xc0 are refused with E_BAD_KEY instead of sharing one counter', async t => {
  const { path, service } = await startServer(t)
  const c = await Raw.open(path)
  const frames = [0xff, 0xfe, 0xc0].map((b, i) => frameOf(hex(`83 a2 6964 ${(10 + i).toString(16).padStart(2, '0')} a2 6f70 a7 61637175697265 a3 6b6579 a4 6b 3a 21 ${b.toString(16)}`)))
  c.send(...frames)
  const replies = await c.waitFor(3)
  t.deepEqual(replies.map(r => [r.id, r.ok ? 'ok' : r.error.code]), [[10, ErrorCodes.BAD_KEY], [11, ErrorCodes.BAD_KEY], [12, ErrorCodes.BAD_KEY]])
  t.is(service.used.size, 0, 'no bucket was touched')
  // A valid non-ASCII key is still a key of its own.
  t.like(await c.request({ id: 13, op: 'acquire', key: 'k:!ÿ' }), { id: 13, ok: true, remaining: 9 })
  t.like(await c.request({ id: 14, op: 'acquire', key: 'k:!þ' }), { id: 14, ok: true, remaining: 9 })
  c.destroy()
})

test('every reply carries the id when the frame had a readable one', async t => {
  const { path } = await startServer(t)
  const c = await Raw.open(path)
  const cases: Array<[string, string, number | null]> = [
    ['83 a2 6964 15 a2 6f70 a4 70696e67 a3 6b6579 d9 ff 41', ErrorCodes.BAD_FRAME, 0x15], // truncated after the id
    ['82 a2 6964 16 a2 6f70 a4 70696e67 c0', ErrorCodes.BAD_FRAME, 0x16], // trailing bytes
    ['83 a2 6964 17 a2 6f70 a4 70696e67 05 06', ErrorCodes.BAD_FRAME, 0x17], // a non-string key
    ['82 a2 6964 cf 0000000000000018 a2 6f70 a4 70696e67', 'ok', 0x18], // a uint64 id
    ['82 a2 6f70 a4 70696e67 a2 6964 d6 ff 00000001', ErrorCodes.UNSUPPORTED_TYPE, null], // the id is a timestamp
    ['c1', ErrorCodes.BAD_FRAME, null]
  ]
  c.send(...cases.map(([body]) => frameOf(hex(body))))
  const replies = await c.waitFor(cases.length)
  t.deepEqual(replies.map(r => [r.ok ? 'ok' : r.error.code, r.id]), cases.map(([, code, id]) => [code, id]))
  c.destroy()
})
