/**
 * A lowered limit plus an inherited seed, on real processes (it admitted 167
 * a window on a limit of 100, for good). Three seeds share `api`, 300 per
 * 2 s. c is killed for good and a inherits it; the file's limit goes down to
 * 100 and a and b reload it (SIGHUP) while c is dead; then c comes back from
 * its data directory with the new file. From then on no window admits more
 * than 100: a carries c's share through the change (rule-change.ts
 * `inheritedShares`), and c's return does not end what a owes.
 *
 * In `npm run test:long` only (issue 44: ~26 CPU-s; bench/README.md, "Seed
 * counts"): `npm test` runs the same orders of events on the simulator
 * (sim-inherit-lower.test.ts, and the property test's inherit-lower-return
 * and inherit-chain).
 */
import test from 'ava'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { drive } from './helpers/drive.js'
import { eventually, waitForLog } from './helpers/proc.js'
import { nodeStatus } from './helpers/settle.js'

const rules = (limit: number): unknown[] => [{ name: 'api', match: 'api', limit, per: '2s', algorithm: 'fixed-window', mode: 'hard' }]

test.serial('3 seeds, c inherited, 300 lowered to 100 while c is dead, c back: no window over 100', async t => {
  t.timeout(300_000)
  const seeds = ['a', 'b', 'c']
  const c = await makeCluster(seeds, rules(300), { cluster: { leaseMs: 2000, reclaimMs: 3000, inheritSeeds: true } })
  t.teardown(async () => await c.stopAll())
  for (const n of seeds) await c.start(n)
  await waitForPeers(c, seeds, 2, 60_000)
  await drive(c, seeds, 1000, new Map())

  c.procs.c.child.kill('SIGKILL')
  await c.procs.c.exited
  await eventually('a to inherit c', async () => {
    const s = await nodeStatus(c.sockets.a) as { cluster?: { heir?: { estates?: Array<{ node: string }> } } }
    return s.cluster?.heir?.estates?.some(e => e.node === 'c') === true
  }, 60_000)

  c.setRules(rules(100))
  for (const n of ['a', 'b']) {
    c.procs[n].child.kill('SIGHUP')
    await waitForLog(c.procs[n], '"msg":"rules reloaded"')
  }
  await c.start('c')
  await waitForPeers(c, ['a', 'b'], 2, 60_000)

  const windows = new Map<number, number>()
  await drive(c, seeds, 9000, windows)
  t.log(`windows (end s, admitted): ${JSON.stringify([...windows])}`)
  t.true(windows.size >= 3, 'the load ran over several windows')
  for (const [end, n] of windows) t.true(n <= 100, `window ending ${end}: ${n} admitted of 100`)
})
