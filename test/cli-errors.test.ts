/**
 * Errors at the edges: each bad input gets its own stable code (asserted on
 * the code, never on the wording), and where a person needs the path or the
 * flag, the message names it. A start that cannot finish never spins, and a
 * SIGTERM during it ends the process.
 */
import test from 'ava'
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { QuotadError } from '@quotad/client'
import { loadClusterFile } from '../src/config/load.js'
import { Limiter } from '../src/core/limiter.js'
import { ErrorCodes } from '../src/errors.js'
import { limits, rule } from './helpers/rules.js'
import { PROC_DEADLINE_MS, QUOTACTL, QUOTAD, run, startQuotad, stop, tempDir, waitForLog, waitForSocket, writeCluster, type Run } from './helpers/proc.js'

const RULES = [
  { name: 'api', match: 'api:*', limit: 100, per: '1m', algorithm: 'sliding-window' },
  { name: 'apix', match: 'apix', limit: 100, per: '1m', algorithm: 'token-bucket' }
]

/** The stable code of a CLI's failure: from `--json` output, else from its `error E_...:` line. */
function codeOf (r: Run): string | undefined {
  const json = /^\{"error":.*$/m.exec(r.stdout)
  if (json !== null) return (JSON.parse(json[0]) as { error: { code: string } }).error.code
  return /^error (E_[A-Z_]+):/m.exec(r.stderr)?.[1]
}

function messageOf (r: Run): string {
  const json = /^\{"error":.*$/m.exec(r.stdout)
  return json !== null ? (JSON.parse(json[0]) as { error: { message: string } }).error.message : r.stderr
}

test('a socket path under a regular file: E_SOCKET_PATH naming the file, not E_INTERNAL', async t => {
  const dir = tempDir()
  const { file } = writeCluster(dir, RULES)
  writeFileSync(join(dir, 'plain'), 'x')
  const r = await run(QUOTAD, ['--config', file, '--node', 'a', '--socket', join(dir, 'plain', 'q.sock')])
  t.is(r.code, 2)
  t.is(codeOf(r), ErrorCodes.SOCKET_PATH, r.stderr)
  t.true(r.stderr.includes(join(dir, 'plain')))
  t.false(r.stderr.includes('    at '), 'no stack trace')
})

test('a socket path under /proc: E_SOCKET_PATH, and the start ends (it spun at 100% CPU in mkdir)', async t => {
  const dir = tempDir()
  const { file } = writeCluster(dir, RULES)
  // run() kills the process only after its deadline: a spin shows as code 99 or a signal, not 2.
  const r = await run(QUOTAD, ['--config', file, '--node', 'a', '--socket', '/proc/quotad-test/q.sock'])
  t.is(r.code, 2, r.stderr)
  t.is(codeOf(r), ErrorCodes.SOCKET_PATH)
  // The same for a data directory there (the same mkdir).
  const d = await run(QUOTAD, ['--config', file, '--node', 'a', '--data-dir', '/proc/quotad-test/data'])
  t.is(d.code, 2, d.stderr)
  t.is(codeOf(d), ErrorCodes.STATE_UNWRITABLE)
})

test('SIGTERM during a start that cannot finish ends the process', async t => {
  t.timeout(PROC_DEADLINE_MS * 2)
  const dir = tempDir()
  // A FIFO with no writer: reading the cluster file blocks for good, in libuv's thread pool.
  const fifo = join(dir, 'cluster.json')
  execFileSync('mkfifo', [fifo])
  const p = startQuotad(['--config', fifo, '--node', 'a'])
  t.teardown(() => { if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL') })
  await waitForLog(p, '"starting"')
  p.child.kill('SIGTERM')
  const exited = await Promise.race([p.exited, new Promise<null>(resolve => setTimeout(() => resolve(null), PROC_DEADLINE_MS).unref())])
  t.not(exited, null, `still running ${PROC_DEADLINE_MS} ms after SIGTERM: ${p.stderr()}`)
  t.is(exited?.signal, 'SIGTERM')
  t.regex(p.stderr(), /"msg":"stopped during the start"/)
})

test('E_CONNECTION asks whether quotad is running at the path', async t => {
  const sock = join(tempDir(), 'none.sock')
  const r = await run(QUOTACTL, ['--socket', sock, 'status', '--json'])
  t.is(r.code, 2)
  t.is(codeOf(r), ErrorCodes.CONNECTION)
  t.true(messageOf(r).includes(`is quotad running at ${sock}?`), messageOf(r))
})

test('E_NO_RULE names the closest rules', t => {
  const l = new Limiter({
    rules: [rule({ name: 'api', match: 'api:*', limit: 10, perMs: 1000 }), rule({ name: 'apix', limit: 10, perMs: 1000 }), rule({ name: 'zzz-other', limit: 10, perMs: 1000 })],
    limits: limits(),
    node: 'a'
  })
  const err = t.throws(() => l.acquire('apx', 1, 0), { instanceOf: QuotadError })
  t.is(err?.code, ErrorCodes.NO_RULE)
  const closest = (err?.details as { closest: string[] }).closest
  t.deepEqual(closest.slice(0, 2), ['apix', 'api'])
  t.true(err?.message.includes('apix'))
})

test('a bad --wait names --wait; an unknown flag gets "did you mean"', async t => {
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, RULES)
  const p = startQuotad(['--config', file, '--node', 'a'])
  t.teardown(async () => { await stop(p) })
  await waitForSocket(socket, p)
  // Too long for the node (limits.maxWaitMs): the node's E_BAD_ARGUMENT, said in the flag's name.
  const long = await run(QUOTACTL, ['--socket', socket, 'acquire', 'apix', '--wait', '99999999', '--json'])
  t.is(codeOf(long), ErrorCodes.BAD_ARGUMENT)
  t.true(messageOf(long).includes('--wait'), messageOf(long))
  const bad = await run(QUOTACTL, ['--socket', socket, 'acquire', 'apix', '--wait', '5s', '--json'])
  t.is(codeOf(bad), ErrorCodes.USAGE)
  t.true(messageOf(bad).includes('--wait'))
  const typo = await run(QUOTACTL, ['--socket', socket, 'acquire', 'apix', '--wiat', '5'])
  t.is(typo.code, 2)
  t.is(codeOf(typo), ErrorCodes.USAGE)
  t.true(typo.stderr.includes('did you mean --wait'), typo.stderr)
  const quotadTypo = await run(QUOTAD, ['--config', file, '--nod', 'a'])
  t.is(codeOf(quotadTypo), ErrorCodes.USAGE)
  t.true(quotadTypo.stderr.includes('did you mean --node'), quotadTypo.stderr)
})

test('bad JSON in the cluster file: E_CONFIG_READ with the line and column', async t => {
  const file = join(tempDir(), 'cluster.json')
  writeFileSync(file, '{"cluster": {"name": "t",\n  "secretFile": "swarm.key",,\n}}')
  const err = await t.throwsAsync(loadClusterFile(file), { instanceOf: QuotadError })
  t.is(err?.code, ErrorCodes.CONFIG_READ)
  t.like(err?.details, { line: 2, column: 29 })
  const cut = join(tempDir(), 'cut.json')
  writeFileSync(cut, '{"cluster": {\n  "name": "t"')
  const end = await t.throwsAsync(loadClusterFile(cut), { instanceOf: QuotadError })
  t.like(end?.details, { line: 2, column: 14 })
})

test('a busy --http port: E_HTTP_IN_USE, not E_CONFIG_INVALID', async t => {
  const busy = net.createServer()
  await new Promise<void>(resolve => busy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { busy.close() })
  const port = (busy.address() as net.AddressInfo).port
  const dir = tempDir()
  const { file } = writeCluster(dir, RULES)
  const r = await run(QUOTAD, ['--config', file, '--node', 'a', '--http', `127.0.0.1:${port}`])
  t.is(r.code, 2, r.stderr)
  t.is(codeOf(r), ErrorCodes.HTTP_IN_USE)
})

test('check-config counts in the singular: 1 node, 1 rule', async t => {
  const dir = tempDir()
  const { file } = writeCluster(dir, RULES.slice(0, 1))
  const r = await run(QUOTAD, ['check-config', file])
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /\(1 node, 1 rule\)/)
})
