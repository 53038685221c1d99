/**
 * Over a real Unix socket: filling the key table with one glob rule's keys
 * leaves another glob rule its share, and exact keys are never refused.
 */
import test from 'ava'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import type { QuotadError } from '../src/errors.js'
import { validateClusterFile } from '../src/config/validate.js'
import { Daemon } from '../src/daemon.js'
import { silentLogger } from '../src/util/log.js'
import { tempDir } from './helpers/proc.js'

test('a glob rule flooding the key table leaves the other rules their keys', async t => {
  const dir = tempDir()
  const config = validateClusterFile({
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data' }],
    cluster: { name: 't', secretFile: 'swarm.key' },
    rules: [
      { name: 'payments', match: 'payments', limit: 100, per: '1s', algorithm: 'fixed-window' },
      { name: 'signup', match: 'signup:*', limit: 5, per: '1d', algorithm: 'fixed-window' },
      { name: 'mail', match: 'mail:*', limit: 5, per: '1d', algorithm: 'fixed-window', maxKeys: 10 }
    ],
    limits: { maxKeys: 100 }
  }, dir)
  const d = await Daemon.start({ config, node: 'a', logger: silentLogger })
  t.teardown(async () => await d.stop())
  const c = await QuotadClient.connect({ socketPath: join(dir, 'a.sock') })
  t.teardown(async () => await c.close())
  // signup's share: 100 / 2 glob rules = 50 keys; spent keys stay (their tokens come back at midnight).
  let full = 0
  for (let i = 0; i < 200; i++) {
    try { await c.acquire(`signup:${i}`) } catch (err) { if ((err as QuotadError).code === 'E_KEY_TABLE_FULL') full++; else throw err }
  }
  t.is(full, 150, 'signup got its 50 keys and no more')
  for (let i = 0; i < 10; i++) t.true((await c.acquire(`mail:${i}`)).allowed, `mail:${i}`)
  const err = await t.throwsAsync(c.acquire('mail:10'))
  t.is((err as QuotadError).code, 'E_KEY_TABLE_FULL')
  t.true((await c.acquire('payments')).allowed, 'the exact key is never refused')
})
