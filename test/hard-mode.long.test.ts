/**
 * Real quotad processes: the three ways hard mode once overshot (a restart
 * with a changed rule, a reload that lowers a limit, a node stopping under
 * load). In `npm run test:long` only (issue 44: ~40 CPU-s of six to nine
 * real processes each; bench/README.md, "Seed counts"): `npm test` runs the
 * same three on the simulator, against today's code and with each old bug
 * put back (test/sim-old-bugs.test.ts), and hard-mode.test.ts keeps the
 * real-process tests that have no simulator twin.
 *
 * Nothing here asserts on elapsed time: each test waits for a condition (with
 * a generous deadline) and asserts on counts. Where a test must show that
 * nothing MORE is admitted, it keeps asking for a while after the cluster has
 * settled; a slow machine makes that weaker, never flaky.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { stop } from './helpers/proc.js'

const day = (limit: number): unknown[] => [{ name: 'api', match: 'api', limit, per: '1d', algorithm: 'fixed-window' }]

async function withClient<T> (c: TestCluster, node: string, f: (q: QuotadClient) => Promise<T>): Promise<T> {
  const q = await QuotadClient.connect({ socketPath: c.sockets[node] })
  try { return await f(q) } finally { await q.close() }
}

/** Acquire `api` one at a time at `node` until `n` are admitted or one is denied; returns how many were. */
async function take (c: TestCluster, node: string, n: number): Promise<number> {
  return await withClient(c, node, async q => {
    let got = 0
    while (got < n && (await q.acquire('api')).allowed) got++
    return got
  })
}

/**
 * Keep asking every node for `api` until `enough` are admitted, then go on for
 * `settleRounds` more rounds (100 ms apart) so that anything the cluster
 * should not admit has every chance to be. Returns the total admitted.
 */
async function drain (c: TestCluster, nodes: string[], enough: number, settleRounds = 20, deadlineMs = 60_000): Promise<number> {
  const deadline = Date.now() + deadlineMs
  let total = 0
  let after = 0
  while (Date.now() < deadline) {
    for (const n of nodes) total += await take(c, n, 1000)
    if (total >= enough && after++ >= settleRounds) break
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  return total
}

type Status = { cluster: { start: string, phase: string }, ruleAgreement: Array<{ name: string, hash: string, shared: boolean, agree: string[] }> }

async function status (c: TestCluster, node: string): Promise<Status> {
  return await withClient(c, node, async q => await q.status() as unknown as Status)
}

/** Wait until every node enforces the same `api` rule (not `old`) and sees the others agree; returns its hash. */
async function agreed (c: TestCluster, old?: string, deadlineMs = 30_000): Promise<string> {
  const deadline = Date.now() + deadlineMs
  while (true) {
    const all = await Promise.all(c.names.map(async n => await status(c, n)))
    const hashes = new Set(all.map(s => s.ruleAgreement.find(r => r.name === 'api')?.hash))
    const [hash] = hashes
    if (hashes.size === 1 && hash !== undefined && hash !== old && all.every(s => s.ruleAgreement.find(r => r.name === 'api')?.agree.length === c.names.length - 1)) return hash
    if (Date.now() > deadline) throw new Error(`rules never agreed: ${JSON.stringify(all.map(s => s.ruleAgreement))}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

test.serial('a clean restart with a changed rule keeps the day\'s count: 30 spent on 90, restarted at 93, at most 63 more', async t => {
  // The drain below may take long on a loaded machine (once, at load average 17-18, it had 33 of its 40 after 60 s).
  t.timeout(300_000)
  const c = await makeCluster(['a', 'b', 'c'], day(90))
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 2)
  t.is(await take(c, 'a', 30), 30)
  await Promise.all(c.names.map(async n => await stop(c.procs[n])))
  c.setRules(day(93))
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 2)
  for (const n of c.names) t.is((await status(c, n)).cluster.start, 'clean-restart')
  await agreed(c)
  // Before the fix: 93 more (123 in one day on a limit of 93).
  const more = await drain(c, c.names, 40, 20, 180_000)
  t.true(more <= 63, `${more} admitted after the restart; 30 + ${more} > 93`)
  // Should this fail again, what each node said of itself then is the place to start.
  const said = more >= 40 ? '' : JSON.stringify(await Promise.all(c.names.map(async n => await withClient(c, n, async q => await q.status()))))
  t.true(more >= 40, `the restarted cluster still serves its quota (${more}); status: ${said}`)
})

test.serial('a reload that lowers a limit below what the day has used admits nothing more; raising it again admits only the difference', async t => {
  const c = await makeCluster(['a', 'b', 'c'], day(90))
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 2)
  // a uses more than its own share (30): tokens move to it from b and c.
  let used = 0
  const deadline = Date.now() + 30_000
  while (used < 45 && Date.now() < deadline) {
    used += await take(c, 'a', 45 - used)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  t.is(used, 45)
  const first = await agreed(c)
  c.setRules(day(30))
  for (const n of c.names) c.procs[n].child.kill('SIGHUP')
  const lowered = await agreed(c, first)
  const after = await drain(c, c.names, 0)
  t.is(after, 0, `the day has used ${used} of a new limit of 30: nothing more`)
  // 60 now: at most 60 - used more over the whole cluster.
  c.setRules(day(60))
  for (const n of c.names) c.procs[n].child.kill('SIGHUP')
  await agreed(c, lowered)
  const raised = await drain(c, c.names, 5)
  t.true(raised <= 15, `${used} + ${raised} > 60`)
  t.true(raised >= 5, `the raised limit is usable (${raised})`)
})

test.serial('nodes stopping and restarting under load never create tokens (a stopping node serves no want after its snapshot)', async t => {
  const c = await makeCluster(['a', 'b'], day(100))
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 1)
  let admitted = 0
  for (let round = 0; round < 3; round++) {
    // b spends while a stops: b's wants reach a stopping a.
    const stopping = stop(c.procs.a)
    admitted += await take(c, 'b', 8)
    await stopping
    admitted += await take(c, 'b', 8)
    await c.start('a')
    await waitForPeers(c, c.names, 1)
    t.is((await status(c, 'a')).cluster.start, 'clean-restart')
    admitted += await take(c, 'a', 8)
  }
  admitted += await drain(c, c.names, 80 - admitted)
  t.true(admitted <= 100, `${admitted} admitted in one day on a limit of 100`)
})
