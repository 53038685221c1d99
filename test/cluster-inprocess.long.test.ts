/**
 * In-process N-node harness: Daemons with real libp2p and real sockets.
 * In `npm run test:long` only (issue 44; bench/README.md, "Seed counts"):
 * in `npm test`, cluster.test.ts drives demand through one node of a real
 * cluster (tokens handed over, never over the limit at any reading), and the
 * simulator's property test the same on the same ClusterCore.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { startInProcess } from './helpers/in-process.js'
import { eventually } from './helpers/proc.js'

test('5 in-process nodes: demand on one node is served from the others\' shares, and nothing is created', async t => {
  t.timeout(240_000)
  const c = await startInProcess(['n1', 'n2', 'n3', 'n4', 'n5'], [{ name: 'day', match: 'day', limit: 100, per: '1d', algorithm: 'sliding-log' }])
  t.teardown(async () => await c.stop())
  const cores = [...c.daemons.values()].map(d => d.cluster?.core)
  await eventually('every node to see the 4 others', () => cores.every(core => (core?.peers.alive(performance.now()).length ?? 0) >= 4), 120_000)
  const client = await QuotadClient.connect({ socketPath: c.sockets.n1, timeoutMs: 30_000 })
  t.teardown(async () => await client.close())
  // Held over the nodes, read in one synchronous pass (one process: an instant), plus what n1 spent,
  // never exceeds the stock; a grant on its way is in neither, so this holds at every reading.
  let allowed = 0
  let worst = 0
  const check = (): void => {
    const held = cores.reduce((n, core) => n + (core?.limiter.existing('day')?.bucket.held ?? 0), 0)
    worst = Math.max(worst, held + allowed)
  }
  // n1 asks, ten at a time, until it has been given 90 of the day's 100: its own share is 20,
  // so at least 70 came from the others.
  await eventually('n1 to be given 90 tokens', async () => {
    const results = await client.batch(Array.from({ length: 10 }, () => ({ key: 'day' })))
    allowed += results.filter(r => 'allowed' in r && r.allowed).length
    check()
    if (allowed >= 90) return true
    await new Promise(resolve => setTimeout(resolve, 50))
    return false
  }, 120_000, () => ({ allowed }))
  t.true(allowed >= 90, `n1 admitted ${allowed} of a 100-token day, its own share being 20`)
  t.true(allowed <= 100)
  check()
  t.true(worst <= 100, `held + spent reached ${worst}`)
})
