/**
 * Envoy's Rate Limit Service on a cluster of 3 real quotad processes, each
 * serving the RLS on its own Unix socket (--grpc), asked by a real gRPC
 * client: the cluster's hard cap holds for Envoy's descriptors as for any
 * rule, however the calls fall over the nodes, for a descriptor with a value
 * (one key, split over the seeds) and one without (a bucket per value, each
 * starting whole at its home node and moved on demand).
 *
 * The limit is a sliding log over an hour, so no window turns over during
 * the test; nothing asserts on elapsed time (every wait has a generous
 * deadline).
 */
import test from 'ava'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { RlsClient } from '../src/envoy/rls-client.js'
import { desc } from './helpers/envoy.js'
import { eventually } from './helpers/proc.js'

const LIMIT = 30

/** Ask every node in turn until `enough` are admitted, then `settleRounds` more rounds; the total admitted. */
async function drain (clients: RlsClient[], entries: Array<[string, string]>, enough: number, settleRounds = 10, deadlineMs = 90_000): Promise<number> {
  const deadline = Date.now() + deadlineMs
  let total = 0
  let after = 0
  while (Date.now() < deadline) {
    for (const c of clients) {
      while ((await c.shouldRateLimit({ domain: 'edge', descriptors: [desc(...entries)] })).overall_code === 'OK') total++
    }
    if (total >= enough && after++ >= settleRounds) break
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  return total
}

test.serial('a cluster of 3: the hard cap holds across nodes for Envoy descriptors, with and without a value', async t => {
  t.timeout(300_000)
  const c: TestCluster = await makeCluster(['a', 'b', 'c'], [{ name: 'hourly', match: 'hourly', limit: LIMIT, per: '1h', algorithm: 'sliding-log' }])
  const cfg = JSON.parse(readFileSync(c.file, 'utf8')) as Record<string, unknown>
  cfg.envoy = { domains: [{ domain: 'edge', descriptors: [{ key: 'api', value: 'orders', rule: 'hourly' }, { key: 'user', rule: 'hourly' }] }] }
  writeFileSync(c.file, JSON.stringify(cfg, null, 2))
  const clients: RlsClient[] = []
  t.teardown(async () => {
    for (const cl of clients) cl.close()
    await c.stopAll()
  })
  for (const n of c.names) await c.start(n, { args: ['--grpc', `unix:${join(c.dir, `${n}-rls.sock`)}`] })
  await waitForPeers(c, c.names, 2)
  for (const n of c.names) clients.push(new RlsClient(`unix:${join(c.dir, `${n}-rls.sock`)}`))

  const exact = await drain(clients, [['api', 'orders']], LIMIT * 2 / 3)
  t.true(exact <= LIMIT, `${exact} admitted for api=orders on a limit of ${LIMIT} per hour`)
  t.true(exact >= LIMIT * 2 / 3, `the cluster serves most of its quota (${exact})`)
  const perValue = await drain(clients, [['user', 'alice']], LIMIT * 2 / 3)
  t.true(perValue <= LIMIT, `${perValue} admitted for user=alice on a limit of ${LIMIT} per hour`)
  t.true(perValue >= LIMIT * 2 / 3, `the cluster serves most of alice's quota (${perValue})`)
  // Another value is another bucket, with its own limit: bob is admitted where alice no longer is. (A node
  // that is not bob's home may deny his first call while his tokens are on their way: ask round the nodes.)
  let turn = 0
  t.true(await eventually('user=bob admitted', async () => (await clients[turn++ % clients.length].shouldRateLimit({ domain: 'edge', descriptors: [desc(['user', 'bob'])] })).overall_code === 'OK'))
})
