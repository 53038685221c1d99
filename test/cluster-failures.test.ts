/**
 * Real quotad processes: rule disagreement, a peer sending garbage, a node
 * joining later, and restarts (clean and unclean) that must never create tokens.
 */
import test from 'ava'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { QuotadClient } from '../src/client/index.js'
import { parseSwarmKey } from '../src/config/swarm-key.js'
import { createTransport } from '../src/cluster/transport/libp2p-transport.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { stop, waitForLog, tempDir } from './helpers/proc.js'

const DAY = [{ name: 'day', match: 'day', limit: 90, per: '1d', algorithm: 'fixed-window' }]

async function withClient<T> (c: TestCluster, node: string, f: (q: QuotadClient) => Promise<T>): Promise<T> {
  const q = await QuotadClient.connect({ socketPath: c.sockets[node] })
  try { return await f(q) } finally { await q.close() }
}

async function remaining (c: TestCluster, node: string, key = 'day'): Promise<number> {
  return await withClient(c, node, async q => (await q.peek(key)).remaining)
}

type Status = {
  cluster: { start: string, allocate: boolean, counters: { badMessages: number }, transport: Record<string, number> }
  peers: Array<{ name: string, alive: boolean }>
  ruleAgreement: Array<{ name: string, agree: string[], differ: string[], shared: boolean }>
  clusterKeys: Array<{ key: string, held: number, transfersIn: number, transfersOut: number }>
}

async function status (c: TestCluster, node: string): Promise<Status> {
  return await withClient(c, node, async q => await q.status() as unknown as Status)
}

async function eventually (t: { fail: (m: string) => void }, what: string, f: () => Promise<boolean>, ms = 8000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await f())) {
    if (Date.now() > deadline) { t.fail(`timed out waiting for ${what}`); return }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

test.serial('a node whose rule differs does not share that rule\'s tokens, and says so', async t => {
  const rules = [{ name: 'api', match: 'api', limit: 60, per: '1d', algorithm: 'fixed-window' }, ...DAY]
  const c = await makeCluster(['a', 'b', 'c'], rules)
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  // c runs with its own copy of the file (holding a's and b's addresses now) where `api` allows 90.
  const other = join(c.dir, 'cluster-c.json')
  writeFileSync(other, readFileSync(c.file, 'utf8').replace('"limit": 60', '"limit": 90'))
  await c.start('c', { config: other })
  await waitForPeers(c, c.names, 2)
  await eventually(t, 'a to see the disagreement', async () => {
    const s = await status(c, 'a')
    return s.ruleAgreement.find(r => r.name === 'api')?.differ.includes('c') === true
  })
  const sc = await status(c, 'c')
  t.deepEqual(sc.ruleAgreement.find(r => r.name === 'api')?.differ.sort(), ['a', 'b'])
  t.true(sc.ruleAgreement.find(r => r.name === 'day')?.shared, 'the rules that agree are still shared')
  await waitForLog(c.procs.c, 'rule differs from peer')
  // c wants far more `api` than its own share: it gets none from a or b.
  await withClient(c, 'c', async q => { for (let i = 0; i < 80; i++) await q.acquire('api') })
  await new Promise(resolve => setTimeout(resolve, 1500))
  await withClient(c, 'c', async q => { for (let i = 0; i < 20; i++) await q.acquire('api') })
  const after = await status(c, 'c')
  t.is(after.clusterKeys.find(k => k.key === 'api')?.transfersIn ?? 0, 0)
  // while `day`, which agrees, still moves to a node that needs it
  await withClient(c, 'c', async q => { for (let i = 0; i < 45; i++) await q.acquire('day') })
  await eventually(t, 'day tokens to reach c', async () => ((await status(c, 'c')).clusterKeys.find(k => k.key === 'day')?.transfersIn ?? 0) > 0)
})

test.serial('a peer sending garbage gossip is dropped and counted; the node keeps serving', async t => {
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
    topic: 'quotad/test/gossip/2'
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
  const deadline = Date.now() + 10_000
  let s = await status(c, 'a')
  while (s.cluster.counters.badMessages < garbage.length && Date.now() < deadline) {
    for (const g of garbage) await rogue.publish(g).catch(() => 0)
    await rogue.publish(new Uint8Array(200 * 1024)).catch(() => 0) // oversized
    await new Promise(resolve => setTimeout(resolve, 300))
    s = await status(c, 'a')
  }
  t.true(s.cluster.counters.badMessages >= garbage.length, `badMessages ${s.cluster.counters.badMessages}`)
  // still serving, still in the cluster, books intact
  t.true((await withClient(c, 'a', async q => await q.acquire('day'))).allowed)
  t.true(s.peers.some(p => p.name === 'b' && p.alive))
  t.false(s.peers.some(p => p.name === 'evil' && p.alive))
  t.true(await remaining(c, 'a') + await remaining(c, 'b') <= 90)
})

test.serial('a node started later, not a seed, joins through a seed and gets tokens by transfer only', async t => {
  const c = await makeCluster(['a', 'b'], DAY, { extraNodes: [{ name: 'j', seed: false }] })
  t.teardown(async () => await c.stopAll())
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  t.is(await remaining(c, 'a') + await remaining(c, 'b'), 90, 'the seeds split the stock')
  await c.start('j')
  await waitForPeers(c, ['j'], 2)
  t.is(await remaining(c, 'j'), 0, 'a joiner starts with nothing')
  const first = await withClient(c, 'j', async q => await q.acquire('day'))
  t.false(first.allowed)
  await eventually(t, 'tokens to reach j', async () => (await remaining(c, 'j')) > 0)
  t.true((await withClient(c, 'j', async q => await q.acquire('day'))).allowed)
  const total = await remaining(c, 'a') + await remaining(c, 'b') + await remaining(c, 'j')
  t.true(total <= 89, `no token created: ${total} + 1 spent <= 90`)
})

test.serial('restarts never create tokens: a clean restart keeps the books, an unclean one starts with nothing', async t => {
  const c = await makeCluster(['a', 'b', 'c'], DAY)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  await withClient(c, 'a', async q => { for (let i = 0; i < 10; i++) t.true((await q.acquire('day')).allowed) })
  const total = async (): Promise<number> => await remaining(c, 'a') + await remaining(c, 'b') + await remaining(c, 'c')
  t.is(await total(), 80)

  // Clean: SIGTERM hands a's held tokens over; its 10 spent ones come back to it after restart (next window).
  await stop(c.procs.a)
  await c.start('a')
  const sa = await status(c, 'a')
  t.is(sa.cluster.start, 'clean-restart')
  t.true(sa.cluster.allocate)
  await waitForPeers(c, c.names, 2)
  t.is(await total(), 80, 'after a clean restart: the same 80, none created')

  // Unclean: kill -9; the restarted node holds nothing and never re-materializes its share.
  c.procs.b.child.kill('SIGKILL')
  await c.procs.b.exited
  await c.start('b')
  const sb = await status(c, 'b')
  t.is(sb.cluster.start, 'unclean-restart')
  t.false(sb.cluster.allocate)
  t.is(await remaining(c, 'b'), 0)
  await waitForPeers(c, c.names, 2)
  t.true(await total() <= 80, 'what b held is stranded, never created')
})
