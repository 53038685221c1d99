/**
 * The typed client against a real UnixServer (with a fake QuotaService) and
 * against hand-made misbehaving servers: results, error codes, pipelining and
 * write coalescing, timeouts, connection loss and reconnect.
 */
import test from 'ava'
import { performance } from 'node:perf_hooks'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { QuotadClient } from '@quotad/client'
import { UnixServer } from '../src/server/unix-server.js'
import { FrameDecoder, encodeDecisionReply, type Request } from '@quotad/client/wire'
import { decodeRequest } from '../src/protocol/requests.js'
import { DEFAULT_LIMITS, type LimitsConfig } from '../src/config/types.js'
import type { AcquireResult, Decision, QuotaService } from '../src/core/types.js'
import { ErrorCodes, QuotadError, type ErrorCode } from '../src/errors.js'

/** `limit` tokens per key; `wait:*` keys queue for waitMs then succeed; `norule:*` throws E_NO_RULE. */
class FakeService implements QuotaService {
  readonly used = new Map<string, number>()
  readonly timers = new Set<NodeJS.Timeout>()
  constructor (readonly limit = 10) {}

  acquire (key: string, count: number, waitMs: number): AcquireResult {
    if (key.startsWith('norule:')) throw new QuotadError(ErrorCodes.NO_RULE, `no rule matches ${key}`)
    if (key.startsWith('wait:') && waitMs > 0) {
      let settle!: (d: Decision) => void
      const promise = new Promise<Decision>(resolve => { settle = resolve })
      const timer = setTimeout(() => { this.timers.delete(timer); settle(this.decision(key, true)) }, waitMs)
      this.timers.add(timer)
      return { waiting: true, promise, cancel: () => { clearTimeout(timer); this.timers.delete(timer) } }
    }
    const used = this.used.get(key) ?? 0
    if (used + count > this.limit) return this.decision(key, false)
    this.used.set(key, used + count)
    return this.decision(key, true)
  }

  peek (key: string, count: number): Decision {
    return this.decision(key, (this.used.get(key) ?? 0) + count <= this.limit)
  }

  status (): Record<string, unknown> {
    return { node: 'fake', keys: this.used.size }
  }

  private decision (key: string, allowed: boolean): Decision {
    return { allowed, remaining: this.limit - (this.used.get(key) ?? 0), limit: this.limit, resetMs: 1000, retryAfterMs: allowed ? 0 : 250, rule: 'fake' }
  }
}

type Teardown = { teardown: (fn: () => unknown) => void }

function tmpSocket (t: Teardown): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qd-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return path.join(dir, 'q.sock')
}

async function startServer (t: Teardown, p = tmpSocket(t), limits: Partial<LimitsConfig> = {}): Promise<{ server: UnixServer, path: string, service: FakeService }> {
  const service = new FakeService()
  const server = new UnixServer({ path: p, limits: { ...DEFAULT_LIMITS, ...limits }, service })
  await server.start()
  t.teardown(async () => {
    await server.stop()
    for (const timer of service.timers) clearTimeout(timer)
  })
  return { server, path: p, service }
}

async function connect (t: Teardown, socketPath: string, opts: { timeoutMs?: number, reconnect?: boolean } = {}): Promise<QuotadClient> {
  const c = await QuotadClient.connect({ socketPath, ...opts })
  t.teardown(() => c.close())
  return c
}

/** A bare server speaking the framing, to misbehave on purpose. */
async function rawServer (t: Teardown, onRequest: (req: Request, sock: net.Socket) => void): Promise<{ path: string, chunks: number[] }> {
  const p = tmpSocket(t)
  const chunks: number[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer(sock => {
    sockets.add(sock)
    sock.on('close', () => sockets.delete(sock))
    sock.on('error', () => {})
    const decoder = new FrameDecoder({
      onFrame: (b, s, e) => onRequest(decodeRequest(b, s, e, DEFAULT_LIMITS), sock),
      onFrameTooLarge: () => sock.destroy()
    }, 1 << 20)
    sock.on('data', c => { chunks.push(c.length); decoder.push(c) })
  })
  await new Promise<void>(resolve => server.listen(p, resolve))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    return new Promise(resolve => server.close(resolve))
  })
  return { path: p, chunks }
}

test('acquire, peek, batch, status and ping return typed results', async t => {
  const { path: p } = await startServer(t)
  const c = await connect(t, p)
  t.deepEqual(await c.acquire('a'), { allowed: true, remaining: 9, limit: 10, resetMs: 1000, retryAfterMs: 0, rule: 'fake' })
  t.like(await c.acquire('a', { count: 9 }), { allowed: true, remaining: 0 })
  t.like(await c.acquire('a'), { allowed: false, retryAfterMs: 250 })
  t.like(await c.peek('b', { count: 10 }), { allowed: true, remaining: 10 })
  const results = await c.batch([{ key: 'b' }, { key: 'b', count: 20 }, { key: '' }, { key: 'norule:x' }])
  t.like(results[0], { allowed: true, remaining: 9 })
  t.like(results[1], { allowed: false })
  t.like(results[2], { error: { code: ErrorCodes.BAD_ARGUMENT } })
  t.like(results[3], { error: { code: ErrorCodes.NO_RULE } })
  t.like(await c.status(), { node: 'fake' })
  const rtt = await c.ping()
  t.true(rtt >= 0 && rtt < 1000)
  t.like(await c.acquire('wait:w', { waitMs: 30 }), { allowed: true })
})

test('server errors are thrown as QuotadError with the server\'s code', async t => {
  const { path: p } = await startServer(t, undefined, { maxKeyBytes: 8, maxWaitMs: 100 })
  const c = await connect(t, p)
  const cases: Array<[Promise<unknown>, ErrorCode]> = [
    [c.acquire('norule:a'), ErrorCodes.NO_RULE],
    [c.acquire('a', { count: 0 }), ErrorCodes.BAD_ARGUMENT],
    [c.acquire('a', { count: 1.5 }), ErrorCodes.BAD_ARGUMENT],
    [c.acquire('a', { waitMs: 101 }), ErrorCodes.BAD_ARGUMENT],
    [c.acquire(''), ErrorCodes.BAD_ARGUMENT],
    [c.peek('123456789'), ErrorCodes.KEY_TOO_LONG],
    [c.acquire(5 as unknown as string), ErrorCodes.BAD_ARGUMENT]
  ]
  for (const [p, code] of cases) {
    const err = await t.throwsAsync(p)
    t.true(err instanceof QuotadError)
    t.is((err as QuotadError).code, code)
  }
  t.true(await c.ping() >= 0, 'the connection survives bad requests')
})

test('1000 requests in flight at once, answered out of order', async t => {
  const { path: p } = await startServer(t)
  const c = await connect(t, p)
  const order: number[] = []
  const ps = Array.from({ length: 1000 }, (_, i) => {
    const req = i % 100 === 0 ? c.acquire(`wait:${i}`, { waitMs: 50 }) : c.acquire(`k${i % 13}`)
    return req.then(d => { order.push(i); return d })
  })
  t.is(c.inflight, 1000)
  const ds = await Promise.all(ps)
  t.is(ds.length, 1000)
  t.true(ds.every(d => typeof d.allowed === 'boolean' && d.rule === 'fake'))
  t.true(order.indexOf(0) > order.indexOf(1), 'a waiting acquire finishes after requests sent behind it')
  t.is(c.inflight, 0)
})

test('requests issued in one tick leave in one write', async t => {
  const { path: p, chunks } = await rawServer(t, (req, sock) => {
    sock.write(encodeDecisionReply(req.id, { allowed: true, remaining: 1, limit: 1, resetMs: 0, retryAfterMs: 0, rule: 'r' }))
  })
  const c = await connect(t, p)
  await Promise.all(Array.from({ length: 500 }, (_, i) => c.acquire(`key-${i}`)))
  t.true(chunks.length <= 3, `500 requests arrived in ${chunks.length} chunks`)
})

test('no reply within timeoutMs: E_TIMEOUT; a waiting acquire gets timeoutMs + waitMs', async t => {
  const { path: silent } = await rawServer(t, () => {})
  const c = await connect(t, silent, { timeoutMs: 100 })
  const t0 = performance.now()
  await t.throwsAsync(withDeadline(c.acquire('a')), { code: ErrorCodes.TIMEOUT })
  // Never early (a lower bound holds however busy the machine is); how late is the machine's business.
  t.true(performance.now() - t0 >= 100)
  t.is(c.inflight, 0)

  // The fake service answers a waiting acquire after waitMs: 2.5 s, past timeoutMs (2 s) but well
  // inside timeoutMs + waitMs (4.5 s), so only the extension saves it, with 2 s to spare for a busy machine.
  const { path: p } = await startServer(t)
  const w = await connect(t, p, { timeoutMs: 2000 })
  t.like(await w.acquire('wait:long', { waitMs: 2500 }), { allowed: true }, 'waitMs extends the deadline')
})

/** The promise, or a rejection after a generous deadline (a hung promise fails with a message, not ava's timeout). */
async function withDeadline<T> (p: Promise<T>, ms = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms) })
  try {
    return await Promise.race([p, deadline])
  } finally {
    clearTimeout(timer)
  }
}

test.serial('timeouts run on the monotonic clock: a wall clock stepped back an hour still times out', async t => {
  const { path: silent } = await rawServer(t, () => {})
  const c = await connect(t, silent, { timeoutMs: 100 })
  const realNow = Date.now
  const pending = c.acquire('a')
  Date.now = () => realNow() - 3_600_000 // NTP steps the clock back
  try {
    // On the wall clock this would wait an hour: the deadline turns that into a failure.
    await t.throwsAsync(withDeadline(pending), { code: ErrorCodes.TIMEOUT })
  } finally {
    Date.now = realNow
  }
})

test('a dropped connection rejects pending requests with E_CONNECTION', async t => {
  const { path: p } = await rawServer(t, (_req, sock) => sock.destroy())
  const c = await connect(t, p, { reconnect: false })
  const results = await Promise.allSettled([c.acquire('a'), c.ping(), c.status()])
  for (const r of results) {
    t.is(r.status, 'rejected')
    t.is(((r as PromiseRejectedResult).reason as QuotadError).code, ErrorCodes.CONNECTION)
  }
  await t.throwsAsync(c.ping(), { code: ErrorCodes.CONNECTION }, 'reconnect is off')
})

test('reconnects after a server restart', async t => {
  const p = tmpSocket(t)
  const first = await startServer(t, p)
  const c = await connect(t, p)
  t.like(await c.acquire('a'), { allowed: true })
  const waiting = c.acquire('wait:a', { waitMs: 5000 })
  await new Promise(resolve => setTimeout(resolve, 20))
  await first.server.stop()
  await t.throwsAsync(waiting, { code: ErrorCodes.SHUTTING_DOWN })
  await t.throwsAsync(c.ping(), { code: ErrorCodes.CONNECTION }, 'nobody listens')
  await startServer(t, p)
  // The failed attempt set a short backoff; the next request dials again.
  t.like(await c.acquire('a'), { allowed: true, remaining: 9 })
  t.true(await c.ping() >= 0)
})

test('connecting to a missing socket fails with E_CONNECTION', async t => {
  const p = tmpSocket(t)
  await t.throwsAsync(QuotadClient.connect({ socketPath: p }), { code: ErrorCodes.CONNECTION })
})

test('close() rejects what is pending and later calls', async t => {
  const { path: p } = await startServer(t)
  const c = await QuotadClient.connect({ socketPath: p })
  const pending = c.acquire('wait:c', { waitMs: 1000 })
  await new Promise(resolve => setTimeout(resolve, 20))
  await c.close()
  await t.throwsAsync(pending, { code: ErrorCodes.CONNECTION })
  await t.throwsAsync(c.ping(), { code: ErrorCodes.CONNECTION })
  await c.close()
})

test('a connection the server refuses reports the server\'s code', async t => {
  const { path: p } = await startServer(t, undefined, { maxConnections: 1 })
  const a = await connect(t, p)
  t.true(await a.ping() >= 0)
  const b = await connect(t, p)
  await t.throwsAsync(b.ping(), { code: ErrorCodes.OVERLOADED })
  await t.throwsAsync(b.ping(), { code: ErrorCodes.OVERLOADED }, 'and again after dialling anew')
  t.true(await a.ping() >= 0)
})

test('option checks', async t => {
  await t.throwsAsync(QuotadClient.connect({ socketPath: '' }), { code: ErrorCodes.BAD_ARGUMENT })
  await t.throwsAsync(QuotadClient.connect({ socketPath: '/x', timeoutMs: -1 }), { code: ErrorCodes.BAD_ARGUMENT })
})
