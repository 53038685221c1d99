/**
 * The Unix-socket server over real sockets in a temp dir, against a fake
 * QuotaService: pipelining, out-of-order replies, every bad input and its
 * code, disconnects mid-frame and mid-wait, limits, the socket file's rules.
 */
import test from 'ava'
import diagnosticsChannel from 'node:diagnostics_channel'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { UnixServer } from '../src/server/unix-server.js'
import { encodeMessage, packr } from '@quotad/client/wire'
import { DEFAULT_LIMITS } from '../src/config/types.js'
import { ErrorCodes } from '../src/errors.js'
import { errCode, FakeService, frameOf, Raw, startServer, tmpDir, tmpSocket, until } from './helpers/socket-server.js'

test('acquire, peek, status and ping', async t => {
  const { path: p } = await startServer(t)
  const c = await Raw.open(p)
  t.like(await c.request({ id: 1, op: 'acquire', key: 'a', count: 3 }), { id: 1, ok: true, allowed: true, remaining: 7, limit: 10, rule: 'fake' })
  t.like(await c.request({ id: 2, op: 'peek', key: 'a', count: 8 }), { id: 2, ok: true, allowed: false, remaining: 7 })
  t.like(await c.request({ id: 3, op: 'acquire', key: 'a', count: 8 }), { id: 3, ok: true, allowed: false, retryAfterMs: 500 })
  t.like(await c.request({ id: 4, op: 'status' }), { id: 4, ok: true, status: { node: 'fake' } })
  const pong = await c.request({ id: 0xffffffff, op: 'ping' })
  t.like(pong, { id: 0xffffffff, ok: true, pong: true })
  t.true(typeof (pong as { time: number }).time === 'number')
  c.destroy()
})

test('1000 pipelined requests in one write; a waiting acquire answers after later requests', async t => {
  const { path: p } = await startServer(t)
  const c = await Raw.open(p)
  // Long enough that all 999 others are answered first even on a loaded machine (they take several turns,
  // and other tests in this process flood the same event loop).
  const msgs: unknown[] = [{ id: 0, op: 'acquire', key: 'wait:slow', waitMs: 5000 }]
  for (let i = 1; i < 1000; i++) msgs.push(i % 2 === 0 ? { id: i, op: 'ping' } : { id: i, op: 'acquire', key: `k${i % 7}` })
  c.send(...msgs)
  const replies = await c.waitFor(1000, 20_000)
  t.is(replies.length, 1000)
  t.deepEqual(replies.map(r => r.id).sort((a, b) => (a ?? 0) - (b ?? 0)), Array.from({ length: 1000 }, (_, i) => i))
  t.is(replies[999].id, 0, 'the waiting acquire answers last')
  t.like(replies[999], { ok: true, allowed: true })
  t.deepEqual(replies.slice(0, 999).map(r => r.id), Array.from({ length: 999 }, (_, i) => i + 1), 'immediate replies keep request order')
  c.destroy()
})

test('batch: each item gets its own answer or error', async t => {
  const { path: p } = await startServer(t, { limits: { maxKeyBytes: 16 } })
  const c = await Raw.open(p)
  const r = await c.request({
    id: 5,
    op: 'batch',
    items: [{ key: 'a' }, { key: 'a', count: 20 }, { key: '' }, { key: 'b', count: 0 }, 'nope', { key: 'x'.repeat(17) },
      { key: 'throw:quotad' }, { key: 'throw:plain' }, { key: 'c', count: 2 }]
  })
  t.true(r.ok)
  const results = (r as { results: Array<Record<string, unknown>> }).results
  t.like(results[0], { allowed: true, remaining: 9 })
  t.like(results[1], { allowed: false })
  const codes = results.map(x => (x.error as { code?: string } | undefined)?.code)
  t.deepEqual(codes, [undefined, undefined, 'E_BAD_ARGUMENT', 'E_BAD_ARGUMENT', 'E_BAD_ARGUMENT', 'E_KEY_TOO_LONG', 'E_NO_RULE', 'E_INTERNAL', undefined])
  t.like(results[8], { allowed: true, remaining: 8 })
  t.like(await c.request({ id: 6, op: 'batch', items: [] }), { id: 6, ok: true, results: [] })
  c.destroy()
})

test('every bad request gets its code and the connection stays usable', async t => {
  const { path: p, server } = await startServer(t, { limits: { maxKeyBytes: 12, maxBatchItems: 3, maxWaitMs: 1000 } })
  const c = await Raw.open(p)
  const cases: Array<[Buffer | Record<string, unknown>, string, number | null]> = [
    [frameOf(Buffer.from([0xc1, 0xc1])), ErrorCodes.BAD_FRAME, null],
    [frameOf(Buffer.from([0x85, 0xa2])), ErrorCodes.BAD_FRAME, null],
    [frameOf(Buffer.alloc(0)), ErrorCodes.BAD_FRAME, null],
    [frameOf(packr.pack([1, 2, 3])), ErrorCodes.BAD_FRAME, null],
    [frameOf(packr.pack(42)), ErrorCodes.BAD_FRAME, null],
    [{ op: 'ping' }, ErrorCodes.BAD_FRAME, null],
    [{ id: 'seven', op: 'ping' }, ErrorCodes.BAD_FRAME, null],
    [{ id: 11, op: 'launch' }, ErrorCodes.UNKNOWN_OP, 11],
    [{ id: 12, op: 'acquire', key: 'k', count: 0 }, ErrorCodes.BAD_ARGUMENT, 12],
    [{ id: 13, op: 'acquire', key: 'k', count: -2 }, ErrorCodes.BAD_ARGUMENT, 13],
    [{ id: 14, op: 'acquire', key: 'k', count: 2.5 }, ErrorCodes.BAD_ARGUMENT, 14],
    [{ id: 15, op: 'acquire', key: 'k', waitMs: -1 }, ErrorCodes.BAD_ARGUMENT, 15],
    [{ id: 16, op: 'acquire', key: 'k', waitMs: 1001 }, ErrorCodes.BAD_ARGUMENT, 16],
    [{ id: 17, op: 'acquire', key: '' }, ErrorCodes.BAD_ARGUMENT, 17],
    [{ id: 18, op: 'acquire' }, ErrorCodes.BAD_ARGUMENT, 18],
    [{ id: 19, op: 'peek', key: 'abcdefghijklm' }, ErrorCodes.KEY_TOO_LONG, 19],
    [{ id: 19, op: 'peek', key: 'ééééééé' }, ErrorCodes.KEY_TOO_LONG, 19],
    [{ id: 20, op: 'batch', items: [{ key: 'a' }, { key: 'b' }, { key: 'c' }, { key: 'd' }] }, ErrorCodes.BATCH_TOO_LARGE, 20],
    [{ id: 21, op: 'acquire', key: 'throw:quotad' }, ErrorCodes.NO_RULE, 21],
    [{ id: 22, op: 'acquire', key: 'throw:plain' }, ErrorCodes.INTERNAL, 22]
  ]
  for (const [msg, code, id] of cases) {
    const r = await c.request(msg as Record<string, unknown>)
    t.is(errCode(r), code, JSON.stringify(msg))
    t.is(r.id, id, JSON.stringify(msg))
  }
  t.like(await c.request({ id: 99, op: 'ping' }), { id: 99, ok: true })
  t.false(c.socket.destroyed)
  t.is(server.stats().badFrames, 7)
  t.is(server.stats().internalErrors, 1)
  c.destroy()
})

test('an oversized frame gets E_FRAME_TOO_LARGE and closes only that connection', async t => {
  const { path: p } = await startServer(t, { limits: { maxFrameBytes: 1024 } })
  const other = await Raw.open(p)
  other.send({ id: 1, op: 'acquire', key: 'wait:o', waitMs: 300 })
  const bad = await Raw.open(p)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(1025)
  bad.send(encodeMessage({ id: 7, op: 'ping' }), Buffer.concat([header, Buffer.alloc(100)]))
  await bad.closed
  t.like(bad.replies[0], { id: 7, ok: true })
  t.like(bad.replies[1], { id: null, ok: false, error: { code: ErrorCodes.FRAME_TOO_LARGE } })
  other.send({ id: 2, op: 'ping' })
  await other.waitFor(2)
  t.like(other.replies.find(r => r.id === 2), { ok: true, pong: true })
  t.like(other.replies.find(r => r.id === 1), { ok: true, allowed: true }, 'the other connection\'s waiter still answers')
  const late = await Raw.open(p)
  t.like(await late.request({ id: 3, op: 'ping' }), { id: 3, ok: true })
  other.destroy()
  late.destroy()
})

test('a client that disconnects mid-frame affects nobody', async t => {
  const { path: p, server } = await startServer(t)
  const other = await Raw.open(p)
  const c = await Raw.open(p)
  const f = encodeMessage({ id: 1, op: 'acquire', key: 'half' })
  c.send(f.subarray(0, 2))
  await new Promise(resolve => setTimeout(resolve, 20))
  c.send(f.subarray(2, 9))
  await new Promise(resolve => setTimeout(resolve, 20))
  c.destroy()
  t.true(await until(() => server.stats().connections === 1))
  t.like(await other.request({ id: 2, op: 'acquire', key: 'half' }), { ok: true, remaining: 9 }, 'the half request spent nothing')
  other.destroy()
})

test('a client that disconnects mid-wait: its waiters are cancelled and spend nothing', async t => {
  const { path: p, service, server } = await startServer(t)
  const c = await Raw.open(p)
  c.send({ id: 1, op: 'acquire', key: 'wait:gone', waitMs: 300 }, { id: 2, op: 'acquire', key: 'wait:gone2', waitMs: 300 })
  t.true(await until(() => server.stats().waiting === 2))
  c.destroy()
  t.true(await until(() => service.cancelled.length === 2))
  t.deepEqual(service.cancelled.sort(), ['wait:gone', 'wait:gone2'])
  t.is(server.stats().waiting, 0)
  await new Promise(resolve => setTimeout(resolve, 350))
  t.is(service.used.get('wait:gone'), undefined)
  const other = await Raw.open(p)
  t.like(await other.request({ id: 3, op: 'ping' }), { ok: true })
  other.destroy()
})

test('maxInflightPerConnection bounds waiting requests', async t => {
  const { path: p } = await startServer(t, { limits: { maxInflightPerConnection: 2 } })
  const c = await Raw.open(p)
  c.send(...[1, 2, 3].map(id => ({ id, op: 'acquire', key: 'wait:x', waitMs: 100 })), { id: 4, op: 'acquire', key: 'now' })
  const replies = await c.waitFor(4)
  t.like(replies[0], { id: 3, ok: false, error: { code: ErrorCodes.OVERLOADED } })
  t.like(replies[1], { id: 4, ok: true })
  t.deepEqual(replies.slice(2).map(r => r.id).sort(), [1, 2])
  c.destroy()
})

test('maxConnections: the extra connection gets E_OVERLOADED with id null, then is closed', async t => {
  const { path: p, server } = await startServer(t, { limits: { maxConnections: 2 } })
  const a = await Raw.open(p)
  const b = await Raw.open(p)
  await a.request({ id: 1, op: 'ping' })
  await b.request({ id: 1, op: 'ping' })
  const c = await Raw.open(p)
  await c.closed
  t.like(c.replies[0], { id: null, ok: false, error: { code: ErrorCodes.OVERLOADED } })
  t.is(server.stats().connectionsRefused, 1)
  t.like(await a.request({ id: 2, op: 'ping' }), { ok: true })
  a.destroy()
  t.true(await until(() => server.stats().connections === 1))
  const d = await Raw.open(p)
  t.like(await d.request({ id: 3, op: 'ping' }), { ok: true })
  b.destroy()
  d.destroy()
})

test('a client that stops reading: the server pauses it and keeps serving others', async t => {
  const { path: p } = await startServer(t)
  const hog = await Raw.open(p)
  hog.socket.pause()
  const ping = encodeMessage({ id: 1, op: 'acquire', key: 'hog' })
  const chunk = Buffer.concat(Array.from({ length: 2000 }, () => ping))
  for (let i = 0; i < 100; i++) hog.socket.write(chunk)
  await new Promise(resolve => setTimeout(resolve, 200))
  const other = await Raw.open(p)
  t.like(await other.request({ id: 2, op: 'ping' }), { ok: true })
  hog.socket.resume()
  t.is((await hog.waitFor(200_000, 20_000)).length, 200_000)
  hog.destroy()
  other.destroy()
})

test('stop(): waiters get E_SHUTTING_DOWN, connections close, the socket file goes', async t => {
  const { path: p, server, service } = await startServer(t)
  const c = await Raw.open(p)
  c.send({ id: 1, op: 'acquire', key: 'wait:s', waitMs: 5000 })
  t.true(await until(() => server.stats().waiting === 1))
  await server.stop()
  await c.closed
  t.like(c.replies[0], { id: 1, ok: false, error: { code: ErrorCodes.SHUTTING_DOWN } })
  t.like(c.replies[1], { id: null, ok: false, error: { code: ErrorCodes.SHUTTING_DOWN } }, 'and why the connection closes')
  t.deepEqual(service.cancelled, ['wait:s'])
  t.false(fs.existsSync(p))
})

test('the socket file gets mode 0660 by default, and a configured mode exactly', async t => {
  const a = await startServer(t)
  t.is(fs.statSync(a.path).mode & 0o777, 0o660)
  t.true(fs.statSync(a.path).isSocket())
  const b = await startServer(t, { socketMode: 0o600 })
  t.is(fs.statSync(b.path).mode & 0o777, 0o600)
  const c = await startServer(t, { socketMode: 0o666 })
  t.is(fs.statSync(c.path).mode & 0o777, 0o666)
})

test('a missing parent directory is created with mode 0750', async t => {
  const dir = path.join(tmpDir(t), 'run', 'q')
  const { path: p } = await startServer(t, { path: path.join(dir, 's.sock') })
  t.true(fs.statSync(p).isSocket())
  t.is(fs.statSync(dir).mode & 0o777, 0o750 & ~process.umask())
})

test('a stale socket file is replaced', async t => {
  const p = tmpSocket(t)
  // A listener killed with SIGKILL leaves its socket file behind.
  const r = spawnSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(p)}, () => process.kill(process.pid, 'SIGKILL'))`])
  t.is(r.signal, 'SIGKILL')
  t.true(fs.lstatSync(p).isSocket())
  await startServer(t, { path: p })
  const c = await Raw.open(p)
  t.like(await c.request({ id: 1, op: 'ping' }), { ok: true })
  c.destroy()
})

test('a live socket is refused with E_SOCKET_IN_USE and keeps serving', async t => {
  const { path: p } = await startServer(t)
  const second = new UnixServer({ path: p, limits: DEFAULT_LIMITS, service: new FakeService() })
  await t.throwsAsync(second.start(), { code: ErrorCodes.SOCKET_IN_USE })
  const c = await Raw.open(p)
  t.like(await c.request({ id: 1, op: 'ping' }), { ok: true })
  c.destroy()
})

test('a regular file at the path is refused and left alone', async t => {
  const p = tmpSocket(t)
  fs.writeFileSync(p, 'precious')
  const server = new UnixServer({ path: p, limits: DEFAULT_LIMITS, service: new FakeService() })
  await t.throwsAsync(server.start(), { code: ErrorCodes.SOCKET_IN_USE })
  t.is(fs.readFileSync(p, 'utf8'), 'precious')
})

test('stop() leaves a successor\'s socket file alone', async t => {
  const { path: p, server } = await startServer(t)
  // Simulate another daemon having replaced the file after us.
  fs.unlinkSync(p)
  const successor = net.createServer()
  await new Promise<void>(resolve => successor.listen(p, resolve))
  const ino = fs.statSync(p).ino
  await server.stop()
  t.is(fs.statSync(p).ino, ino)
  await new Promise(resolve => successor.close(resolve))
})

test('events reach onEvent and diagnostics_channel', async t => {
  const seen: string[] = []
  const published: unknown[] = []
  const onBadFrame = (msg: unknown): void => { published.push(msg) }
  diagnosticsChannel.subscribe('quotad:server:bad-frame', onBadFrame)
  t.teardown(() => diagnosticsChannel.unsubscribe('quotad:server:bad-frame', onBadFrame))
  // The channel is process-wide: other tests of this file publish bad frames of their own at the same
  // time. Ours is the very object our server's onEvent saw.
  const ours: unknown[] = []
  const { path: p } = await startServer(t, { onEvent: (name, data) => { seen.push(name); if (name === 'bad-frame') ours.push(data) } })
  const c = await Raw.open(p)
  await c.request({ id: 1, op: 'ping' })
  c.send(frameOf(Buffer.from([0xc1])))
  await c.waitFor(2)
  c.destroy()
  t.true(await until(() => seen.includes('disconnect')))
  t.true(seen.includes('connection'))
  t.true(seen.includes('bad-frame'))
  t.is(ours.length, 1)
  t.true(published.includes(ours[0]), 'the bad frame reached the channel too')
  t.like(ours[0], { code: ErrorCodes.BAD_FRAME })
})
