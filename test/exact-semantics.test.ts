/**
 * Exact-limiter semantics on real processes: a node with all the demand gets
 * the whole limit of a day-long fixed window (tokens held elsewhere come by
 * transfer while the request waits), and not one more.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'

test('3 nodes, limit 30 per day, all the demand on one node: it gets all 30, then is denied', async t => {
  const c = await makeCluster(['a', 'b', 'c'], [{ name: 'day', match: 'day', limit: 30, per: '1d', algorithm: 'fixed-window' }])
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 2)
  const q = await QuotadClient.connect({ socketPath: c.sockets.a })
  t.teardown(async () => await q.close())
  let admitted = 0
  const deadline = Date.now() + 60_000
  // Each request may wait for a transfer; on a busy machine a transfer can take longer than one wait.
  while (admitted < 30 && Date.now() < deadline) {
    if ((await q.acquire('day', { waitMs: 2000 })).allowed) admitted++
  }
  t.is(admitted, 30)
  const after = await q.acquire('day', { waitMs: 500 })
  t.false(after.allowed, 'not one more in the day')
})
