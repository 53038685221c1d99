/**
 * `quotactl top` and the `npm start` demo, as real processes against a real
 * 3-node cluster on loopback; plus the pure renderer on a made-up snapshot.
 */
import test from 'ava'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { QuotadClient } from '../src/client/index.js'
import { renderTop, type NodeView, type TopSnapshot } from '../src/cli/top-render.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { QUOTACTL, run, stop } from './helpers/proc.js'

const DEMO = join(dirname(QUOTACTL), 'demo.js')
const LIMIT = 60
const RULES = [
  { name: 'api', match: 'api', limit: LIMIT, per: '2s', algorithm: 'fixed-window' },
  { name: 'bg', match: 'bg', limit: 1000, per: '1s', algorithm: 'token-bucket' }
]

let cluster: TestCluster

test.before(async () => {
  cluster = await makeCluster(['a', 'b', 'c'], RULES)
  await Promise.all(cluster.names.map(async n => await cluster.start(n)))
  await waitForPeers(cluster, cluster.names, 2)
  for (const [name, n] of [['a', 20], ['b', 10], ['c', 5]] as const) {
    const client = await QuotadClient.connect({ socketPath: cluster.sockets[name] })
    await Promise.all(Array.from({ length: n }, async () => await client.acquire('api')))
    await client.close()
  }
})

test.after.always(async () => { await cluster?.stopAll() })

test.serial('top --once: every node, the key, within 80 columns, exit 0', async t => {
  const r = await run(QUOTACTL, ['--config', cluster.file, 'top', '--once', '--interval', '500'])
  t.is(r.code, 0, r.stderr)
  const lines = r.stdout.trimEnd().split('\n')
  t.log(r.stdout)
  t.regex(lines[0], /3 nodes, 3 up/)
  for (const n of ['a', 'b', 'c']) t.true(lines.some(l => new RegExp(`^${n}\\s+up\\s`).test(l)), `no row for node ${n}`)
  t.true(lines.some(l => /^api\s+[abc]\s/.test(l)), 'key api not listed')
  t.true(lines.some(l => /\(sum\).*of 60\/2s/.test(l)))
  for (const l of lines) t.true(l.length <= 80, `line over 80 columns: ${l}`)
  t.false(r.stdout.includes('\x1b'), '--once must not clear the screen')
})

test.serial('top --once --json: the snapshot; held over the nodes never exceeds the limit; rates from a live load', async t => {
  // A background load on another key at a, so decisions per second show up.
  const client = await QuotadClient.connect({ socketPath: cluster.sockets.a })
  let loading = true
  const load = (async () => {
    while (loading) {
      await client.acquire('bg').catch(() => {})
      await new Promise(resolve => setTimeout(resolve, 5))
    }
  })()
  const r = await run(QUOTACTL, ['--config', cluster.file, 'top', '--once', '--json', '--interval', '500'])
  loading = false
  await load
  await client.close()
  t.is(r.code, 0, r.stderr)
  const snap = JSON.parse(r.stdout) as TopSnapshot
  t.deepEqual(snap.nodes.map(n => n.name), ['a', 'b', 'c'])
  t.true(snap.nodes.every(n => n.up && n.peersAlive === 2 && n.ruleProblems.length === 0))
  t.true(snap.rules.some(r => r.name === 'api' && r.limit === LIMIT))
  const api = snap.nodes.map(n => n.keys.find(k => k.key === 'api'))
  t.true(api.every(k => k !== undefined), 'every node reports key api')
  const held = api.reduce((s, k) => s + (k?.held ?? 0), 0)
  t.log('api held per node', api.map(k => k?.held), 'sum', held)
  t.true(held <= LIMIT + 1e-9, `held sums to ${held} > ${LIMIT}`)
  t.true(api.every(k => k !== undefined && k.clusterRemaining !== null && k.clusterRemaining <= LIMIT + 1e-9))
  const a = snap.nodes[0]
  t.true((a.allowedPerS ?? 0) > 10, `allowed/s at a: ${a.allowedPerS}`)
  t.true((a.allowed ?? 0) >= 20)
})

test.serial('a stopped node shows as DOWN, and top still exits 0', async t => {
  await stop(cluster.procs.c)
  const r = await run(QUOTACTL, ['--config', cluster.file, 'top', '--once', '--interval', '300'])
  t.is(r.code, 0, r.stderr)
  t.log(r.stdout)
  const lines = r.stdout.split('\n')
  t.regex(lines[0], /3 nodes, 2 up, 1 DOWN/)
  t.true(lines.some(l => /^c\s+DOWN\s.*retrying/.test(l)))
  t.true(lines.some(l => /^a\s+up\s/.test(l)) && lines.some(l => /^b\s+up\s/.test(l)))
  const j = await run(QUOTACTL, ['--socket', cluster.sockets.c, 'top', '--once', '--json', '--interval', '100'])
  t.is(j.code, 0, j.stderr)
  const snap = JSON.parse(j.stdout) as TopSnapshot
  t.is(snap.nodes.length, 1)
  t.false(snap.nodes[0].up)
  t.is(typeof snap.nodes[0].error, 'string')
})

test('top: usage errors exit 2', async t => {
  const r = await run(QUOTACTL, ['--config', cluster.file, 'top', '--json'])
  t.is(r.code, 2)
  t.regex(r.stdout + r.stderr, /E_USAGE/)
})

test('the demo runs a cluster for --duration 4, prints a row per second, stops every node and exits 0', async t => {
  const c = await makeCluster(['a', 'b', 'c'], [{ name: 'pay', match: 'pay', limit: 50, per: '1s', algorithm: 'token-bucket' }])
  const r = await run(DEMO, ['--config', c.file, '--duration', '4'])
  t.log(r.stdout)
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /^Watch: /m)
  t.regex(r.stdout, /-- a -+ b -+ c -+ -- cluster --/)
  for (let s = 1; s <= 4; s++) t.regex(r.stdout, new RegExp(`^\\s*${s}s\\s+\\d+/\\d+\\s+\\d+\\*?\\s+\\d+/\\d+`, 'm'))
  t.regex(r.stdout, /stopped every node\n$/)
  for (const l of r.stdout.split('\n')) t.true(l.length <= 100, `line over 100 columns: ${l}`)
  for (const n of c.names) t.false(existsSync(c.sockets[n]), `node ${n} still has its socket`)
})

const node = (name: string, over: Partial<NodeView> = {}): NodeView => ({
  name, socket: `/tmp/${name}.sock`, up: true, uptimeMs: 65_000, isolated: false, peersAlive: 1, peersKnown: 2,
  allowed: 100, denied: 3, allowedPerS: 12.5, deniedPerS: 0, keyCount: 30, waiters: 0, ruleProblems: [], keys: [], ...over
})

test('renderTop: DOWN nodes, rule problems, the 20 busiest keys, at most 80 columns', t => {
  const keys = Array.from({ length: 30 }, (_, i) => ({
    key: `key-${String(i).padStart(2, '0')}-with-a-rather-long-name`, rule: 'r', held: i, rate: i * 1.5, clusterRemaining: 100,
    transfersIn: 1, transfersOut: 2, stranded: 0, tight: i === 29
  }))
  const snap: TopSnapshot = {
    at: '2026-01-02T03:04:05.678Z',
    intervalMs: 1000,
    rules: [{ name: 'r', match: 'key-*', algorithm: 'fixed-window', limit: 100, per: '1m' }],
    nodes: [
      node('a', { keys, ruleProblems: [{ rule: 'emails', differ: ['b'] }] }),
      node('b', { up: false, error: 'cannot connect to /tmp/b.sock: ECONNREFUSED', downForMs: 12_000, allowedPerS: null, deniedPerS: null })
    ]
  }
  const lines = renderTop(snap, { live: true })
  t.log(lines.join('\n'))
  for (const l of lines) t.true(l.length <= 80, l)
  t.regex(lines[0], /2 nodes, 1 up, 1 DOWN - 03:04:05 UTC - every 1s - q: quit/)
  t.true(lines.some(l => /^a\s+up\s+1m05s\s+1\/2\s+12\.5\s+0\s+30\s+0$/.test(l)))
  t.true(lines.some(l => /^b\s+DOWN 12s\s+cannot connect .*ECONNREFUSED \(retrying\)$/.test(l)))
  t.true(lines.some(l => l.startsWith('! a: rule "emails" differs at b')))
  const keyRows = lines.filter(l => l.startsWith('key-'))
  t.is(keyRows.length, 20)
  t.true(keyRows[0].startsWith('key-29-with-a-r~'), 'busiest first, long names cut')
  t.regex(keyRows[0], /TIGHT$/)
  t.true(lines.some(l => l === '... 10 more key(s), less busy'))
})
