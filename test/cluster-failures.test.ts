/**
 * Real quotad processes: rule disagreement, a peer sending garbage, a node
 * joining later, and restarts (clean and unclean) that must never create tokens.
 */
import test from 'ava'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import type { QuotadClient } from '@quotad/client'
import { parseSwarmKey } from '../src/config/swarm-key.js'
import { seedsTopic } from '../src/cluster/messages.js'
import { createTransport } from '../src/cluster/transport/libp2p-transport.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { connect, eventually, stop, waitForLog, tempDir } from './helpers/proc.js'
import { keyBooks, nodeStatus, settledHeld, type NodeStatus } from './helpers/settle.js'

// A window far longer than any run, so no boundary (spent tokens coming back) falls inside a
// test: with '1d' a run that crossed midnight UTC would see the day's spent tokens return.
const DAY = [{ name: 'day', match: 'day', limit: 90, per: '366d', algorithm: 'fixed-window' }]

// Real processes on a busy machine: every wait below is for a condition, with a
// deadline of a minute; the test's own timeout leaves room for several of them.
const SLOW = 240_000

async function withClient<T> (c: TestCluster, node: string, f: (q: QuotadClient) => Promise<T>): Promise<T> {
  const q = await connect(c.sockets[node])
  try { return await f(q) } finally { await q.close() }
}

async function remaining (c: TestCluster, node: string, key = 'day'): Promise<number> {
  return await withClient(c, node, async q => (await q.peek(key)).remaining)
}

async function status (c: TestCluster, node: string): Promise<NodeStatus> {
  return await nodeStatus(c.sockets[node])
}

/** The nodes' sockets, for settledHeld. */
function socketsOf (c: TestCluster, names: string[]): Record<string, string> {
  return Object.fromEntries(names.map(n => [n, c.sockets[n]]))
}

test.serial('a node whose rule differs does not share that rule\'s tokens, and says so', async t => {
  t.timeout(SLOW)
  const rules = [{ name: 'api', match: 'api', limit: 60, per: '366d', algorithm: 'fixed-window' }, ...DAY]
  const c = await makeCluster(['a', 'b', 'c'], rules)
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  // c runs with its own copy of the file (holding a's and b's addresses now) where `api` allows 90.
  const other = join(c.dir, 'cluster-c.json')
  writeFileSync(other, readFileSync(c.file, 'utf8').replace('"limit": 60', '"limit": 90'))
  await c.start('c', { config: other })
  await waitForPeers(c, c.names, 2)
  await eventually('a to see the disagreement', async () => {
    const s = await status(c, 'a')
    return s.ruleAgreement.find(r => r.name === 'api')?.differ.includes('c') === true
  })
  const sc = await eventually('c to see the disagreement with both', async () => {
    const s = await status(c, 'c')
    return s.ruleAgreement.find(r => r.name === 'api')?.differ.length === 2 && s
  })
  t.deepEqual(sc.ruleAgreement.find(r => r.name === 'api')?.differ.sort(), ['a', 'b'])
  t.true(sc.ruleAgreement.find(r => r.name === 'day')?.shared, 'the rules that agree are still shared')
  await waitForLog(c.procs.c, 'rule differs from peer')
  // c wants far more `api` than its own share: twice it runs dry and would ask for more.
  await withClient(c, 'c', async q => { for (let i = 0; i < 80; i++) await q.acquire('api') })
  await withClient(c, 'c', async q => { for (let i = 0; i < 20; i++) await q.acquire('api') })
  // Then more `day` than its own share. `day`, which agrees, moves to c: c's wants are being
  // served, so the cluster has had its chance to move `api` too (this, not a fixed sleep, is
  // what makes the "none" below mean something). A donor debits before it sends, so a grant
  // of `api` still on its way would show at a or b.
  await withClient(c, 'c', async q => { for (let i = 0; i < 45; i++) await q.acquire('day') })
  await eventually('day tokens to reach c', async () => keyBooks(await status(c, 'c'), 'day').transfersIn > 0)
  t.is(keyBooks(await status(c, 'c'), 'api').transfersIn, 0, 'c got no api tokens')
  for (const n of ['a', 'b']) t.is(keyBooks(await status(c, n), 'api').transfersOut, 0, `${n} gave no api tokens`)
})

test.serial('a peer sending garbage gossip is dropped and counted; the node keeps serving', async t => {
  t.timeout(SLOW)
  const c = await makeCluster(['a', 'b'], DAY)
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  const cfg = JSON.parse(readFileSync(c.file, 'utf8')) as { nodes: Array<{ name: string, listen: string }> }
  const rogue = await createTransport({
    listen: '/ip4/127.0.0.1/tcp/0',
    seeds: cfg.nodes.map(n => n.listen),
    psk: parseSwarmKey(readFileSync(join(c.dir, 'swarm.key'), 'utf8')),
    dataDir: join(tempDir(), 'rogue'),
    // The seeds' topic: every seed hears it (an insider holds the swarm key and may publish anywhere).
    topic: seedsTopic('test')
  })
  rogue.onGossip = () => {}
  rogue.onRequest = () => new Uint8Array(0)
  rogue.onPeer = () => {}
  await rogue.start()
  t.teardown(async () => await rogue.stop())
  const packr = new Packr({ useRecords: false })
  const garbage = [
    Uint8Array.from([0xc1, 0xff, 0x00]), // not msgpack
    packr.pack('a string, not a map'),
    packr.pack({ v: 1, t: 'gossip', node: 'evil', epoch: 'x', now: 1, rules: {}, keys: [['day', -5, 0, 0]], acks: [] }), // negative held
    packr.pack({ v: 1, t: 'gossip', node: 'evil', epoch: 'x', now: 1, rules: {}, keys: [['k'.repeat(10_000), 1, 0, 0]], acks: [] }), // key over the bound
    packr.pack({ v: 99, t: 'gossip' })
  ]
  // Publish the garbage (and an oversized message) again and again until a has counted every kind.
  const s = await eventually('a to count the garbage', async () => {
    for (const g of garbage) await rogue.publish(g).catch(() => 0)
    await rogue.publish(new Uint8Array(200 * 1024)).catch(() => 0) // oversized
    const s = await status(c, 'a')
    return s.cluster.counters.badMessages >= garbage.length && s
  })
  t.true(s.cluster.counters.badMessages >= garbage.length, `badMessages ${s.cluster.counters.badMessages}`)
  // still serving, still in the cluster, books intact
  t.true((await withClient(c, 'a', async q => await q.acquire('day'))).allowed)
  t.false(s.peers.some(p => p.name === 'evil' && p.alive))
  await waitForPeers(c, ['a', 'b'], 1)
  t.true((await status(c, 'a')).peers.some(p => p.name === 'b' && p.alive), 'b is still a live peer of a')
  const { total } = await settledHeld(socketsOf(c, ['a', 'b']), 'day')
  t.true(total <= 90, `no token created: ${total}`)
})

test.serial('a node started later, not a seed, joins through a seed and gets tokens by transfer only', async t => {
  t.timeout(SLOW)
  const c = await makeCluster(['a', 'b'], DAY, { extraNodes: [{ name: 'j', seed: false }] })
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  t.is((await settledHeld(socketsOf(c, ['a', 'b']), 'day')).total, 90, 'the seeds split the stock')
  await c.start('j')
  await waitForPeers(c, ['j'], 2)
  t.is(await remaining(c, 'j'), 0, 'a joiner starts with nothing')
  // Its first request waits (briefly, cluster.firstUseWaitMs) for a transfer instead of a denial; either way no token is made.
  let spent = (await withClient(c, 'j', async q => await q.acquire('day'))).allowed ? 1 : 0
  await eventually('tokens to reach j', async () => (await remaining(c, 'j')) > 0)
  // With a wait: idle, j returns what it does not use to its lenders (rebalance.ts), and on a busy machine the
  // moment between the peek and this acquire can be long enough for that; then it asks again, by transfer only.
  t.true((await withClient(c, 'j', async q => await q.acquire('day', { waitMs: 30_000 }))).allowed, 'j is served from tokens transferred to it')
  spent++
  const { total } = await settledHeld(socketsOf(c, ['a', 'b', 'j']), 'day')
  t.true(total + spent <= 90, `no token created: ${total} + ${spent} spent <= 90`)
})

test.serial('restarts never create tokens: a clean restart keeps the books, an unclean one recovers them from its journal for the next window', async t => {
  t.timeout(SLOW)
  // A long reclaimMs: this test is about restarts. With the default 5 s, a busy machine can take longer than that from
  // the kill to the restart; the seeds then attest b and its heir inherits it (heir.ts), and the restart drops what it
  // recovered and stops allocating: a different, correct outcome, tested in test/heir.test.ts and the simulator.
  const c = await makeCluster(['a', 'b', 'c'], DAY, { cluster: { reclaimMs: 120_000 } })
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  await withClient(c, 'a', async q => { for (let i = 0; i < 10; i++) t.true((await q.acquire('day')).allowed) })
  // a, having spent a third of its share at once, may be asking for more: the sum is read only
  // when no tokens are on their way (a plain sum can catch a grant in flight and see 50).
  const all = socketsOf(c, c.names)
  t.is((await settledHeld(all, 'day')).total, 80)

  // Clean: SIGTERM hands a's held tokens over; its 10 spent ones come back to it after restart (next window).
  await stop(c.procs.a)
  await c.start('a')
  const sa = await status(c, 'a')
  t.is(sa.cluster.start, 'clean-restart')
  t.true(sa.cluster.allocate)
  await waitForPeers(c, c.names, 2)
  t.is((await settledHeld(all, 'day')).total, 80, 'after a clean restart: the same 80, none created')

  // Unclean: kill -9. The restarted node recovers what it had from its journal (journal.ts), but as a
  // deferred credit for the next window: the crashed process may have spent any of it in this one.
  const bHad = (await settledHeld(all, 'day')).held.b
  c.procs.b.child.kill('SIGKILL')
  await c.procs.b.exited
  await c.start('b')
  const sb = await status(c, 'b')
  t.is(sb.cluster.start, 'unclean-restart')
  t.true(sb.cluster.allocate, 'it keeps its share (it allocates as before), deferred')
  // A key the journal never named (b's books were still its initial share: no transfer had touched them) comes back
  // as a deferred share, not as restored tokens (as in crash-recovery.test.ts). Seen on CI: b had 30, its share.
  const back = (sb.cluster.recovery?.restoredTokens ?? 0) + (sb.cluster.recovery?.deferredShares ?? 0)
  t.is(back, bHad, `b had ${bHad}; restored ${sb.cluster.recovery?.restoredTokens}, deferred as its share ${sb.cluster.recovery?.deferredShares}`)
  t.is(await remaining(c, 'b'), 0)
  await waitForPeers(c, c.names, 2)
  const after = await settledHeld(all, 'day')
  t.true(after.total <= 80 - bHad, `what b had is spendable nowhere this window, never created: ${JSON.stringify(after.held)}`)
})
