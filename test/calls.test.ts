/**
 * Call sessions (transport/calls.ts) over in-memory streams, where a test can
 * write any bytes a peer could: garbage frames, oversized headers, more calls
 * than a responder holds. The real libp2p path is in transport.test.ts.
 */
import test from 'ava'
import type { Stream } from '@libp2p/interface'
import type { QuotadError } from '../src/errors.js'
import { CallSessions, callCounters, MAX_CALL_BYTES, MAX_CALLS_IN_FLIGHT, MAX_LATE_CALLS, type CallOptions } from '../src/cluster/transport/calls.js'
import { encodeCallFrame, readCallFrames } from '../src/cluster/transport/framing.js'

/** An async queue of chunks; `end(err)` makes its reader throw err after what is queued. */
class Chan implements AsyncIterable<Uint8Array> {
  private q: Uint8Array[] = []
  private done = false
  private err: Error | null = null
  private wake: (() => void) | null = null
  push (c: Uint8Array): void { if (!this.done) { this.q.push(c); this.kick() } }
  end (err?: Error): void { if (this.done) return; this.done = true; this.err = err ?? null; this.kick() }
  private kick (): void { const w = this.wake; this.wake = null; w?.() }
  async * [Symbol.asyncIterator] (): AsyncGenerator<Uint8Array> {
    for (;;) {
      if (this.q.length > 0) { yield this.q.shift() as Uint8Array; continue }
      if (this.done) { if (this.err !== null) throw this.err; return }
      await new Promise<void>(resolve => { this.wake = resolve })
    }
  }
}

/** Two ends of an in-memory stream; `abort` on either ends both directions with an error. */
function pipe (): [Stream, Stream, { aborted: Error[] }] {
  const ab = new Chan()
  const ba = new Chan()
  const seen = { aborted: [] as Error[] }
  const end = (inbox: Chan, outbox: Chan): Stream => ({
    source: inbox,
    sink: async (src: AsyncIterable<Uint8Array>) => { for await (const c of src) outbox.push(c); outbox.end() },
    abort: (err: Error) => { seen.aborted.push(err); inbox.end(err); outbox.end(err) }
  }) as unknown as Stream
  return [end(ba, ab), end(ab, ba), seen]
}

function sessions (handler: CallOptions['handler'], open: CallOptions['open'] = async () => { throw new Error('no open') }): CallSessions & { counters: ReturnType<typeof callCounters> } {
  const counters = callCounters()
  const s = new CallSessions({ open, handler, inboundTimeoutMs: 10_000, counters, emit: () => {} }) as CallSessions & { counters: ReturnType<typeof callCounters> }
  s.counters = counters
  return s
}

/** A caller and a responder joined by in-memory streams (a new pipe per session the caller opens). */
function pair (handler: CallOptions['handler']): { caller: ReturnType<typeof sessions>, responder: ReturnType<typeof sessions> } {
  const responder = sessions(handler)
  const caller = sessions(() => new Uint8Array(0), async () => {
    const [mine, theirs] = pipe()
    void responder.serve(theirs, 'caller')
    return mine
  })
  return { caller, responder }
}

const text = (b: Uint8Array): string => Buffer.from(b).toString()

async function until (what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 5))
  }
}

test('framing: call frames split across chunks and joined in one are read whole, in order; bad headers are errors', async t => {
  const frames = [encodeCallFrame(1, Buffer.from('one')), encodeCallFrame(0xffffffff, new Uint8Array(0)), encodeCallFrame(7, Buffer.from('seven'))]
  const all = Buffer.concat(frames)
  const read = async (chunks: Uint8Array[], max = 64): Promise<Array<[number, string]>> => {
    const out: Array<[number, string]> = []
    const source = (async function * () { yield * chunks })()
    for await (const f of readCallFrames(source, max)) out.push([f.id, text(f.data)])
    return out
  }
  const want: Array<[number, string]> = [[1, 'one'], [0xffffffff, ''], [7, 'seven']]
  t.deepEqual(await read([all]), want, 'joined')
  t.deepEqual(await read([...all].map(b => Uint8Array.of(b))), want, 'a byte at a time')
  t.deepEqual(await read([]), [], 'no frames')
  const code = async (chunks: Uint8Array[], max = 64): Promise<string | undefined> => (await t.throwsAsync<QuotadError>(read(chunks, max)))?.code
  t.is(await code([encodeCallFrame(1, new Uint8Array(100))]), 'E_FRAME_TOO_LARGE', 'refused from the header alone')
  t.is(await code([Uint8Array.of(0)]), 'E_BAD_FRAME', 'too short for its id')
  t.is(await code([Uint8Array.of(2, 0x80, 0x80)]), 'E_BAD_FRAME', 'an id that runs past its frame')
  t.is(await code([Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x80, 0x01)]), 'E_BAD_FRAME', 'a length longer than a 32-bit varint')
  t.is(await code([Uint8Array.of(0x88, 0x27)], 4096), 'E_FRAME_TOO_LARGE', 'a header of 5000 bytes, before its body')
  // Small ids and short payloads take a byte of header each.
  t.is(encodeCallFrame(5, Buffer.from('abc')).byteLength, 5)
  t.is(encodeCallFrame(300, new Uint8Array(200)).byteLength, 2 + 2 + 200)
  t.is(await code([all.subarray(0, all.byteLength - 2)]), 'E_BAD_FRAME', 'the source ends inside a frame')
})

test('calls: answered by id in any order on one session; a timed-out call leaves the session, its late answer is ignored', async t => {
  const { caller, responder } = pair(async (_from, data) => {
    const n = Number(text(data))
    await new Promise(resolve => setTimeout(resolve, (20 - (n % 20)) * 3))
    return Buffer.from(`${n * 2}`)
  })
  const answers = await Promise.all(Array.from({ length: 100 }, async (_, i) => text(await caller.call('p', Buffer.from(`${i}`), 30_000))))
  t.deepEqual(answers, Array.from({ length: 100 }, (_, i) => `${i * 2}`))
  t.like(caller.counters, { callsOut: 100, callSessionsOpened: 1, callErrors: 0 })
  t.like(responder.counters, { callsIn: 100, callSessionsServed: 1, callsInFailed: 0 })
  // 19 waits 3 ms at the responder; a 1 ms deadline passes first (the caller's timer), and its answer comes to no one
  const late = await t.throwsAsync<QuotadError>(caller.call('p', Buffer.from('19'), 1))
  t.is(late?.code, 'E_TIMEOUT')
  t.is(text(await caller.call('p', Buffer.from('5'), 30_000)), '10')
  t.is(caller.counters.callSessionsOpened, 1)
})

test('calls: a session reuses the lowest free id; a timed-out call\'s id waits for its late answer; past MAX_LATE_CALLS the session resets', async t => {
  const seen: number[] = []
  const inbox: Array<{ id: number, data: Uint8Array }> = []
  let theirs: Stream | null = null
  const back = new Chan()
  const caller = sessions(() => new Uint8Array(0), async () => {
    const [mine, other] = pipe()
    theirs = other
    void other.sink(back as never)
    void (async () => { for await (const f of readCallFrames(other.source, MAX_CALL_BYTES)) { seen.push(f.id); inbox.push(f) } })().catch(() => {})
    return mine
  })
  const answer = (id: number, body: string): void => { back.push(encodeCallFrame(id, Buffer.from(body))) }
  const a = caller.call('p', Buffer.from('a'), 30_000)
  await until('a', () => inbox.length === 1)
  answer(inbox[0].id, 'A')
  t.is(text(await a), 'A')
  const b = caller.call('p', Buffer.from('b'), 30_000)
  await until('b', () => inbox.length === 2)
  answer(inbox[1].id, 'B')
  t.is(text(await b), 'B')
  t.deepEqual(seen, [0, 0], 'an answered call\'s id is the next call\'s')
  // c times out unanswered: its id is not given to d, whose answer must never be c's.
  t.is((await t.throwsAsync<QuotadError>(caller.call('p', Buffer.from('c'), 1)))?.code, 'E_TIMEOUT')
  const d = caller.call('p', Buffer.from('d'), 30_000)
  await until('d', () => inbox.length === 4)
  t.deepEqual(seen, [0, 0, 0, 1])
  answer(0, 'late C')
  answer(1, 'D')
  t.is(text(await d), 'D', 'the late answer to c settled nothing')
  const e = caller.call('p', Buffer.from('e'), 30_000)
  await until('e', () => inbox.length === 5)
  t.is(seen[4], 0, 'c\'s id is free again once its late answer came')
  answer(0, 'E')
  t.is(text(await e), 'E')
  t.is(caller.counters.callSessionsOpened, 1)
  // MAX_LATE_CALLS + 1 calls time out unanswered: the session resets, and the next call opens a new one.
  await Promise.all(Array.from({ length: MAX_LATE_CALLS + 1 }, async () => await caller.call('p', Buffer.from('x'), 1).catch(() => {})))
  t.not(theirs, null)
  const f = caller.call('p', Buffer.from('f'), 30_000).catch((err: QuotadError) => err.code)
  await until('a new session', () => caller.counters.callSessionsOpened === 2)
  // f is never answered: stop fails it now rather than its 30 s timer keeping the worker (and the suite) waiting.
  caller.stop()
  t.is(await f, 'E_SHUTTING_DOWN')
})

test('calls: a garbage frame or an oversized header resets that session only; the responder serves the others', async t => {
  const responder = sessions((_from, data) => Buffer.from(`ok:${text(data)}`))
  // A frame with no room for its id; a header announcing 5000 bytes (above MAX_CALL_BYTES).
  for (const garbage of [Uint8Array.of(0), Uint8Array.of(0x88, 0x27)]) {
    const [mine, theirs, seen] = pipe()
    const served = responder.serve(theirs, 'rogue')
    const sink = mine.sink((async function * () { yield garbage; await new Promise(() => {}) })() as never).catch(() => {})
    await served
    t.is(seen.aborted.length, 1, 'the session was reset')
    void sink
  }
  t.is(responder.counters.callsInFailed, 2)
  // a well-behaved session to the same responder is served
  const caller = sessions(() => new Uint8Array(0), async () => {
    const [mine, theirs] = pipe()
    void responder.serve(theirs, 'good')
    return mine
  })
  t.is(text(await caller.call('r', Buffer.from('x'), 30_000)), 'ok:x')
})

test('calls: a handler that throws resets the session, failing its calls in flight; the next call opens a new session', async t => {
  let release = (): void => {}
  const held = new Promise<void>(resolve => { release = resolve })
  const { caller } = pair(async (_from, data) => {
    if (text(data) === 'throw') throw new Error('not a forward')
    if (text(data) === 'hold') await held
    return data
  })
  const holding = caller.call('p', Buffer.from('hold'), 30_000)
  await until('the held call to be in flight', () => caller.counters.callsOut === 1)
  const threw = await t.throwsAsync<QuotadError>(caller.call('p', Buffer.from('throw'), 30_000))
  t.is(threw?.code, 'E_CONNECTION')
  t.is((await t.throwsAsync<QuotadError>(holding))?.code, 'E_CONNECTION')
  release()
  t.is(text(await caller.call('p', Buffer.from('next'), 30_000)), 'next')
  t.is(caller.counters.callSessionsOpened, 2)
  t.is(caller.counters.callSessionResets, 1)
})

test('calls: a responder holds at most MAX_CALLS_IN_FLIGHT of a session, drops the rest unanswered and answers the others; stop fails what waits', async t => {
  let release = (): void => {}
  const held = new Promise<void>(resolve => { release = resolve })
  const { caller, responder } = pair(async (_from, data) => { await held; return data })
  const n = MAX_CALLS_IN_FLIGHT + 5
  let answered = 0
  const calls = Array.from({ length: n }, async (_, i) => await caller.call('p', Buffer.from(`${i}`), 60_000).then(b => { answered++; return text(b) }, (e: QuotadError) => e.code))
  await until('the responder to hold its bound and drop the rest', () => responder.counters.callsIn + responder.counters.callsDropped === n)
  t.is(responder.counters.callsIn, MAX_CALLS_IN_FLIGHT)
  t.is(responder.counters.callsDropped, 5)
  release()
  await until('the held calls answered', () => answered === MAX_CALLS_IN_FLIGHT)
  caller.stop()
  const got = await Promise.all(calls)
  t.deepEqual(got.slice(0, MAX_CALLS_IN_FLIGHT), Array.from({ length: MAX_CALLS_IN_FLIGHT }, (_, i) => `${i}`), 'the held ones answered, each its own')
  t.deepEqual(got.slice(MAX_CALLS_IN_FLIGHT), Array(5).fill('E_SHUTTING_DOWN'), 'the dropped ones waited, and failed at stop')
  t.is((await t.throwsAsync<QuotadError>(caller.call('p', Buffer.from('late'), 1000)))?.code, 'E_SHUTTING_DOWN')
  t.is((await t.throwsAsync<QuotadError>(caller.call('p', new Uint8Array(MAX_CALL_BYTES), 1000)))?.code, 'E_FRAME_TOO_LARGE')
})
