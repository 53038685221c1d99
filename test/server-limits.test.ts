/**
 * What one client can cost the server, over real Unix sockets: a client that
 * never reads (bounded bytes, no more work done for it, everything released
 * at close), the size of a status reply, and fairness between a flooding
 * connection and a quiet one. Assertions are on counts and bytes the server
 * reports, never on RSS or timing.
 */
import test from 'ava'
import { encodeMessage, type Reply } from '@quotad/client/wire'
import { STATUS_MAX_BYTES } from '../src/protocol/status-bound.js'
import { FRAMES_PER_TURN, WRITE_HIGH_WATER } from '../src/server/turn-budget.js'
import { FakeService, Raw, startServer, until } from './helpers/socket-server.js'

const MB = 1_000_000

/** A node with `keys` active keys of `chars` characters, listed the way the real status lists them. */
class BigStatusService extends FakeService {
  constructor (readonly keys: number, readonly chars: number) {
    super()
  }

  override status (): Record<string, unknown> {
    const keys = Array.from({ length: this.keys }, (_, i) => `${i}:`.padEnd(this.chars, 'k'))
    return {
      node: 'big',
      activeKeys: keys.map(key => ({ key, rule: 'r', held: 1, outstanding: 0 })),
      clusterKeys: keys.map(key => ({ key, rule: 'r', held: 1, rate: 0.5, clusterRemaining: 3, transfersIn: 0, transfersOut: 0 }))
    }
  }
}

/** Wait until `value()` is above 0 and then stops changing for `quietMs` (generous: the machine may be loaded). */
async function settle (value: () => number, quietMs = 500, maxMs = 20_000): Promise<number> {
  const deadline = Date.now() + maxMs
  while (value() === 0 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 10))
  let last = value()
  let since = Date.now()
  while (Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 25))
    const v = value()
    if (v !== last) {
      last = v
      since = Date.now()
    } else if (Date.now() - since >= quietMs) {
      break
    }
  }
  return last
}

test('a client that writes 100,000 status requests and never reads costs at most 8 MB, and nothing after close', async t => {
  const service = new BigStatusService(100, 200)
  const { server, path } = await startServer(t, { service })
  const hog = await Raw.open(path)
  hog.socket.pause() // never reads
  const one = encodeMessage({ id: 1, op: 'status' })
  const frames = Buffer.concat(Array.from({ length: 100_000 }, () => one))
  hog.socket.write(frames)

  const requests = await settle(() => server.connectionStats()[0]?.requests ?? 0)
  const [stats] = server.connectionStats()
  t.log(`answered ${requests} of 100,000 before stopping; peak ${stats.peakBufferedBytes} bytes held, ${stats.bufferedBytes} now`)
  t.true(stats.peakBufferedBytes <= 8 * MB, `peak ${stats.peakBufferedBytes}`)
  t.true(server.stats().peakConnectionBytes <= 8 * MB)
  // About WRITE_HIGH_WATER of replies plus what the kernel holds, then no more work for it.
  t.true(requests > 0 && requests < 1000, `${requests} requests answered for a client that reads nothing`)

  const other = await Raw.open(path)
  t.like(await other.request({ id: 2, op: 'ping' }), { id: 2, ok: true }, 'others are served meanwhile')

  hog.destroy()
  t.true(await until(() => server.stats().connections === 1), 'the server notices the close although it stopped reading')
  t.deepEqual(server.connectionStats().map(c => c.id), [server.connectionStats()[0].id])
  t.true(await until(() => server.scheduler.size === 0), 'a closed connection leaves the turn queue at its next turn')
  other.destroy()
})

test('a client that stops reading and then reads again gets every reply, in order', async t => {
  const { server, path } = await startServer(t, { service: new BigStatusService(100, 200) })
  const c = await Raw.open(path)
  c.socket.pause()
  const n = 1500 // about 40 MB of status replies: dozens of pauses at the high-water mark
  c.send(...Array.from({ length: n }, (_, i) => i % 3 === 0 ? { id: i, op: 'status' } : { id: i, op: 'acquire', key: `k${i % 5}` }))
  await settle(() => server.connectionStats()[0]?.requests ?? 0)
  t.true(server.connectionStats()[0].requests < n, 'paused before the end')
  c.socket.resume()
  const replies = await c.waitFor(n, 30_000)
  t.is(replies.length, n)
  t.deepEqual(replies.map(r => r.id), Array.from({ length: n }, (_, i) => i))
  t.true(server.stats().peakConnectionBytes <= 8 * MB)
  c.destroy()
})

test('pipelined acquires from a client that does not read: paused mid-chunk, bounded, then all answered', async t => {
  const { server, path } = await startServer(t)
  const c = await Raw.open(path)
  c.socket.pause()
  const frame = encodeMessage({ id: 1, op: 'acquire', key: 'x' })
  const n = 300_000
  c.socket.write(Buffer.concat(Array.from({ length: n }, () => frame)))
  const answered = await settle(() => server.connectionStats()[0]?.requests ?? 0)
  const peak = server.connectionStats()[0].peakBufferedBytes
  t.log(`answered ${answered} of ${n} while not reading; peak ${peak} bytes`)
  t.true(answered > 0 && answered < n)
  t.true(peak <= 2 * WRITE_HIGH_WATER + 512 * 1024, `peak ${peak}`)
  c.socket.resume()
  t.is((await c.waitFor(n, 30_000)).length, n)
  c.destroy()
})

test('a status reply is bounded and says when it was cut', async t => {
  const big = await startServer(t, { service: new BigStatusService(5000, 1000) })
  const c = await Raw.open(big.path)
  const raw: Buffer[] = []
  c.socket.on('data', (b: Buffer) => raw.push(b))
  const r = await c.request({ id: 1, op: 'status' }) as Reply & { status: Record<string, unknown> }
  t.true(r.ok)
  t.is(r.status.truncated, true)
  const bytes = Buffer.concat(raw).length
  t.true(bytes <= STATUS_MAX_BYTES, `${bytes} bytes`)
  t.true((r.status.activeKeys as unknown[]).length > 0, 'cut, not emptied')
  c.destroy()

  const small = await startServer(t, { service: new BigStatusService(100, 200) })
  const d = await Raw.open(small.path)
  const s = await d.request({ id: 2, op: 'status' }) as Reply & { status: Record<string, unknown> }
  t.is(s.status.truncated, undefined, 'a normal status goes out whole')
  t.is((s.status.activeKeys as unknown[]).length, 100)
  t.is((s.status.activeKeys as Array<{ key: string }>)[99].key.length, 200)
  d.destroy()
})

test('a quiet connection is answered while another floods, long before the flood is done', async t => {
  const { path } = await startServer(t)
  const flood = await Raw.open(path)
  const quiet = await Raw.open(path)
  const n = 40_000
  const frame = encodeMessage({ id: 1, op: 'acquire', key: 'f' })
  flood.socket.write(Buffer.concat(Array.from({ length: n }, () => frame)))
  // Once the server has started on the flood, the quiet connection asks once.
  t.true(await until(() => flood.replies.length > 0))
  const r = await quiet.request({ id: 7, op: 'ping' })
  const floodDone = flood.replies.length
  t.like(r, { id: 7, ok: true })
  t.log(`flood replies before the quiet one's: ${floodDone} of ${n}`)
  t.true(floodDone < n / 2, `the quiet request waited for ${floodDone} of ${n} flood requests`)
  t.is((await flood.waitFor(n, 30_000)).length, n, 'and the flood is answered in full')
  t.true(FRAMES_PER_TURN < n)
  flood.destroy()
  quiet.destroy()
})

test('a client that half-closes after a long pipeline gets every reply first', async t => {
  const { path } = await startServer(t)
  const c = await Raw.open(path)
  const n = 20_000
  const frame = encodeMessage({ id: 3, op: 'ping' })
  c.socket.end(Buffer.concat(Array.from({ length: n }, () => frame))) // shutdown(SHUT_WR) after the last request
  await c.closed
  t.is(c.replies.length, n, 'the requests held when the end arrived were answered, then the server closed')
})
