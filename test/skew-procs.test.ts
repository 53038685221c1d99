/**
 * A node whose wall clock is 10 s off (20x maxClockSkewMs) on real
 * processes: once it hears a quorum of seeds disagree with its calendar, it
 * fences itself for hard rules (fence.ts `judgeSkew`) and says so in status
 * and its log. Before, it went unnoticed though peers measured the offset,
 * and load on it alone admitted 600 in a real 20 s window of a 300 per 20 s
 * rule.
 */
import test from 'ava'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { faketimeEnv, faketimeLib } from './helpers/faketime.js'
import { connect, eventually, waitForLog } from './helpers/proc.js'

const lib = faketimeLib()
const RULES = [{ name: 'api', match: 'api', limit: 300, per: '20s', algorithm: 'fixed-window' }]

;(lib === undefined ? test.skip : test)('a seed 10 s off fences itself for hard rules; the others go on', async t => {
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  await c.start('c', { env: faketimeEnv(lib as string, '+10s') })
  await waitForPeers(c, ['a', 'b'], 2)
  const cc = await connect(c.sockets.c)
  t.teardown(async () => await cc.close())
  // The last lease status seen, for the timeout's message (what the fence judged, if not this).
  let last: unknown
  const lease = await eventually('c judged skewed', async () => {
    const s = await cc.status() as { cluster?: { lease?: { skewed?: boolean, skewOffsetMs?: number } } }
    last = s.cluster?.lease
    return s.cluster?.lease?.skewed === true ? s.cluster.lease : undefined
  }, undefined, () => last)
  t.true(Math.abs(lease.skewOffsetMs ?? 0) > 5000, `offset ${String(lease.skewOffsetMs)}`)
  await waitForLog(c.procs.c, 'clock is off from a quorum of seeds')
  let allowed = 0
  for (let i = 0; i < 50; i++) if ((await cc.acquire('api')).allowed) allowed++
  t.is(allowed, 0, 'a skewed node spends nothing of a hard rule')
  const ca = await connect(c.sockets.a)
  t.teardown(async () => await ca.close())
  t.true((await ca.acquire('api')).allowed, 'a node in agreement still admits')
})
