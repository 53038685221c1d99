/**
 * Nobody stays dead by mistake (issue 43, item 5), on real processes: 3
 * seeds and 2 members, `api` 100 per 2 s (hard), leaseMs 2 s, reclaimMs 3 s.
 *
 * - Two of three seeds stopped (SIGSTOP) past reclaimMs: on the old code
 *   they attested both live members on resume and the members stayed
 *   fenced, admitting nothing, for good. Now the members admit again.
 * - A member paused past reclaimMs is settled: it learns it, starts a new
 *   incarnation in-process (`new incarnation` in its log), its socket
 *   answers throughout, and it admits again; it never exits.
 * - A seed killed (-9) and restarted from its data directory after its heir
 *   inherited it admits again (how long it took is logged: the issue's
 *   bound is reclaimMs + 2 s, measured here, not asserted).
 *
 * In each, no window admits more than the limit across the nodes (the
 * answers counted by their window: drive.ts).
 *
 * In `npm run test:long` only (the file's `.long.test` name; bench/README.md,
 * "Seed counts"): five real processes under load for fixed stretches, about
 * 135 CPU-seconds. `npm test` keeps its simulator twin (sim-alive.test.ts)
 * and, on real processes, the same in-process renewal path through a
 * calendar realignment (clock-realign-procs.test.ts).
 */
import test, { type ExecutionContext } from 'ava'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { drive } from './helpers/drive.js'
import { connect, eventually, waitForLog } from './helpers/proc.js'
import { nodeStatus } from './helpers/settle.js'

const LIMIT = 100
const RECLAIM_MS = 3000
const rules = [{ name: 'api', match: 'api', limit: LIMIT, per: '2s', algorithm: 'fixed-window', mode: 'hard' }]
const SEEDS = ['a', 'b', 'c']
const MEMBERS = ['m1', 'm2']

async function cluster (t: ExecutionContext): Promise<TestCluster> {
  const c = await makeCluster(SEEDS, rules, { extraNodes: MEMBERS.map(name => ({ name, seed: false })), cluster: { leaseMs: 2000, reclaimMs: RECLAIM_MS, inheritSeeds: true } })
  t.teardown(async () => await c.stopAll())
  for (const n of [...SEEDS, ...MEMBERS]) await c.start(n)
  await waitForPeers(c, SEEDS, 4, 60_000)
  await waitForPeers(c, MEMBERS, 3, 60_000)
  return c
}

/** `node` admits at least one acquire (tried every 100 ms); the ms it took. */
async function admitsAgain (c: TestCluster, node: string, windows: Map<number, number>, ms = 120_000): Promise<number> {
  const t0 = Date.now()
  await eventually(`${node} to admit again`, async () => (await drive(c, [node], 300, windows)).size > 0, ms)
  return Date.now() - t0
}

function noneExited (t: ExecutionContext, c: TestCluster): void {
  for (const [n, p] of Object.entries(c.procs)) t.is(p.child.exitCode, null, `${n} is still running`)
}

function withinLimit (t: ExecutionContext, windows: Map<number, number>): void {
  t.log(`windows (end s, admitted): ${JSON.stringify([...windows])}`)
  for (const [end, n] of windows) t.true(n <= LIMIT, `window ending ${end}: ${n} admitted of ${LIMIT}`)
}

test.serial('two of three seeds stopped past reclaimMs: the members admit again, no process exits', async t => {
  t.timeout(300_000)
  const c = await cluster(t)
  const windows = new Map<number, number>()
  await drive(c, [...SEEDS, ...MEMBERS], 3000, windows)
  for (const s of ['b', 'c']) c.procs[s].child.kill('SIGSTOP')
  await drive(c, ['a', ...MEMBERS], RECLAIM_MS + 3000, windows)
  for (const s of ['b', 'c']) c.procs[s].child.kill('SIGCONT')
  for (const m of MEMBERS) t.log(`${m} admits again ${await admitsAgain(c, m, windows)} ms after SIGCONT (or sooner)`)
  await drive(c, [...SEEDS, ...MEMBERS], 4000, windows)
  noneExited(t, c)
  withinLimit(t, windows)
})

test.serial('a member paused past reclaimMs is settled, starts a new incarnation in-process, answers throughout and admits again', async t => {
  t.timeout(300_000)
  const c = await cluster(t)
  const windows = new Map<number, number>()
  await drive(c, [...SEEDS, ...MEMBERS], 3000, windows)
  const before = await nodeStatus(c.sockets.m1) as { cluster?: { incarnation?: number } }
  c.procs.m1.child.kill('SIGSTOP')
  await drive(c, [...SEEDS, 'm2'], RECLAIM_MS + 3000, windows)
  c.procs.m1.child.kill('SIGCONT')
  // Its socket answers every call, every 50 ms, until it has admitted again as a new incarnation.
  const q = await connect(c.sockets.m1)
  let calls = 0
  let renewedAt = 0
  const t0 = Date.now()
  try {
    await eventually('m1 to log a new incarnation and admit again', async () => {
      calls++
      const d = await q.acquire('api')
      if (d.allowed) {
        const end = Math.round((Date.now() + d.resetMs) / 1000)
        windows.set(end, (windows.get(end) ?? 0) + 1)
      }
      if (renewedAt === 0 && c.procs.m1.stderr().includes('"msg":"new incarnation"')) renewedAt = Date.now() - t0
      await new Promise(resolve => setTimeout(resolve, 50))
      return renewedAt > 0 && d.allowed
    }, 120_000)
  } finally {
    await q.close()
  }
  t.log(`m1: new incarnation logged ${renewedAt} ms after SIGCONT, admitting again ${Date.now() - t0} ms after; ${calls} calls, all answered`)
  await waitForLog(c.procs.m1, '"msg":"new incarnation"')
  const after = await nodeStatus(c.sockets.m1) as { cluster?: { incarnation?: number, renewals?: { count: number, last: { why: string } | null } } }
  t.true((after.cluster?.incarnation ?? 0) > (before.cluster?.incarnation ?? Infinity), `a new incarnation: ${before.cluster?.incarnation} -> ${after.cluster?.incarnation}`)
  // At least one: on a starved machine the new incarnation can itself go silent past reclaimMs and be settled again.
  t.true((after.cluster?.renewals?.count ?? 0) >= 1, 'status counts it')
  t.regex(after.cluster?.renewals?.last?.why ?? '', /attests this incarnation dead/, 'a reclaim, not a realigned calendar')
  await drive(c, [...SEEDS, ...MEMBERS], 3000, windows)
  noneExited(t, c)
  withinLimit(t, windows)
})

test.serial('a seed killed (-9) and restarted from its data directory after its heir inherited it admits again', async t => {
  t.timeout(300_000)
  const c = await cluster(t)
  const windows = new Map<number, number>()
  await drive(c, [...SEEDS, ...MEMBERS], 3000, windows)
  c.procs.c.child.kill('SIGKILL')
  await c.procs.c.exited
  await eventually('c to be inherited', async () => {
    const s = await nodeStatus(c.sockets.a) as { cluster?: { heir?: { homes?: Record<string, string> } } }
    return s.cluster?.heir?.homes?.c !== undefined
  }, 60_000)
  const t0 = Date.now()
  await c.start('c')
  const serving = Date.now() - t0
  const took = await admitsAgain(c, 'c', windows)
  t.log(`c: restarted (serving) in ${serving} ms, then admitting again ${took} ms later (reclaimMs ${RECLAIM_MS}; the issue's bound: reclaimMs + 2 s after the restart)`)
  await drive(c, [...SEEDS, ...MEMBERS], 3000, windows)
  noneExited(t, c)
  withinLimit(t, windows)
})
