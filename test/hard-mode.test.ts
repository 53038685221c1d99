/**
 * Real quotad processes: one daemon per data directory, and a stop signal
 * during start-up. The ways hard mode once overshot, on real processes, are
 * in hard-mode.long.test.ts (`npm run test:long`; the simulator runs them in
 * `npm test`: sim-old-bugs.test.ts).
 *
 * Nothing here asserts on elapsed time: each test waits for a condition (with
 * a generous deadline) and asserts on counts.
 */
import test from 'ava'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { makeCluster, type TestCluster } from './helpers/cluster-procs.js'
import { startQuotad, waitForLog } from './helpers/proc.js'

const day = (limit: number): unknown[] => [{ name: 'api', match: 'api', limit, per: '1d', algorithm: 'fixed-window' }]

async function withClient<T> (c: TestCluster, node: string, f: (q: QuotadClient) => Promise<T>): Promise<T> {
  const q = await QuotadClient.connect({ socketPath: c.sockets[node] })
  try { return await f(q) } finally { await q.close() }
}

type Status = { cluster: { start: string, phase: string }, ruleAgreement: Array<{ name: string, hash: string, shared: boolean, agree: string[] }> }

async function status (c: TestCluster, node: string): Promise<Status> {
  return await withClient(c, node, async q => await q.status() as unknown as Status)
}

test.serial('one daemon per data directory: a second quotad for a running node is refused before it touches the state file', async t => {
  const c = await makeCluster(['a', 'b'], day(90))
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  const stateFile = join(c.dir, 'data/a/quotad-state.json')
  const before = readFileSync(stateFile, 'utf8')
  const second = startQuotad(['--config', c.file, '--node', 'a', '--listen', '/ip4/127.0.0.1/tcp/0', '--socket', join(c.dir, 'a2.sock')])
  t.is((await second.exited).code, 2)
  t.regex(second.stderr(), /E_DATA_DIR_LOCKED/)
  t.is(readFileSync(stateFile, 'utf8'), before)
  t.true((await withClient(c, 'a', async q => await q.acquire('api'))).allowed, 'the running node is untouched')
})

test.serial('SIGTERM at any moment of start-up is a clean stop: exit 0 and the next start is clean', async t => {
  const c = await makeCluster(['a', 'b'], day(90))
  t.teardown(async () => await c.stopAll())
  const stateFile = join(c.dir, 'data/a/quotad-state.json')
  const args = ['--config', c.file, '--node', 'a', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'debug']
  // As soon as quotad has begun (node itself must boot first): before, or while, it reads its files.
  const early = startQuotad(args)
  await waitForLog(early, '"starting"', 30_000)
  early.child.kill('SIGTERM')
  t.is((await early.exited).code, 0, early.stderr())
  t.true(!existsSync(stateFile) || JSON.parse(readFileSync(stateFile, 'utf8')).status === 'stopped')
  // Once the state file says "running" and libp2p is starting. A start that finishes within 1.8 s of the signal
  // stops cleanly; one that does not (a busy machine) is ended by the signal then (signals.ts: SIGTERM stops a
  // start within 2 s whatever it is doing), and the next start is an unclean one that recovers its books.
  const mid = startQuotad(args)
  await waitForLog(mid, 'cluster state', 30_000)
  mid.child.kill('SIGTERM')
  const ended = await mid.exited
  await c.start('a')
  if (ended.code === 0) {
    t.is((await status(c, 'a')).cluster.start, 'clean-restart', mid.stderr())
  } else {
    t.is(ended.signal, 'SIGTERM', mid.stderr())
    t.regex(mid.stderr(), /stopped during the start/)
    t.is((await status(c, 'a')).cluster.start, 'unclean-restart')
  }
})
