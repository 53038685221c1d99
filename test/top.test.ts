/**
 * `quotactl top` and the `npm start` demo, as real processes against a real
 * 3-node cluster on loopback; plus the pure renderer on a made-up snapshot.
 */
import test from 'ava'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { renderTop, type NodeView, type TopSnapshot } from '../src/cli/top-render.js'
import { membersSeen, reachable } from '../src/cli/top.js'
import { ANY_PORT, makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { eventually, QUOTACTL, run, startQuotad, stop, waitForSocket, type Run } from './helpers/proc.js'

const DEMO = join(dirname(QUOTACTL), 'demo.js')
const LIMIT = 60
const RULES = [
  { name: 'api', match: 'api', limit: LIMIT, per: '2s', algorithm: 'fixed-window' },
  { name: 'bg', match: 'bg', limit: 1000, per: '1s', algorithm: 'token-bucket' }
]

let cluster: TestCluster

/**
 * `top --once` until its output passes `ready` (a node that is slow to answer
 * shows as DOWN, and a busy machine can be slow), at most a minute. Each
 * output is also given to `every`, for what must hold on every one of them.
 * An interval of 2 s gives each node 2 s to answer.
 */
async function topUntil (args: string[], ready: (r: Run) => boolean, every: (r: Run) => void = () => {}): Promise<Run> {
  let last: Run | undefined
  return await eventually(`top ${args.join(' ')} to show the expected state`, async () => {
    last = await run(QUOTACTL, ['--config', cluster.file, 'top', '--once', '--interval', '2000', ...args])
    every(last)
    return ready(last) && last
  }, 60_000, () => last)
}

test.before(async () => {
  cluster = await makeCluster(['a', 'b', 'c'], RULES)
  await Promise.all(cluster.names.map(async n => await cluster.start(n)))
  await waitForPeers(cluster, cluster.names, 2)
  for (const [name, n] of [['a', 20], ['b', 10], ['c', 5]] as const) {
    const client = await QuotadClient.connect({ socketPath: cluster.sockets[name], timeoutMs: 30_000 })
    await Promise.all(Array.from({ length: n }, async () => await client.acquire('api')))
    await client.close()
  }
})

test.after.always(async () => { await cluster?.stopAll() })

test.serial('top --once: every node, the key, within 80 columns, exit 0', async t => {
  t.timeout(120_000)
  // Every row up (a busy machine can leave a node FENCED for a moment: up, but not what this test looks at).
  const r = await topUntil([], r => r.code === 0 && /3 nodes, 3 up/.test(r.stdout) && ['a', 'b', 'c'].every(n => new RegExp(`^${n}\\s+up\\s`, 'm').test(r.stdout)))
  t.is(r.code, 0, r.stderr)
  const lines = r.stdout.trimEnd().split('\n')
  t.log(r.stdout)
  t.regex(lines[0], /3 nodes, 3 up/)
  for (const n of ['a', 'b', 'c']) t.true(lines.some(l => new RegExp(`^${n}\\s+up\\s`).test(l)), `no row for node ${n}`)
  t.true(lines.some(l => /^api\s+[abc]\s/.test(l)), 'key api not listed')
  // The rule is said as a rule, not as "of 60/2s" right after the sums (which read as an overshoot).
  t.true(lines.some(l => /\(sum\).*rule api: 60 per 2s/.test(l)), r.stdout)
  for (const l of lines) t.true(l.length <= 80, `line over 80 columns: ${l}`)
  t.false(r.stdout.includes('\x1b'), '--once must not clear the screen')
})

test.serial('top --once --json: the snapshot; held over the nodes never exceeds the limit; rates from a live load', async t => {
  t.timeout(120_000)
  // A background load on another key at a, so decisions per second show up. It counts what it
  // was allowed: the rate top reports can't be more than that over its interval.
  const client = await QuotadClient.connect({ socketPath: cluster.sockets.a, timeoutMs: 30_000 })
  let loading = true
  let bgAllowed = 0
  const load = (async () => {
    while (loading) {
      const d = await client.acquire('bg').catch(() => undefined)
      if (d?.allowed === true) bgAllowed++
      await new Promise(resolve => setTimeout(resolve, 5))
    }
  })()
  const snaps: TopSnapshot[] = []
  const parse = (r: Run): TopSnapshot | undefined => r.code === 0 ? JSON.parse(r.stdout) as TopSnapshot : undefined
  let r: Run
  try {
    // Until every node answers and sees the other two, and a's rate shows the load.
    r = await topUntil(['--json'], r => {
      const s = parse(r)
      return s !== undefined && s.nodes.every(n => n.up && n.peersAlive === 2) && (s.nodes[0].allowedPerS ?? 0) > 0
    }, r => { const s = parse(r); if (s !== undefined) snaps.push(s) })
  } finally {
    loading = false
    await load
    await client.close()
  }
  t.is(r.code, 0, r.stderr)
  const snap = JSON.parse(r.stdout) as TopSnapshot
  t.deepEqual(snap.nodes.map(n => n.name), ['a', 'b', 'c'])
  t.true(snap.nodes.every(n => n.up && n.peersAlive === 2 && n.ruleProblems.length === 0))
  t.true(snap.rules.some(r => r.name === 'api' && r.limit === LIMIT))
  const api = snap.nodes.map(n => n.keys.find(k => k.key === 'api'))
  t.true(api.every(k => k !== undefined), 'every node reports key api')
  t.log('api held per node', api.map(k => k?.held))
  // On every snapshot taken, not just the last: the nodes never hold more than the limit.
  for (const s of snaps) {
    const keys = s.nodes.map(n => n.keys.find(k => k.key === 'api'))
    const held = keys.reduce((sum, k) => sum + (k?.held ?? 0), 0)
    t.true(held <= LIMIT + 1e-9, `held sums to ${held} > ${LIMIT}`)
    t.true(keys.every(k => k === undefined || k.clusterRemaining === null || k.clusterRemaining <= LIMIT + 1e-9))
  }
  const a = snap.nodes[0]
  t.true((a.allowedPerS ?? 0) > 0, `allowed/s at a: ${a.allowedPerS}`)
  // The rate is a difference over at least the 2 s interval of decisions the load was given.
  t.true((a.allowedPerS ?? 0) * 2 <= bgAllowed, `allowed/s at a: ${a.allowedPerS}, while the load was given ${bgAllowed} in all`)
  t.true((a.allowed ?? 0) >= 20)
})

test.serial('a stopped node shows as DOWN, and top still exits 0', async t => {
  t.timeout(120_000)
  await stop(cluster.procs.c)
  const r = await topUntil([], r => r.code === 0 && /3 nodes, 2 up, 1 DOWN/.test(r.stdout), r => {
    // c is stopped: never shown up
    t.false(r.stdout.split('\n').some(l => /^c\s+up\s/.test(l)), r.stdout)
  })
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

test.serial('across hosts: nodes read over HTTP, a member not in the file listed, nothing DOWN, no escape codes when piped', async t => {
  t.timeout(240_000)
  const c = await makeCluster(['a', 'b'], RULES)
  t.teardown(async () => { await c.stopAll() })
  for (const n of ['a', 'b']) await c.start(n, { args: ['--http', '127.0.0.1:0'] })
  // A member not in the cluster file: joins with its own listen address, socket and data dir.
  c.sockets.m = join(c.dir, 'm.sock')
  c.procs.m = startQuotad(['--config', c.file, '--node', 'm', '--listen', ANY_PORT, '--socket', c.sockets.m, '--data-dir', join(c.dir, 'data', 'm'), '--log-level', 'debug'])
  await waitForSocket(c.sockets.m, c.procs.m)
  await waitForPeers(c, ['a', 'b'], 2)
  // The file as another host sees it: the sockets are not there, only the HTTP addresses reach the nodes.
  const cfg = JSON.parse(readFileSync(c.file, 'utf8')) as { nodes: Array<{ name: string, socket: string, http?: string }> }
  t.true(cfg.nodes.every(n => n.http !== undefined), 'every node of the file has its http address')
  for (const n of cfg.nodes) n.socket = join(c.dir, 'elsewhere', `${n.name}.sock`)
  const remote = join(c.dir, 'remote.json')
  writeFileSync(remote, JSON.stringify(cfg))
  let last: Run | undefined
  const r = await eventually('top to show a, b and the member m up', async () => {
    last = await run(QUOTACTL, ['--config', remote, 'top', '--once', '--interval', '2000'])
    return last.code === 0 && /3 nodes, 3 up/.test(last.stdout) && last
  }, 120_000, () => last)
  t.log(r.stdout)
  const lines = r.stdout.split('\n')
  t.false(r.stdout.includes('\x1b'), 'no escape codes in a pipe')
  t.false(r.stdout.includes('DOWN'))
  for (const n of ['a', 'b']) t.true(lines.some(l => new RegExp(`^${n}\\s+up\\s`).test(l)), `no up row for ${n}`)
  t.true(lines.some(l => /^m\s+member\s/.test(l)), 'no row for the member m')
  const json = await run(QUOTACTL, ['--config', remote, 'top', '--once', '--json', '--interval', '500'])
  t.is(json.code, 0, json.stderr)
  const snap = JSON.parse(json.stdout) as TopSnapshot
  t.deepEqual(snap.nodes.map(n => n.name), ['a', 'b', 'm'])
  t.like(snap.nodes[2], { member: true, up: true })
  // The live view, piped: frame after frame, and still no escape codes (run() ends it at its deadline).
  const live = await run(QUOTACTL, ['--config', remote, 'top', '--interval', '300'], { timeoutMs: 8000 })
  t.regex(live.stdout, /quotad top - 3 nodes/)
  t.false(live.stdout.includes('\x1b'), 'no escape codes in a piped live view')
})

test('top: usage errors exit 2', async t => {
  const r = await run(QUOTACTL, ['--config', cluster.file, 'top', '--json'])
  t.is(r.code, 2)
  t.regex(r.stdout + r.stderr, /E_USAGE/)
})

test('the demo runs a cluster for --duration 4, prints a row per second, stops every node and exits 0', async t => {
  t.timeout(240_000)
  const c = await makeCluster(['a', 'b', 'c'], [{ name: 'pay', match: 'pay', limit: 50, per: '1s', algorithm: 'token-bucket' }])
  // The demo starts three nodes, runs 4 s and stops them one by one: a busy machine takes a while.
  const r = await run(DEMO, ['--config', c.file, '--duration', '4'], { timeoutMs: 180_000 })
  t.log(r.stdout)
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /^Watch: /m)
  t.regex(r.stdout, /-- a -+ b -+ c -+ -- cluster --/)
  // Per node: ok/deny, held (whole tokens; * = tight), in/out; "?" for a node that did not
  // answer its status within the demo's 2 s (a busy machine).
  const cell = '\\s+\\d+/\\d+\\s+(?:\\d+\\*?|\\?)\\s+(?:\\d+/\\d+|\\?)'
  for (let s = 1; s <= 4; s++) t.regex(r.stdout, new RegExp(`^\\s*${s}s${cell}${cell}${cell}\\s+\\d+/\\d+\\s+(?:\\d+|\\?)$`, 'm'))
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
    transfersIn: 1, transfersOut: 2, stranded: 0, shortfall: i === 28 ? 12.4 : 0, tight: i === 29
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
  t.true(lines.some(l => /^b\s+DOWN 12s\s+retrying: cannot connect .*ECONNREFUSED$/.test(l)))
  t.true(lines.some(l => l.startsWith('! a: rule "emails" differs at b')))
  const keyRows = lines.filter(l => l.startsWith('key-'))
  t.is(keyRows.length, 20)
  t.true(keyRows[0].startsWith('key-29-with-a-~'), 'busiest first, long names cut')
  t.regex(keyRows[0], /TIGHT$/)
  // The header names every column, SHORT included; the row of key 28 shows its shortfall (rounded) in it.
  const head = lines.find(l => l.startsWith('KEY')) ?? ''
  t.regex(head, /^KEY\s+NODE\s+HELD\s+RATE\/s\s+CLUSTER\s+IN\s+OUT\s+STRAND\s+SHORT\s+TIGHT$/)
  t.regex(keyRows[1], /^key-28-with-a-~ a\s+28\s+42\s+100\s+1\s+2\s+0\s+12$/)
  t.regex(keyRows[2], /\s0\s+0$/, 'no shortfall: 0, not blank')
  t.true(lines.some(l => l === '... 10 more key(s), less busy'))
})

test('where top reaches a node over HTTP: its address, a wildcard host taken from its listen address, else none (the socket)', t => {
  t.is(reachable('10.0.0.5:9464', '/ip4/10.0.0.5/tcp/7401'), '10.0.0.5:9464')
  t.is(reachable('0.0.0.0:9464', '/ip4/10.0.0.7/tcp/7401'), '10.0.0.7:9464')
  t.is(reachable('[::]:9464', '/ip6/fd00::7/tcp/7401'), '[fd00::7]:9464')
  t.is(reachable('0.0.0.0:9464', '/dns4/node-c.internal/tcp/7401'), 'node-c.internal:9464')
  t.is(reachable('0.0.0.0:9464', '/ip4/0.0.0.0/tcp/7401'), undefined)
})

test('members not in the file: listed from the seeds\' peers, up while any sees them alive', t => {
  const rows = membersSeen(['a', 'b'], [
    { name: 'a', status: { peers: [{ name: 'b', alive: true, lastHeardMs: 10 }, { name: 'm2', alive: false, lastHeardMs: 9000 }, { name: 'm1', alive: true, lastHeardMs: 40 }] } },
    { name: 'b', status: { peers: [{ name: 'a', alive: true, lastHeardMs: 10 }, { name: 'm1', alive: true, lastHeardMs: 20 }] } }
  ])
  t.deepEqual(rows.map(r => [r.name, r.up, r.seenBy]), [['m1', true, 'b'], ['m2', false, 'a']])
  t.true(rows.every(r => r.member === true))
  const lines = renderTop({ at: '2026-01-02T03:04:05.000Z', intervalMs: 1000, nodes: rows, rules: [] })
  t.true(lines.some(l => /^m1\s+member\s+a member, as b sees it/.test(l)))
  t.true(lines.some(l => /^m2\s+DOWN\s+not alive at a/.test(l)))
})
