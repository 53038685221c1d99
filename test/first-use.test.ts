/**
 * The first request for a glob key at a node that is not its home (issue
 * 13): served by a short wait for the home's grant, not denied while quota
 * is left. Real processes; the wait's bound is set generous here
 * (`cluster.firstUseWaitMs`) so a busy machine cannot fail the test: what it
 * checks is that the request is served, not how fast.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { homeNode } from '../src/core/share.js'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'

const RULES = [{ name: 'sig', match: 'sig:*', limit: 5, per: '1d', algorithm: 'fixed-window' }]

test.serial('a glob key never used here is served on its first request at every node, and a key with no quota left is still denied', async t => {
  t.timeout(180_000)
  const names = ['a', 'b', 'c']
  const c = await makeCluster(names, RULES, { cluster: { firstUseWaitMs: 10_000 } })
  t.teardown(async () => await c.stopAll())
  for (const n of names) await c.start(n)
  await waitForPeers(c, names, 2)
  const clients = Object.fromEntries(await Promise.all(names.map(async n => [n, await QuotadClient.connect({ socketPath: c.sockets[n], timeoutMs: 30_000 })] as const)))
  t.teardown(async () => { await Promise.all(Object.values(clients).map(async q => await q.close())) })

  const keys = Array.from({ length: 12 }, (_, i) => `sig:${i}`)
  const away = keys.map(k => names.filter(n => n !== homeNode(k, names)).length).reduce((a, b) => a + b, 0)
  t.is(away, 24, 'each key is new at two nodes that are not its home')
  const denied: string[] = []
  for (const k of keys) {
    for (const n of names) {
      // No waitMs: the README's own example.
      const d = await clients[n].acquire(k)
      if (!d.allowed) denied.push(`${k}@${n} (home ${homeNode(k, names)}, retryAfterMs ${d.retryAfterMs})`)
    }
  }
  t.deepEqual(denied, [], 'every first request was served')

  // A key whose whole stock is spent at its home: a first request elsewhere has nothing to wait for.
  const k = 'sig:spent'
  const home = homeNode(k, names) as string
  const other = names.find(n => n !== home) as string
  for (let i = 0; i < 5; i++) t.true((await clients[home].acquire(k)).allowed)
  // (Its view of the home may still show the stock unspent: then it waits out the bound before the denial.)
  const d = await clients[other].acquire(k)
  t.false(d.allowed, 'no tokens anywhere: denied, as an exact limiter would')
})
