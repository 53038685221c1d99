/**
 * The real thing: `quotad` and `quotactl` as processes, over a real Unix socket.
 */
import test from 'ava'
import { copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { QuotadError } from '../src/errors.js'
import { connect, QUOTACTL, QUOTAD, run, startQuotad, stop, tempDir, waitForLog, waitForSocket, writeCluster } from './helpers/proc.js'

// sliding-log, not fixed-window: a fixed hour would hand its tokens back at the top of the hour,
// in the middle of a test that happened to run then.
const RULES = [
  { name: 'payments', match: 'payments', limit: 5, per: '1h', algorithm: 'sliding-log' },
  { name: 'signups', match: 'signup:*', limit: 2, per: '1d', algorithm: 'sliding-log' }
]

test('a node serves acquires over its socket; quotactl prints JSON and exits 0 allowed, 1 denied', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, RULES)
  const proc = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => await stop(proc))
  await waitForSocket(socket, proc)
  t.is(statSync(socket).mode & 0o777, 0o660)

  const first = await run(QUOTACTL, ['--socket', socket, 'acquire', 'payments', '--count', '4', '--json'])
  t.is(first.code, 0, first.stderr)
  const d = JSON.parse(first.stdout)
  t.like(d, { allowed: true, remaining: 1, limit: 5, retryAfterMs: 0, rule: 'payments' })
  t.true(d.resetMs > 0 && d.resetMs <= 3_600_000)

  const denied = await run(QUOTACTL, ['--config', file, '--node', 'a', 'acquire', 'payments', '--count', '2', '--json'])
  t.is(denied.code, 1)
  t.like(JSON.parse(denied.stdout), { allowed: false, remaining: 1 })

  const text = await run(QUOTACTL, ['--socket', socket, 'acquire', 'signup:1.2.3.4'])
  t.is(text.code, 0)
  t.regex(text.stdout, /^allowed remaining=1 limit=2 /)

  const status = await run(QUOTACTL, ['--socket', socket, 'status', '--json'])
  t.is(status.code, 0)
  const s = JSON.parse(status.stdout)
  t.is(s.node, 'a')
  t.is(s.keys, 2)
  t.like(s.rules.find((r: { name: string }) => r.name === 'payments'), { allowed: 1, denied: 1 })

  // structured logs: every line is JSON
  for (const line of proc.stderr().trim().split('\n')) t.notThrows(() => JSON.parse(line))
})

test('quotactl: usage and connection errors exit 2 with a stable code', async t => {
  const dir = tempDir()
  const noSocket = await run(QUOTACTL, ['--socket', join(dir, 'none.sock'), 'ping', '--json'])
  t.is(noSocket.code, 2)
  t.is(JSON.parse(noSocket.stdout).error.code, 'E_CONNECTION')
  const badCount = await run(QUOTACTL, ['--socket', join(dir, 'none.sock'), 'acquire', 'k', '--count', '-1'])
  t.is(badCount.code, 2)
  t.regex(badCount.stderr, /E_USAGE/)
  const noCmd = await run(QUOTACTL, ['--socket', join(dir, 'none.sock')])
  t.is(noCmd.code, 2)
})

test('SIGTERM stops the node cleanly and removes its socket', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, RULES)
  const proc = startQuotad(['--config', file, '--node', 'a'])
  await waitForSocket(socket, proc)
  proc.child.kill('SIGTERM')
  const { code } = await proc.exited
  t.is(code, 0)
  t.false(existsSync(socket))
  t.regex(proc.stderr(), /"msg":"stopped"/)
})

test('SIGHUP reloads the rules; a bad new file is refused and the old rules stay', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, RULES)
  const proc = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => await stop(proc))
  await waitForSocket(socket, proc)
  const client = await connect(socket)
  t.teardown(async () => await client.close())
  t.is((await client.acquire('payments')).limit, 5)

  writeFileSync(file, readFileSync(file, 'utf8').replace('"limit": 5', '"limit": -1'))
  proc.child.kill('SIGHUP')
  await waitForLog(proc, 'reload refused')
  t.is((await client.acquire('payments')).limit, 5, 'old rules still in force')

  writeCluster(dir, [...RULES, { name: 'search', match: 'search', limit: 3, per: '1s', algorithm: 'token-bucket' }])
  proc.child.kill('SIGHUP')
  await waitForLog(proc, 'rules reloaded')
  t.like(await client.acquire('search', { count: 3 }), { allowed: true, limit: 3 })
  t.like(await client.acquire('payments'), { allowed: true, remaining: 2 }, 'unchanged rule kept its state: 3 spent of 5')
})

test('a second daemon is refused: E_DATA_DIR_LOCKED for the same node, E_SOCKET_IN_USE for a live socket; kill -9 leaves nothing in the way', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, RULES)
  const first = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => await stop(first))
  await waitForSocket(socket, first)
  const lock = join(dir, 'data/a/quotad.lock')
  const owner = readFileSync(lock, 'utf8')
  const second = startQuotad(['--config', file, '--node', 'a'])
  t.is((await second.exited).code, 2)
  t.regex(second.stderr(), /E_DATA_DIR_LOCKED/)
  t.regex(second.stderr(), new RegExp(`pid ${first.child.pid ?? 0}`))
  t.is(readFileSync(lock, 'utf8'), owner, 'the refused daemon left the lock alone')
  // Another data dir, the same socket: the socket is the live daemon's.
  const third = startQuotad(['--config', file, '--node', 'a', '--data-dir', join(dir, 'other')])
  t.is((await third.exited).code, 2)
  t.regex(third.stderr(), /E_SOCKET_IN_USE/)
  // kill -9 leaves the socket file and the lock behind: the next start takes both over.
  first.child.kill('SIGKILL')
  await first.exited
  t.true(existsSync(socket))
  t.true(existsSync(lock))
  const fourth = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => await stop(fourth))
  await waitForSocket(socket, fourth)
  const c = await connect(socket)
  t.true((await c.acquire('payments')).allowed)
  await c.close()
  t.regex(readFileSync(lock, 'utf8'), new RegExp(`"pid":${fourth.child.pid ?? 0}`))
})

test('quotad check-config reports every problem with its JSON path and exits 2', async t => {
  const dir = tempDir()
  const { file } = writeCluster(dir, [
    { name: 'x', match: 'x', limit: -1, per: '1s', algorithm: 'fixed-window' },
    { name: 'y', match: 'y', limit: 1, per: 'soon', algorithm: 'leaky' }
  ])
  const bad = await run(QUOTAD, ['check-config', file])
  t.is(bad.code, 2)
  t.regex(bad.stderr, /E_CONFIG_INVALID/)
  t.regex(bad.stderr, /rules\[0\]\.limit/)
  t.regex(bad.stderr, /rules\[1\]\.per/)
  t.regex(bad.stderr, /rules\[1\]\.algorithm/)
  // The shipped example, as a new user would check it: beside a key made by `quotad keygen`
  // (a fresh checkout has no swarm.key; the example names one relative to itself).
  const example = join(tempDir(), 'cluster.json')
  copyFileSync(new URL('../../cluster.example.json', import.meta.url), example)
  const noKey = await run(QUOTAD, ['check-config', example])
  t.is(noKey.code, 2)
  t.regex(noKey.stderr, /cluster\.secretFile: .*quotad keygen/)
  const keygen = await run(QUOTAD, ['keygen', join(dirname(example), 'swarm.key')])
  t.is(keygen.code, 0, keygen.stderr)
  const ok = await run(QUOTAD, ['check-config', example])
  t.is(ok.code, 0, ok.stderr)
})

test('quotad refuses to start on a bad config or an unknown node, naming the problem', async t => {
  const dir = tempDir()
  const { file } = writeCluster(dir, RULES)
  const unknown = await run(QUOTAD, ['--config', file, '--node', 'zz'])
  t.is(unknown.code, 2)
  t.regex(unknown.stderr, /E_CONFIG_INVALID/)
  const missing = await run(QUOTAD, ['--config', join(dir, 'nope.json'), '--node', 'a'])
  t.is(missing.code, 2)
  t.regex(missing.stderr, /E_CONFIG_READ/)
})

test('quotad keygen writes a standard pnet swarm key with mode 0600 and will not overwrite one', async t => {
  const dir = tempDir()
  const key = join(dir, 'swarm.key')
  t.is((await run(QUOTAD, ['keygen', key])).code, 0)
  const text = readFileSync(key, 'utf8')
  t.regex(text, /^\/key\/swarm\/psk\/1\.0\.0\/\n\/base16\/\n[0-9a-f]{64}$/)
  t.is(text.length, 95)
  t.is(statSync(key).mode & 0o777, 0o600)
  const again = await run(QUOTAD, ['keygen', key])
  t.is(again.code, 2)
  t.is(readFileSync(key, 'utf8'), text)
  t.is((await run(QUOTAD, ['keygen', key, '--force'])).code, 0)
  t.not(readFileSync(key, 'utf8'), text)
})

test('a waiting acquire over the socket is answered when tokens return', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, [
    { name: 'tb', match: 'tb', limit: 10, per: '1s', algorithm: 'token-bucket', burst: 1 },
    { name: 'hourly', match: 'hourly', limit: 1, per: '1h', algorithm: 'token-bucket', burst: 1 }
  ])
  const proc = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => await stop(proc))
  await waitForSocket(socket, proc)
  const c = await connect(socket)
  t.teardown(async () => await c.close())
  // Timed from before the bucket exists (its first acquire creates it, full): a bound on what it
  // may have given, whatever the machine's speed (a slow one only makes the bound looser).
  const started = performance.now()
  t.true((await c.acquire('tb')).allowed)
  // Each waits as long as it needs: generous, as a busy machine may answer late.
  const waited = await Promise.all([c.acquire('tb', { waitMs: 30_000 }), c.acquire('tb', { waitMs: 30_000 })])
  t.true(waited.every(d => d.allowed), 'both waiters were answered when tokens came back')
  const elapsed = performance.now() - started
  // The envelope of a token bucket: at most burst + rate * elapsed tokens (1 + 10/s here), so
  // the two waiters cannot have been given tokens that had not come back yet.
  const envelope = 1 + 10 * elapsed / 1000
  t.true(3 <= envelope + 0.01, `3 tokens given within ${elapsed.toFixed(0)} ms, the bucket allows ${envelope.toFixed(2)}`)
  // A wait shorter than the time the next token needs is answered denied. (A bucket that refills
  // once an hour: nothing a slow machine does can bring its token back within the wait.)
  t.true((await c.acquire('hourly')).allowed)
  const late = await c.acquire('hourly', { waitMs: 10 })
  t.false(late.allowed)
  const err = await t.throwsAsync<QuotadError>(c.acquire('tb', { waitMs: 10_000_000 }))
  t.is(err?.code, 'E_BAD_ARGUMENT')
})
