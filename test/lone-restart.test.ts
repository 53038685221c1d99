/**
 * A lone node (a one-node file: how every user starts) keeps its counts
 * across restarts, on real processes: after spending 5 of 5 an hour, it
 * admits none more in that hour after SIGTERM and restart, and none after
 * kill -9 and restart (hard rules record spending ahead on disk:
 * node/spend-ahead.ts, node/lone-store.ts). A clean restart continues a
 * fixed window exactly; a rule with `pace` too (the state file keeps it).
 */
import test from 'ava'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connect, startQuotad, stop, tempDir, waitForSocket, type Proc } from './helpers/proc.js'

const RULES = [
  { name: 'api', match: 'api', limit: 5, per: '1h', algorithm: 'fixed-window' },
  { name: 'paced', match: 'paced', limit: 5, per: '1h', algorithm: 'fixed-window', pace: true },
  { name: 'ip', match: 'ip:*', limit: 3, per: '1d', algorithm: 'sliding-log' },
  { name: 'soft', match: 'soft', limit: 4, per: '1h', algorithm: 'fixed-window', mode: 'soft' }
]

function oneNode (): { file: string, socket: string } {
  const dir = tempDir()
  const file = join(dir, 'one.json')
  writeFileSync(file, JSON.stringify({ nodes: [{ name: 'solo', socket: 'solo.sock', dataDir: 'data' }], rules: RULES }))
  return { file, socket: join(dir, 'solo.sock') }
}

async function start (file: string, socket: string): Promise<Proc> {
  const p = startQuotad(['--config', file, '--node', 'solo'])
  await waitForSocket(socket, p)
  return p
}

/** How many of `n` acquires of `key` are allowed, one at a time. */
async function spend (socket: string, key: string, n: number): Promise<number> {
  const c = await connect(socket)
  try {
    let allowed = 0
    for (let i = 0; i < n; i++) if ((await c.acquire(key)).allowed) allowed++
    return allowed
  } finally {
    await c.close()
  }
}

test('a lone node: the hour\'s 5 of 5 stay spent through SIGTERM and kill -9 restarts', async t => {
  const { file, socket } = oneNode()
  let p = await start(file, socket)
  t.teardown(async () => await stop(p))
  t.is(await spend(socket, 'api', 8), 5)
  t.is(await spend(socket, 'paced', 8), 5)
  t.is(await spend(socket, 'ip:1.2.3.4', 5), 3)
  t.is(await spend(socket, 'soft', 6), 4)

  await stop(p)
  p = await start(file, socket)
  t.is(await spend(socket, 'api', 3), 0, 'after SIGTERM: none more in the hour')
  t.is(await spend(socket, 'paced', 3), 0, 'a paced rule too')
  t.is(await spend(socket, 'ip:1.2.3.4', 3), 0, 'a glob key too')
  t.is(await spend(socket, 'soft', 3), 0, 'a soft rule, saved at a clean stop')
  t.is(await spend(socket, 'ip:5.6.7.8', 4), 3, 'another key of the glob has its own 3')

  p.child.kill('SIGKILL')
  await p.exited
  p = await start(file, socket)
  t.is(await spend(socket, 'api', 3), 0, 'after kill -9: none more in the hour')
  t.is(await spend(socket, 'paced', 3), 0)
  t.is(await spend(socket, 'ip:1.2.3.4', 3), 0)
  t.is(await spend(socket, 'ip:5.6.7.8', 3), 0)

  p.child.kill('SIGKILL')
  await p.exited
  p = await start(file, socket)
  t.is(await spend(socket, 'api', 3), 0, 'after a second kill -9 in a row')
  t.is(await spend(socket, 'ip:5.6.7.8', 3), 0)
})

test('a lone node killed part way through a window admits at most the limit in it', async t => {
  const { file, socket } = oneNode()
  let p = await start(file, socket)
  t.teardown(async () => await stop(p))
  t.is(await spend(socket, 'api', 2), 2)
  p.child.kill('SIGKILL')
  await p.exited
  p = await start(file, socket)
  // What was spent stays spent; the unspent part of the last reservation may be lost, never handed out twice.
  const after = await spend(socket, 'api', 6)
  t.true(after <= 3, `admitted ${after} more after 2 of 5`)
  await stop(p)
  p = await start(file, socket)
  t.is(await spend(socket, 'api', 6), 0, 'a clean restart after it continues the window exactly')
})
