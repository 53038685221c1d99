/** A one-node file needs only nodes: [{ name, socket, dataDir }] and rules: no cluster section, key or listen. */
import test from 'ava'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { QUOTAD, run, startQuotad, stop, tempDir, waitForSocket } from './helpers/proc.js'

test('the minimal one-node file checks and runs', async t => {
  const dir = tempDir()
  const file = join(dir, 'one.json')
  writeFileSync(file, JSON.stringify({
    nodes: [{ name: 'solo', socket: 'solo.sock', dataDir: 'data' }],
    rules: [{ name: 'api', match: 'api', limit: 2, per: '1h', algorithm: 'fixed-window' }]
  }))
  const check = await run(QUOTAD, ['check-config', file])
  t.is(check.code, 0, check.stderr)
  const p = startQuotad(['--config', file, '--node', 'solo'])
  t.teardown(async () => await stop(p))
  await waitForSocket(join(dir, 'solo.sock'), p, 30_000)
  const c = await QuotadClient.connect({ socketPath: join(dir, 'solo.sock') })
  t.teardown(async () => await c.close())
  t.true((await c.acquire('api')).allowed)
  t.true((await c.acquire('api')).allowed)
  t.false((await c.acquire('api')).allowed)
})

test('a file with two nodes still needs the cluster section and listen addresses', async t => {
  const dir = tempDir()
  const file = join(dir, 'two.json')
  writeFileSync(file, JSON.stringify({
    nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'a' }, { name: 'b', socket: 'b.sock', dataDir: 'b' }],
    rules: [{ name: 'api', match: 'api', limit: 2, per: '1h', algorithm: 'fixed-window' }]
  }))
  const check = await run(QUOTAD, ['check-config', file])
  t.is(check.code, 2)
  t.regex(check.stderr, /E_CONFIG_INVALID/)
  t.regex(check.stderr, /cluster/)
  t.regex(check.stderr, /nodes\[0\]\.listen/)
})
