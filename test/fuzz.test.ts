/**
 * 100,000 seeded fuzzed frames (test/helpers/fuzz-frames.ts) into a real
 * one-node Daemon over its real Unix socket, from 4 connections at once.
 * Every frame must get exactly one reply, every error reply a documented
 * code, none E_INTERNAL, and every frame written with a valid id must get it
 * back. A failing seed replays: the frames are a function of it.
 */
import test from 'ava'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { Daemon } from '../src/daemon.js'
import { validateClusterFile } from '../src/config/validate.js'
import { silentLogger } from '../src/util/log.js'
import { ErrorCodes } from '../src/errors.js'
import type { Reply } from '@quotad/client/wire'
import { fuzzFrames, type FuzzFrame } from './helpers/fuzz-frames.js'
import { Raw } from './helpers/socket-server.js'
import { tempDir } from './helpers/proc.js'

const SEED = Number(process.env.QUOTAD_FUZZ_SEED ?? 0x5eed)
const FRAMES = 100_000
const CONNECTIONS = 4
/** Frames written before waiting for their replies: keeps the test's own memory small. */
const WINDOW = 2000

const RULES = [
  { name: 'fz', match: 'fz:*', limit: 50, per: '1s', algorithm: 'token-bucket', burst: 50 },
  { name: 'k', match: 'k', limit: 1000, per: '1s', algorithm: 'sliding-window' },
  { name: 'pay', match: 'payments', limit: 5, per: '1h', algorithm: 'fixed-window' },
  { name: 'sig', match: 'signup:*', limit: 3, per: '1d', algorithm: 'sliding-log' }
]

const CODES = new Set<string>(Object.values(ErrorCodes))

test(`${FRAMES} fuzzed frames (seed ${SEED}): one reply each, a documented code, no E_INTERNAL, ids echoed`, async t => {
  const dir = tempDir()
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const config = validateClusterFile({
    cluster: { name: 'fuzz', secretFile: 'swarm.key' },
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data' }],
    rules: RULES,
    // Waiting acquires resolve quickly, so every reply comes within the test.
    limits: { maxWaitMs: 20 }
  }, dir)
  const daemon = await Daemon.start({ config, node: 'a', logger: silentLogger })
  t.teardown(async () => await daemon.stop())
  const socket = join(dir, 'a.sock')

  const frames: FuzzFrame[] = [...fuzzFrames(SEED, FRAMES)]
  const conns = await Promise.all(Array.from({ length: CONNECTIONS }, async () => await Raw.open(socket)))
  await Promise.all(conns.map(async (c, ci) => {
    const mine = frames.filter((_, i) => i % CONNECTIONS === ci)
    for (let at = 0; at < mine.length; at += WINDOW) {
      const part = mine.slice(at, at + WINDOW)
      c.socket.write(Buffer.concat(part.map(f => f.frame)))
      await c.waitFor(Math.min(at + WINDOW, mine.length), 30_000)
    }
  }))

  const replies: Reply[] = conns.flatMap(c => c.replies)
  t.is(replies.length, FRAMES, 'one reply per frame')
  const codes = new Map<string, number>()
  const badCodes: string[] = []
  const seen = new Set<number>()
  let nullIds = 0
  for (const r of replies) {
    const code = r.ok ? 'ok' : r.error.code
    codes.set(code, (codes.get(code) ?? 0) + 1)
    if (!r.ok && (!CODES.has(r.error.code) || typeof r.error.message !== 'string')) badCodes.push(JSON.stringify(r))
    if (r.id === null) nullIds++
    else seen.add(r.id)
  }
  t.log(`seed ${SEED}: ${[...codes].map(([c, n]) => `${c} ${n}`).join(', ')}`)
  t.deepEqual(badCodes, [])
  t.is(codes.get(ErrorCodes.INTERNAL) ?? 0, 0, 'no E_INTERNAL')
  t.is(daemon.server.stats().internalErrors, 0)
  const missing = frames.filter(f => typeof f.id === 'number' && !seen.has(f.id)).map(f => f.frame.toString('hex'))
  t.deepEqual(missing.slice(0, 5), [], `${missing.length} frames with a valid id got no reply carrying it`)
  t.true(nullIds >= frames.filter(f => f.id === null).length, 'frames without an id get id null')
  t.true((codes.get('ok') ?? 0) > 1000, 'the fuzzer also sends requests that succeed')
  for (const c of conns) c.destroy()
})
