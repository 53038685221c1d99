/**
 * In-process N-node harness: Daemons with real libp2p and real sockets.
 */
import test from 'ava'
import { QuotadClient } from '../src/client/index.js'
import { startInProcess } from './helpers/in-process.js'

test('5 in-process nodes: demand on one node is served from the others\' shares, and nothing is created', async t => {
  const c = await startInProcess(['n1', 'n2', 'n3', 'n4', 'n5'], [{ name: 'day', match: 'day', limit: 100, per: '1d', algorithm: 'sliding-log' }])
  t.teardown(async () => await c.stop())
  const cores = [...c.daemons.values()].map(d => d.cluster?.core)
  // wait until every node sees the 4 others
  const deadline = Date.now() + 15_000
  while (cores.some(core => (core?.peers.alive(performance.now()).length ?? 0) < 4)) {
    if (Date.now() > deadline) return t.fail('the nodes did not all meet')
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  const client = await QuotadClient.connect({ socketPath: c.sockets.n1 })
  t.teardown(async () => await client.close())
  let allowed = 0
  for (let i = 0; i < 40 && allowed < 90; i++) {
    const results = await client.batch(Array.from({ length: 10 }, () => ({ key: 'day' })))
    allowed += results.filter(r => 'allowed' in r && r.allowed).length
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  t.true(allowed >= 90, `n1 admitted ${allowed} of a 100-token day, its own share being 20`)
  t.true(allowed <= 100)
  const held = cores.reduce((n, core) => n + (core?.limiter.existing('day')?.bucket.held ?? 0), 0)
  t.true(held + allowed <= 100, `held ${held} + spent ${allowed}`)
})
