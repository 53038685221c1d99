/**
 * Real quotad processes forming a cluster over libp2p on loopback.
 */
import test from 'ava'
import { QuotadClient } from '../src/client/index.js'
import type { Decision } from '../src/core/types.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { stop } from './helpers/proc.js'

const PER_MS = 2000
const LIMIT = 60
const RULES = [{ name: 'api', match: 'api', limit: LIMIT, per: '2s', algorithm: 'fixed-window', mode: 'hard' }]

interface Tally { perWindow: Map<number, number>, ambiguous: number }

/** Window of an allowed decision: the node's window ends at receive time + resetMs, rounded to the window grid. */
function windowOf (d: Decision, receivedAt: number): number {
  return Math.round((receivedAt + d.resetMs) / PER_MS) - 1
}

/** Hammer the nodes with weights (requests per 10 ms tick) for `ms`; count allowed per window. */
async function hammer (c: TestCluster, weights: Record<string, number>, ms: number, tally: Tally, alive: () => string[] = () => Object.keys(weights)): Promise<void> {
  const clients = new Map<string, QuotadClient>()
  for (const n of Object.keys(weights)) clients.set(n, await QuotadClient.connect({ socketPath: c.sockets[n], timeoutMs: 2000, reconnect: false }))
  const end = Date.now() + ms
  const inflight: Array<Promise<void>> = []
  while (Date.now() < end) {
    for (const n of alive()) {
      const client = clients.get(n)
      if (client === undefined) continue
      for (let i = 0; i < weights[n]; i++) {
        inflight.push(client.acquire('api').then(d => {
          if (!d.allowed) return
          const w = windowOf(d, Date.now())
          tally.perWindow.set(w, (tally.perWindow.get(w) ?? 0) + 1)
        }, () => { tally.ambiguous++ }))
      }
    }
    await new Promise(resolve => setTimeout(resolve, 10))
  }
  await Promise.all(inflight)
  for (const client of clients.values()) await client.close().catch(() => {})
}

test.serial('3 nodes, hard fixed window, skewed load through all sockets: each window admits at most the limit, and close to it', async t => {
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const tally: Tally = { perWindow: new Map(), ambiguous: 0 }
  await hammer(c, { a: 6, b: 2, c: 1 }, 9000, tally)
  const windows = [...tally.perWindow.entries()].sort((x, y) => x[0] - y[0])
  t.log('allowed per window', windows)
  for (const [w, n] of windows) t.true(n <= LIMIT, `window ${w} admitted ${n} > ${LIMIT}`)
  // The full windows in the middle (not the first or last, which are partial) come close to the limit.
  const full = windows.slice(1, -1)
  t.true(full.length >= 2)
  for (const [w, n] of full) t.true(n >= LIMIT * 0.9, `window ${w} admitted only ${n}`)
})

test.serial('a node killed mid-window: no overshoot, and its tokens show as stranded', async t => {
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const tally: Tally = { perWindow: new Map(), ambiguous: 0 }
  let killed = false
  const killer = setTimeout(() => { c.procs.a.child.kill('SIGKILL'); killed = true }, 3000)
  await hammer(c, { a: 4, b: 4, c: 1 }, 7000, tally, () => killed ? ['b', 'c'] : ['a', 'b', 'c'])
  clearTimeout(killer)
  for (const [w, n] of tally.perWindow) t.true(n <= LIMIT, `window ${w} admitted ${n}`)
  const client = await QuotadClient.connect({ socketPath: c.sockets.b })
  const s = await client.status() as { peers: Array<{ name: string, alive: boolean }>, clusterKeys: Array<{ key: string, stranded: number }> }
  await client.close()
  t.false(s.peers.find(p => p.name === 'a')?.alive)
  t.true((s.clusterKeys.find(k => k.key === 'api')?.stranded ?? 0) > 0, 'what a held or had spent is reported as stranded')
})

test.serial('SIGTERM: a stopping node hands its tokens to its peers', async t => {
  const rules = [{ name: 'day', match: 'day', limit: 90, per: '1d', algorithm: 'fixed-window' }]
  const c = await makeCluster(['a', 'b', 'c'], rules)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const held = async (n: string): Promise<number> => {
    const client = await QuotadClient.connect({ socketPath: c.sockets[n] })
    const d = await client.peek('day')
    await client.close()
    return d.remaining
  }
  t.is(await held('a') + await held('b') + await held('c'), 90)
  await stop(c.procs.a)
  t.is(c.procs.a.child.exitCode, 0)
  // b and c now hold all 90 between them: a's 30 moved, none were created.
  const deadline = Date.now() + 5000
  let total = 0
  while (Date.now() < deadline) {
    total = await held('b') + await held('c')
    if (total === 90) break
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  t.is(total, 90)
})
