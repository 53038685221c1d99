/**
 * The libp2p cluster transport on loopback: real TCP, pnet, noise, yamux and
 * gossipsub between nodes in this process, on `tcp/0` ports. Seeds are the
 * listen addresses of nodes already started, with the `/p2p/` part removed
 * (the config file has no peer ids).
 */
import test from 'ava'
import type { ExecutionContext } from 'ava'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { QuotadError } from '../src/errors.js'
import { encodeFrame, readFrame } from '../src/cluster/transport/framing.js'
import { createTransport } from '../src/cluster/transport/libp2p-transport.js'
import { Redialer } from '../src/cluster/transport/redialer.js'
import { TRANSPORT_DEFAULTS, type Transport, type TransportOptions } from '../src/cluster/transport/types.js'

const TOPIC = 'quotad/test/gossip/1'
const LISTEN = '/ip4/127.0.0.1/tcp/0'

interface Node {
  t: Transport
  dir: string
  gossip: Array<{ from: string, text: string }>
  requests: string[]
}

function tempDir (t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'quotad-transport-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

/** The listen address without `/p2p/<id>`, as it would appear in the cluster file. */
function seedOf (n: Node): string {
  return n.t.listenAddrs[0].replace(/\/p2p\/[^/]+$/, '')
}

async function startNode (t: ExecutionContext, psk: Uint8Array | null, seeds: Array<Node | string>, extra: Partial<TransportOptions> = {}): Promise<Node> {
  const dir = extra.dataDir ?? tempDir(t)
  const tr = await createTransport({
    listen: LISTEN,
    seeds: seeds.map(s => typeof s === 'string' ? s : seedOf(s)),
    psk,
    dataDir: dir,
    topic: TOPIC,
    minBackoffMs: 100,
    maxBackoffMs: 1000,
    dialTimeoutMs: 1500,
    ...extra
  })
  const node: Node = { t: tr, dir, gossip: [], requests: [] }
  tr.onGossip = (from, data) => { node.gossip.push({ from, text: Buffer.from(data).toString() }) }
  tr.onRequest = (from, data) => {
    const text = Buffer.from(data).toString()
    node.requests.push(from)
    if (text === 'throw') throw new Error('handler failed')
    if (text === 'hang') return new Promise<Uint8Array>(() => {})
    if (text.startsWith('big:')) return new Uint8Array(Number(text.slice(4)))
    return Buffer.from(`${text}<-${tr.peerId.slice(-4)}`)
  }
  tr.onCall = async (_from, data) => {
    const text = Buffer.from(data).toString()
    if (text === 'throw') throw new Error('handler failed')
    if (text === 'hang') return await new Promise<Uint8Array>(() => {})
    // 'slow:N:x' answers after N ms, so later calls can be answered first
    const slow = /^slow:(\d+):/.exec(text)
    if (slow !== null) await new Promise(resolve => setTimeout(resolve, Number(slow[1])))
    return Buffer.from(`${text}<=${tr.peerId.slice(-4)}`)
  }
  await tr.start()
  t.teardown(async () => { await tr.stop() })
  return node
}

/** Poll for a condition; the deadline is generous (a busy machine), never a speed bound. */
async function waitFor (what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

/** Publish `text` until a publish reaches `peers` subscribers (subscriptions take ~100 ms to exchange). */
async function publishUntilReached (n: Node, text: string, peers: number): Promise<void> {
  await waitFor(`a publish from ${n.t.peerId} to reach ${peers} peers`,
    async () => await n.t.publish(Buffer.from(text)) >= peers)
}

const sleep = async (ms: number): Promise<void> => { await new Promise(resolve => setTimeout(resolve, ms)) }

/** Timeout of requests that should succeed (or fail for another reason than time): long enough for a busy machine. */
const OK_MS = 30_000

test('three nodes with one key connect, gossip and make requests both ways', async t => {
  const psk = randomBytes(32)
  const a = await startNode(t, psk, [])
  const b = await startNode(t, psk, [a])
  // c lists every node, itself included, as the cluster file would
  const c = await startNode(t, psk, [a, b, '/ip4/127.0.0.1/tcp/0'])
  t.regex(a.t.listenAddrs[0], /^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/12D3Koo/)
  t.not(a.t.listenAddrs[0], '/ip4/127.0.0.1/tcp/0')

  await waitFor('a full mesh', () => [a, b, c].every(n => n.t.connectedPeers().length === 2))
  t.deepEqual([...a.t.connectedPeers()].sort(), [b.t.peerId, c.t.peerId].sort(), 'a is connected to b and c (in any order)')

  await publishUntilReached(a, 'hello from a', 2)
  await waitFor('b and c to get a\'s gossip', () => [b, c].every(n => n.gossip.some(g => g.text === 'hello from a')))
  t.true(b.gossip.every(g => g.from === a.t.peerId))
  t.deepEqual(a.gossip, [], 'gossip from ourselves is never delivered')
  await publishUntilReached(c, 'hello from c', 2)
  await waitFor('a and b to get c\'s gossip', () => [a, b].every(n => n.gossip.some(g => g.text === 'hello from c')))

  const fromB = await b.t.request(a.t.peerId, Buffer.from('ping'), OK_MS)
  t.is(Buffer.from(fromB).toString(), `ping<-${a.t.peerId.slice(-4)}`)
  const fromA = await a.t.request(b.t.peerId, Buffer.from('pong'), OK_MS)
  t.is(Buffer.from(fromA).toString(), `pong<-${b.t.peerId.slice(-4)}`)
  t.deepEqual(a.requests, [b.t.peerId])
  t.deepEqual(b.requests, [a.t.peerId])
  // c to b, over the connection c opened to its seed b
  t.is(Buffer.from(await c.t.request(b.t.peerId, Buffer.from('x'), OK_MS)).toString(), `x<-${b.t.peerId.slice(-4)}`)
  // an empty request is fine
  t.is(Buffer.from(await a.t.request(c.t.peerId, new Uint8Array(0), OK_MS)).toString(), `<-${c.t.peerId.slice(-4)}`)

  // failures have stable codes, and the transport carries on
  const threw = await t.throwsAsync<QuotadError>(a.t.request(b.t.peerId, Buffer.from('throw'), OK_MS))
  t.is(threw?.code, 'E_CONNECTION')
  const hung = await t.throwsAsync<QuotadError>(a.t.request(b.t.peerId, Buffer.from('hang'), 300))
  t.is(hung?.code, 'E_TIMEOUT')
  const tooBigOut = await t.throwsAsync<QuotadError>(a.t.request(b.t.peerId, new Uint8Array(64 * 1024 + 1), OK_MS))
  t.is(tooBigOut?.code, 'E_FRAME_TOO_LARGE')
  const tooBigBack = await t.throwsAsync<QuotadError>(a.t.request(b.t.peerId, Buffer.from('big:70000'), OK_MS))
  t.is(tooBigBack?.code, 'E_CONNECTION', 'the responder refuses to send an oversized reply')
  const badPeer = await t.throwsAsync<QuotadError>(a.t.request('not-a-peer', Buffer.from('x'), OK_MS))
  t.is(badPeer?.code, 'E_BAD_ARGUMENT')
  t.is(Buffer.from(await a.t.request(b.t.peerId, Buffer.from('again'), OK_MS)).toString(), `again<-${b.t.peerId.slice(-4)}`)

  const sa = a.t.stats()
  t.like(sa, { requestsOut: 8, requestErrors: 5, requestsOversize: 1, handlerErrors: 0, peers: 2 })
  t.true(sa.published >= 1)
  // b counts as it goes; the hung request fails on b only at its inboundTimeoutMs, so not waited for
  await waitFor('b to count the failed requests', () => b.t.stats().requestsInFailed >= 2)
  t.like(b.t.stats(), { requestsIn: 6, handlerErrors: 1 })
  t.true(b.t.stats().received >= 2)
})

test('calls go on one session per peer, answered in any order; a timeout keeps the session, a handler that throws ends it and the next call opens another', async t => {
  const psk = randomBytes(32)
  const a = await startNode(t, psk, [])
  const b = await startNode(t, psk, [a])
  await waitFor('a and b connected', () => a.t.connectedPeers().length === 1 && b.t.connectedPeers().length === 1)
  const text = async (p: Promise<Uint8Array>): Promise<string> => Buffer.from(await p).toString()
  const tail = a.t.peerId.slice(-4)
  // 40 at once, the early ones answered last: each answer reaches its own call
  const said = Array.from({ length: 40 }, (_, i) => `slow:${(40 - i) * 5}:${i}`)
  t.deepEqual(await Promise.all(said.map(async m => await text(b.t.call(a.t.peerId, Buffer.from(m), OK_MS)))), said.map(m => `${m}<=${tail}`))
  t.like(b.t.stats(), { callsOut: 40, callSessionsOpened: 1, callErrors: 0 })
  await waitFor('a to count the calls', () => a.t.stats().callsIn === 40)
  t.like(a.t.stats(), { callSessionsServed: 1, callsInFailed: 0 })

  const hung = await t.throwsAsync<QuotadError>(b.t.call(a.t.peerId, Buffer.from('hang'), 300))
  t.is(hung?.code, 'E_TIMEOUT')
  t.is(await text(b.t.call(a.t.peerId, Buffer.from('after'), OK_MS)), `after<=${tail}`)
  t.is(b.t.stats().callSessionsOpened, 1, 'a timed-out call leaves its session open')

  const tooBig = await t.throwsAsync<QuotadError>(b.t.call(a.t.peerId, new Uint8Array(5000), OK_MS))
  t.is(tooBig?.code, 'E_FRAME_TOO_LARGE', 'a call frame is bounded')
  // A handler that throws resets the session: the calls on it fail, and the next call opens a new one
  const slowOne = b.t.call(a.t.peerId, Buffer.from('slow:2000:x'), OK_MS)
  const threw = await t.throwsAsync<QuotadError>(b.t.call(a.t.peerId, Buffer.from('throw'), OK_MS))
  t.is(threw?.code, 'E_CONNECTION')
  t.is((await t.throwsAsync<QuotadError>(slowOne))?.code, 'E_CONNECTION', 'a call in flight on the reset session fails')
  t.is(await text(b.t.call(a.t.peerId, Buffer.from('again'), OK_MS)), `again<=${tail}`)
  t.is(b.t.stats().callSessionsOpened, 2)
  // both ways: a calls b on a session of its own
  t.is(await text(a.t.call(b.t.peerId, Buffer.from('back'), OK_MS)), `back<=${b.t.peerId.slice(-4)}`)
  t.is(a.t.stats().callSessionsOpened, 1)
})

test('the peer identity is created once (mode 0600) and reused on restart; a corrupt key file is refused', async t => {
  const dir = tempDir(t)
  const psk = randomBytes(32)
  const first = await createTransport({ listen: LISTEN, seeds: [], psk, dataDir: dir, topic: TOPIC })
  await first.start()
  const id = first.peerId
  const addr = first.listenAddrs[0]
  await first.stop()
  await first.stop() // idempotent
  await t.throwsAsync(first.publish(Buffer.from('x')), { any: true, message: /stopped/ })
  t.is(statSync(join(dir, 'peer-key')).mode & 0o777, 0o600)

  // restart on the same port, with our own address among the seeds: it is skipped
  const events: string[] = []
  const second = await createTransport({
    listen: addr.replace(/\/p2p\/.*$/, ''), seeds: [addr.replace(/\/p2p\/.*$/, '')], psk, dataDir: dir, topic: TOPIC,
    onEvent: (name, fields) => { events.push(`${name}:${String(fields.created ?? '')}`) }
  })
  t.is(second.peerId, id)
  await second.start()
  t.is(second.listenAddrs[0], addr)
  // the redialer has looked at the seed (no fixed sleep: the event says it is done with it)
  await waitFor('the seed to be recognised as this node', () => events.includes('seed-is-self:'))
  t.like(second.stats(), { dials: 0, dialFailures: 0 })
  t.true(events.includes('identity:false'))
  const self = await t.throwsAsync<QuotadError>(second.dial(addr))
  t.is(self?.code, 'E_BAD_ARGUMENT')
  await second.stop()

  writeFileSync(join(dir, 'peer-key'), 'not a key')
  const corrupt = await t.throwsAsync<QuotadError>(createTransport({ listen: LISTEN, seeds: [], psk, dataDir: dir, topic: TOPIC }))
  t.is(corrupt?.code, 'E_CONFIG_INVALID')
  t.true(corrupt?.message.includes(join(dir, 'peer-key')))

  const invalid = await t.throwsAsync<QuotadError>(createTransport({
    listen: 'tcp:0', seeds: ['nope'], psk: new Uint8Array(16), dataDir: dir, topic: '', dialTimeoutMs: -1
  }))
  t.is(invalid?.code, 'E_CONFIG_INVALID')
  t.deepEqual((invalid?.details as Array<{ path: string }>).map(i => i.path).sort(),
    ['dialTimeoutMs', 'listen', 'psk', 'seeds[0]', 'topic'])
})

test('pnet: nodes with another key or no key never connect, deliver gossip or make requests', async t => {
  const psk = randomBytes(32)
  const a = await startNode(t, psk, [])
  const b = await startNode(t, psk, [a])
  await waitFor('a and b to connect', () => a.t.connectedPeers().length === 1 && b.t.connectedPeers().length === 1)
  await publishUntilReached(a, 'keyed', 1)

  const wrong = await startNode(t, randomBytes(32), [a, b])
  const none = await startNode(t, null, [a, b])
  const outsiders = [wrong, none]
  const outsiderIds = outsiders.map(n => n.t.peerId)
  // keyed nodes dialling the outsiders fail as well (a bounded dial, never a hang)
  for (const o of outsiders) {
    const err = await t.throwsAsync<QuotadError>(a.t.dial(seedOf(o)))
    t.true(['E_CONNECTION', 'E_TIMEOUT'].includes(err?.code ?? ''), err?.code)
  }

  // a fixed number of attempts (not a duration: a busy machine makes as many, only slower)
  for (let round = 0; round < 10; round++) {
    for (const o of outsiders) {
      await o.t.publish(Buffer.from('intruder'))
      await t.throwsAsync(o.t.request(a.t.peerId, Buffer.from('let me in'), 200), { any: true })
    }
    await sleep(100)
  }
  await waitFor('the outsiders to redial their seeds', () => outsiders.every(o => o.t.stats().dialFailures >= 2))

  for (const k of [a, b]) {
    t.deepEqual(k.gossip.filter(g => outsiderIds.includes(g.from) || g.text === 'intruder'), [])
    t.deepEqual(k.requests, [])
    t.false(k.t.connectedPeers().some(id => outsiderIds.includes(id)))
  }
  for (const o of outsiders) {
    t.deepEqual(o.t.connectedPeers(), [])
    t.deepEqual(o.gossip, [])
    t.true(o.t.stats().dialFailures >= 2, 'the outsider kept redialling its seeds')
  }
  // the keyed pair still works
  await publishUntilReached(b, 'still here', 1)
  await waitFor('a to get b\'s gossip', () => a.gossip.some(g => g.text === 'still here'))
})

test('oversized gossip is dropped and counted, and the receiver keeps getting gossip', async t => {
  const psk = randomBytes(32)
  const receiver = await startNode(t, psk, [], { maxMessageBytes: 1024 })
  // the sender allows itself bigger messages than the receiver accepts
  const sender = await startNode(t, psk, [receiver], { maxMessageBytes: 1024 * 1024 })
  await publishUntilReached(sender, 'warm-up', 1)
  await waitFor('warm-up gossip', () => receiver.gossip.length > 0)

  t.is(await sender.t.publish(new Uint8Array(4000).fill(65)), 1)
  await waitFor('the oversized message to be counted', () => receiver.t.stats().droppedOversize === 1)
  await publishUntilReached(sender, 'after big', 1)
  await waitFor('the next normal message', () => receiver.gossip.some(g => g.text === 'after big'))
  t.false(receiver.gossip.some(g => g.text.length > 1024), 'oversized gossip is never delivered')

  // A message far above the receiver's gossipsub frame cap kills the gossip
  // stream under a live connection; the transport notices and reconnects.
  t.is(await sender.t.publish(new Uint8Array(200_000).fill(66)), 1)
  let n = 0
  await waitFor('gossip after a frame-level drop', async () => {
    await sender.t.publish(Buffer.from(`recovered ${n++}`))
    return receiver.gossip.some(g => g.text.startsWith('recovered'))
  })
  t.false(receiver.gossip.some(g => g.text.length > 1024))
  t.true(receiver.t.stats().gossipResets >= 1)

  // our own publish refuses what the cluster would drop
  const own = await t.throwsAsync<QuotadError>(receiver.t.publish(new Uint8Array(1025)))
  t.is(own?.code, 'E_FRAME_TOO_LARGE')
})

test('stop() leaves no handles behind: a process that used the transport exits by itself', async t => {
  t.timeout(180_000)
  const dir = tempDir(t)
  const moduleUrl = new URL('../src/cluster/transport/libp2p-transport.js', import.meta.url).href
  const script = `
    import { createTransport } from ${JSON.stringify(moduleUrl)}
    import { randomBytes } from 'node:crypto'
    const psk = randomBytes(32)
    const opts = (name, seeds) => ({ listen: '/ip4/127.0.0.1/tcp/0', seeds, psk, dataDir: ${JSON.stringify(dir)} + '/' + name, topic: 't' })
    const a = await createTransport(opts('a', []))
    a.onRequest = (_from, d) => d
    await a.start()
    const b = await createTransport(opts('b', [a.listenAddrs[0].replace(/\\/p2p\\/.*/, ''), '/ip4/127.0.0.1/tcp/1']))
    await b.start()
    while (await b.publish(new Uint8Array([1])) === 0) await new Promise(r => setTimeout(r, 20))
    await b.request(a.peerId, new Uint8Array([1, 2, 3]), 30000)
    await Promise.all([a.stop(), b.stop()])
    console.log('stopped')
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', d => { out += String(d) })
  child.stderr.on('data', d => { out += String(d) })
  // A handle left behind keeps the process alive for ever: the deadline (generous, a busy machine
  // may take many seconds to start two nodes) only turns that into a failure.
  const code = await new Promise<number | null>(resolve => {
    const kill = setTimeout(() => { child.kill('SIGKILL') }, 90_000)
    child.on('exit', c => { clearTimeout(kill); resolve(c) })
  })
  t.is(code, 0, `the process did not exit by itself: ${out}`)
  t.regex(out, /stopped/)
})

/**
 * Run `script` (an ES module, from a file in `dir`: a worker thread inherits `--input-type`, which it refuses) in a
 * fresh node; its exit code and output, or null after 90 s (then it is killed).
 */
async function runScript (dir: string, script: string): Promise<{ code: number | null, out: string }> {
  const file = join(dir, `script-${randomBytes(4).toString('hex')}.mjs`)
  writeFileSync(file, script)
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', d => { out += String(d) })
  child.stderr.on('data', d => { out += String(d) })
  const code = await new Promise<number | null>(resolve => {
    const kill = setTimeout(() => { child.kill('SIGKILL') }, 90_000)
    child.on('exit', c => { clearTimeout(kill); resolve(c) })
  })
  return { code, out }
}

test('a transport thread warmed before its options are known (quotad-main) becomes the next transport; unused, it does not keep the process alive', async t => {
  t.timeout(180_000)
  const dir = tempDir(t)
  const moduleUrl = new URL('../src/cluster/transport/thread-transport.js', import.meta.url).href
  const used = await runScript(dir, `
    import { createTransport, warmTransportThread } from ${JSON.stringify(moduleUrl)}
    import { randomBytes } from 'node:crypto'
    warmTransportThread()
    const psk = randomBytes(32)
    const opts = (name, seeds) => ({ listen: '/ip4/127.0.0.1/tcp/0', seeds, psk, dataDir: ${JSON.stringify(dir)} + '/' + name, topic: 't' })
    // Options sent a while after the warm-up, as a daemon's come once it has read its files.
    await new Promise(r => setTimeout(r, 200))
    const a = await createTransport(opts('a', []))
    a.onRequest = (_from, d) => d
    await a.start()
    const b = await createTransport(opts('b', [a.listenAddrs[0].replace(/\\/p2p\\/.*/, '')]))
    await b.start()
    while (await b.publish(new Uint8Array([1])) === 0) await new Promise(r => setTimeout(r, 20))
    const echo = await b.request(a.peerId, new Uint8Array([1, 2, 3]), 30000)
    await Promise.all([a.stop(), b.stop()])
    console.log('stopped', a.peerId !== b.peerId, Array.from(echo).join())
  `)
  t.is(used.code, 0, `the process did not exit by itself: ${used.out}`)
  t.regex(used.out, /stopped true 1,2,3/)
  const unused = await runScript(dir, `
    import { warmTransportThread } from ${JSON.stringify(moduleUrl)}
    warmTransportThread()
    console.log('warmed')
  `)
  t.is(unused.code, 0, `an unused warm thread kept the process alive: ${unused.out}`)
  t.regex(unused.out, /warmed/)
})

async function * chunks (...parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield p
}

test('framing: split and joined chunks, size cap from the header, truncation and trailing bytes', async t => {
  const frame = encodeFrame(Buffer.from('hello'))
  t.deepEqual([...frame.subarray(0, 4)], [0, 0, 0, 5])
  const bytewise = [...frame].map(b => Uint8Array.of(b))
  t.is(Buffer.from(await readFrame(chunks(...bytewise), 5)).toString(), 'hello')
  t.is(Buffer.from(await readFrame(chunks(frame), 5)).toString(), 'hello')
  t.is((await readFrame(chunks(encodeFrame(new Uint8Array(0))), 5)).byteLength, 0)
  // the cap is enforced on the header, before any body arrives
  const big = await t.throwsAsync<QuotadError>(readFrame(chunks(frame.subarray(0, 4)), 4))
  t.is(big?.code, 'E_FRAME_TOO_LARGE')
  const short = await t.throwsAsync<QuotadError>(readFrame(chunks(frame.subarray(0, 7)), 5))
  t.is(short?.code, 'E_BAD_FRAME')
  // bytes after the frame are a protocol error, in the frame's own chunk or written apart after it (issue 46: one
  // written apart was answered); the reader reads on to the writer's close
  const trailing = await t.throwsAsync<QuotadError>(readFrame(chunks(Buffer.concat([frame, Uint8Array.of(1)])), 5))
  t.is(trailing?.code, 'E_BAD_FRAME')
  const apart = await t.throwsAsync<QuotadError>(readFrame(chunks(frame, Uint8Array.of(0)), 5))
  t.is(apart?.code, 'E_BAD_FRAME')
  t.regex(apart?.message ?? '', /1 unexpected bytes after the frame/)
  t.is(Buffer.from(await readFrame(chunks(frame, new Uint8Array(0)), 5)).toString(), 'hello', 'an empty chunk is no byte')
  const empty = await t.throwsAsync<QuotadError>(readFrame(chunks(), 5))
  t.is(empty?.code, 'E_BAD_FRAME')
})

test('redialer backoff doubles from min, caps at max, with equal jitter', t => {
  const at = (random: number): Redialer => new Redialer({
    seeds: [], dial: async () => 'x', isConnected: () => false, selfId: 'me', minBackoffMs: 250, maxBackoffMs: 10_000, random: () => random
  })
  const low = at(0)
  const high = at(0.999999)
  t.deepEqual([1, 2, 3, 4, 5, 6, 7, 8].map(f => low.backoff(f)), [125, 250, 500, 1000, 2000, 4000, 5000, 5000])
  t.deepEqual([1, 2, 3, 6, 7, 50].map(f => high.backoff(f)), [250, 500, 1000, 8000, 10_000, 10_000])
})

test('redialer: seeds are capped by seedMaxBackoffMs under maxBackoffMs; the transport default is 1.5 s', t => {
  const at = (random: number, seedMaxBackoffMs?: number): Redialer => new Redialer({
    seeds: [], dial: async () => 'x', isConnected: () => false, selfId: 'me', minBackoffMs: 250, maxBackoffMs: 10_000, random: () => random, seedMaxBackoffMs
  })
  t.deepEqual([1, 2, 3, 4, 5, 50].map(f => at(0.999999, 1500).backoff(f)), [250, 500, 1000, 1500, 1500, 1500])
  t.deepEqual([4, 50].map(f => at(0, 1500).backoff(f)), [750, 750], 'equal jitter: at least half the cap')
  t.deepEqual([6, 50].map(f => at(0.999999, 20_000).backoff(f)), [8000, 10_000], 'never above maxBackoffMs')
  t.is(TRANSPORT_DEFAULTS.seedMaxBackoffMs, 1500)
  t.is(TRANSPORT_DEFAULTS.seedMaxBackoffMs < TRANSPORT_DEFAULTS.maxBackoffMs, true)
})

test('redialer: a peer that connects ends every seed\'s wait: waiting seeds are dialled at once, failures kept', async t => {
  const events: Array<{ name: string, fields: Record<string, unknown> }> = []
  const dials: string[] = []
  let reachable = false
  const r = new Redialer({
    seeds: ['/ip4/10.0.0.1/tcp/1', '/ip4/10.0.0.2/tcp/1'],
    dial: async addr => { dials.push(addr); if (!reachable) throw new Error('unreachable'); return `id-${addr}` },
    isConnected: () => false,
    selfId: 'me',
    // A long wait: only peerConnected can make the next dial come before the deadline.
    minBackoffMs: 600_000,
    maxBackoffMs: 600_000,
    onEvent: (name, fields) => { events.push({ name, fields }) }
  })
  r.start()
  try {
    await waitFor('both seeds to fail once and wait', () => events.filter(e => e.name === 'redial-scheduled').length === 2)
    t.is(dials.length, 2)
    reachable = true
    r.peerConnected('some-peer')
    await waitFor('both seeds to be dialled again', () => dials.length === 4)
    t.deepEqual(events.filter(e => e.name === 'redial-now').map(e => e.fields.failures), [1, 1])
    t.deepEqual(r.snapshot().map(s => s.peerId), ['id-/ip4/10.0.0.1/tcp/1', 'id-/ip4/10.0.0.2/tcp/1'])
  } finally {
    r.stop()
  }
})
