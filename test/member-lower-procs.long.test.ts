/**
 * A limit lowered while members hold tokens, on real processes (issue 43:
 * kill -9 member m2, `api` lowered 209 -> 113 while it was dead, the seeds
 * settled it, and a window admitted 139). Three seeds and two members share
 * `api`, 300 per 2 s, every node under load, so the members hold tokens the
 * seeds lent them. The file's limit goes down to 100 and every live node
 * reloads it (SIGHUP) under that load. Counting the admissions of every node
 * per window, no window that starts after the last reload admits more than
 * 100. In the second case m2 is killed (kill -9) under load first, the
 * limit is lowered while it is dead, and the seeds settle it: what it held
 * comes back to them under the lowered rule, and still no window admits
 * more than 100.
 *
 * Windows are 2 s on the daemons' own calendars (drive.ts), so a count does
 * not depend on how fast the machine is; a window is counted only if it
 * starts after the reloads were seen done (a later start only drops windows),
 * and the load goes on for 8 s after, so there are always some.
 *
 * In `npm run test:long` only (the file's `.long.test` name; bench/README.md,
 * "Seed counts"): load driven for fixed stretches over many windows on five
 * real processes, about 100 CPU-seconds; the simulator's twin (sim-member-lower.test.ts) runs in
 * `npm test`.
 */
import test, { type ExecutionContext } from 'ava'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { drive } from './helpers/drive.js'
import { waitForLog } from './helpers/proc.js'

const rules = (limit: number): unknown[] => [{ name: 'api', match: 'api', limit, per: '2s', algorithm: 'fixed-window', mode: 'hard' }]
const SEEDS = ['a', 'b', 'c']
const MEMBERS = ['m1', 'm2']
const WINDOW_S = 2

async function cluster (t: ExecutionContext, reclaimMs: number): Promise<TestCluster> {
  // Reclaim periods longer than the default 5 s: a node starved on a busy machine must not be attested dead.
  const c = await makeCluster(SEEDS, rules(300), { extraNodes: MEMBERS.map(name => ({ name, seed: false })), cluster: { reclaimMs } })
  t.teardown(async () => await c.stopAll())
  for (const n of [...SEEDS, ...MEMBERS]) await c.start(n)
  await waitForPeers(c, SEEDS, 2, 60_000)
  await waitForPeers(c, MEMBERS, 2, 60_000)
  return c
}

/** `fn`, and if it fails, which nodes stopped on their own (not killed here) and their last warnings: why a request failed. */
async function explained<T> (c: TestCluster, killed: string[], fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    const ended = Object.entries(c.procs).filter(([n, p]) => !killed.includes(n) && (p.child.exitCode !== null || p.stderr().includes('"msg":"stopping"')))
      .map(([n, p]) => `${n} (exit ${String(p.child.exitCode)}): ${p.stderr().split('\n').filter(l => /"level":"(warn|error)"|"msg":"stopping"/.test(l)).slice(-3).join(' / ')}`)
    throw new Error(`${String(err)}${ended.length === 0 ? '' : `; ${ended.join('; ')}`}`)
  }
}

const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

/** Lower the file's limit to 100 and SIGHUP `nodes`; resolves once each has logged the reload, with the time it saw the last. */
async function lower (c: TestCluster, nodes: string[]): Promise<number> {
  c.setRules(rules(100))
  for (const n of nodes) c.procs[n].child.kill('SIGHUP')
  for (const n of nodes) await waitForLog(c.procs[n], '"msg":"rules reloaded"')
  return Date.now()
}

/** The windows (by end, s) that start at or after `fromMs`. */
function after (windows: Map<number, number>, fromMs: number): Array<[number, number]> {
  return [...windows].filter(([end]) => (end - WINDOW_S) * 1000 >= fromMs).sort((x, y) => x[0] - y[0])
}

/** Every window after the reloads admitted at most the lowered 100, over several windows, and the cluster still admits. */
function checkAfter (t: ExecutionContext, windows: Map<number, number>, reloadedAt: number): void {
  const counted = after(windows, reloadedAt)
  t.log(`windows after the reloads (end s, admitted): ${JSON.stringify(counted)}`)
  t.true(counted.length >= 3, 'the load ran over several windows after the change')
  for (const [end, n] of counted) t.true(n <= 100, `window ending ${end}: ${n} admitted of 100`)
  // The cluster still admits under the lowered limit (the tokens were not lost in the change).
  t.true(counted.some(([, n]) => n > 0), 'something was admitted after the change')
}

test.serial('3 seeds + 2 members under load, 300 lowered to 100 by SIGHUP: no window after it over 100', async t => {
  t.timeout(300_000)
  // Nothing is settled here.
  const c = await cluster(t, 30_000)
  const all = [...SEEDS, ...MEMBERS]
  const windows = new Map<number, number>()
  const reloadedAt = await explained(c, [], async () => {
    await drive(c, all, 4000, windows)
    // The load goes on while every node reloads, so the members hold tokens at the change.
    const [, at] = await Promise.all([drive(c, all, 6000, windows), (async () => { await sleep(1000); return await lower(c, all) })()])
    await drive(c, all, 8000, windows)
    return at
  })
  checkAfter(t, windows, reloadedAt)
})

test.serial('m2 killed under load, 300 lowered to 100 while it is dead, the seeds settle it: no window after the change over 100', async t => {
  t.timeout(300_000)
  const c = await cluster(t, 10_000)
  const live = ['a', 'b', 'c', 'm1']
  const windows = new Map<number, number>()
  const reloadedAt = await explained(c, ['m2'], async () => {
    await drive(c, [...live, 'm2'], 4000, windows)
    // m2 dies holding what it was lent: its client's load goes on until the kill (then its requests fail).
    const m2load = drive(c, ['m2'], 5000, new Map()).catch(() => undefined)
    const load = drive(c, live, 4000, windows)
    await sleep(1000)
    c.procs.m2.child.kill('SIGKILL')
    await c.procs.m2.exited
    await Promise.all([m2load, load])
    const [, at] = await Promise.all([drive(c, live, 4000, windows), lower(c, live)])
    // The seeds settle m2's dead incarnation (a quorum attests it) while the load goes on.
    const settled = (async () => { for (const s of SEEDS) await waitForLog(c.procs[s], 'settled a dead incarnation', 120_000) })()
    while (!(await Promise.race([settled.then(() => true), sleep(0).then(() => false)]))) await drive(c, live, 2000, windows)
    await settled
    await drive(c, live, 8000, windows)
    return at
  })
  checkAfter(t, windows, reloadedAt)
})
