/**
 * A seed started while its wall clock was 10 s behind, whose clock is then
 * set right (chaos seed 8: a restart during a clock fault). Its calendar
 * read the wrong clock at the start and follows the right one only at a
 * safe slew (500 ppm forward: 10 s would take 5.5 hours), so before, it
 * stayed fenced for hard rules all that time, its share idle. Now, once a
 * quorum of seeds agrees with its wall clock and not its calendar, it
 * starts a new incarnation in-process whose calendar reads the wall clock
 * (fence.ts `realign`, daemon.ts `renew`): unfenced, and admitting again,
 * on the same socket. Simulator: scenarios clock-restart-behind and
 * clock-restart-ahead.
 */
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import test from 'ava'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { faketimeFileEnv, faketimeLib } from './helpers/faketime.js'
import { connect, eventually, waitForLog } from './helpers/proc.js'

const lib = faketimeLib()
const RULES = [{ name: 'api', match: 'api', limit: 300, per: '20s', algorithm: 'fixed-window' }]

interface Lease { skewed?: boolean, skewOffsetMs?: number, valid?: boolean }
interface Status { cluster?: { lease?: Lease, renewals?: { count?: number, last?: { why?: string } | null } } }

;(lib === undefined ? test.skip : test)('a seed started on a wrong clock realigns its calendar once the clock is set right', async t => {
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  const clock = path.join(c.dir, 'c.faketime')
  writeFileSync(clock, '-10s\n')
  await c.start('a')
  await c.start('b')
  await c.start('c', { env: faketimeFileEnv(lib as string, clock) })
  await waitForPeers(c, ['a', 'b'], 2)
  const cc = await connect(c.sockets.c)
  t.teardown(async () => await cc.close())
  await eventually('c judged skewed', async () => {
    const s = await cc.status() as Status
    return s.cluster?.lease?.skewed === true ? true : undefined
  })
  t.false((await cc.acquire('api')).allowed, 'skewed: nothing of a hard rule')
  // The clock is set right (NTP stepping it): the calendar lags it by 10 s.
  writeFileSync(clock, '+0s\n')
  await waitForLog(c.procs.c, 'starting a new incarnation in-process, whose calendar reads the wall clock')
  const s = await eventually('c renewed, agreeing and holding its lease', async () => {
    const x = await cc.status() as Status
    const l = x.cluster?.lease
    return (x.cluster?.renewals?.count ?? 0) >= 1 && l?.skewed === false && l.valid === true ? x : undefined
  })
  t.regex(s.cluster?.renewals?.last?.why ?? '', /calendar/)
  t.true(Math.abs(s.cluster?.lease?.skewOffsetMs ?? Infinity) <= 500, `offset ${String(s.cluster?.lease?.skewOffsetMs)}`)
  // The same socket serves the new incarnation, which spends again.
  const allowed = await eventually('c admits again', async () => (await cc.acquire('api')).allowed ? true : undefined)
  t.true(allowed)
  t.false(c.procs.c.stderr().includes('E_RECLAIMED'), 'a realignment is not a reclaim')
})
