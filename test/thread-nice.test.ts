/**
 * The libp2p thread runs at a lower priority than the socket loop
 * (`cluster.transportNice`, thread-nice.ts): checked on real processes by
 * reading each thread's nice value from /proc, and on a worker thread of
 * this process for the function itself.
 */
import test from 'ava'
import { readdirSync, readFileSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { ConfigError } from '../src/errors.js'
import { validateClusterFile } from '../src/config/validate.js'
import { niceThisThread } from '../src/cluster/transport/thread-nice.js'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'

const linux = process.platform === 'linux'

/** Field 19 of /proc/<pid>/task/<tid>/stat, counted after the command name's closing parenthesis. */
function niceOf (pid: number, tid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])
}

function threadNices (pid: number): Map<number, number> {
  const out = new Map<number, number>()
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try { out.set(Number(t), niceOf(pid, Number(t))) } catch { /* the thread ended */ }
  }
  return out
}

const RULES = [{ name: 'api', match: 'api', limit: 100, per: '1s', algorithm: 'fixed-window' }]

test('cluster.transportNice: an integer from 0 to 19, default 0', t => {
  const raw = (cluster: Record<string, unknown>): unknown => ({
    cluster: { name: 'c', secretFile: 'swarm.key', ...cluster },
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'a' }],
    rules: RULES
  })
  t.is(validateClusterFile(raw({}), '/x', '/x/cluster.json').cluster.transportNice, 0)
  t.is(validateClusterFile(raw({ transportNice: 19 }), '/x', '/x/cluster.json').cluster.transportNice, 19)
  for (const bad of [-1, 20, 2.5, '10']) {
    const err = t.throws(() => validateClusterFile(raw({ transportNice: bad }), '/x', '/x/cluster.json'), { instanceOf: ConfigError })
    t.deepEqual(err.issues.map(i => i.path), ['cluster.transportNice'], String(bad))
  }
})

test('niceThisThread changes the calling thread only, never lowers a raised value, and 0 does nothing', async t => {
  if (!linux) { t.pass('no per-thread nice value here'); return }
  t.deepEqual(niceThisThread(0), { skipped: 'transportNice is 0' })
  const before = niceOf(process.pid, process.pid)
  // In a thread of its own: a test must not change the priority of the thread that runs it.
  const src = `
    const { parentPort } = require('node:worker_threads')
    import(${JSON.stringify(new URL('../src/cluster/transport/thread-nice.js', import.meta.url).href)}).then(m => {
      const first = m.niceThisThread(${Math.max(before, 7)})
      const again = m.niceThisThread(3)
      parentPort.postMessage({ first, again })
    })`
  const w = new Worker(src, { eval: true })
  const got = await new Promise<{ first: { tid: number, nice: number }, again: { tid: number, nice: number } }>((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  await w.terminate()
  t.is(got.first.nice, Math.max(before, 7))
  t.not(got.first.tid, process.pid)
  t.deepEqual(got.again, got.first, 'a lower value leaves the raised one')
  t.is(niceOf(process.pid, process.pid), before, 'the calling process\'s main thread is unchanged')
})

test.serial('a real node runs its libp2p thread at cluster.transportNice and its socket loop at the process\'s priority', async t => {
  if (!linux) { t.pass('no per-thread nice value here'); return }
  t.timeout(120_000)
  const names = ['a', 'b']
  const c = await makeCluster(names, RULES, { cluster: { transportNice: 12 } })
  t.teardown(async () => await c.stopAll())
  for (const n of names) await c.start(n)
  // The peers see each other: the transport thread is running.
  await waitForPeers(c, names, 1)
  for (const n of names) {
    const pid = c.procs[n].child.pid as number
    const nices = threadNices(pid)
    const main = nices.get(pid) as number
    const want = Math.max(main, 12)
    t.true([...nices.values()].includes(want), `${n}: a thread at ${want}: ${JSON.stringify([...nices])}`)
    t.true(main < 12 || main === want, `${n}: the main thread keeps the process's value ${main}`)
    t.true([...nices].some(([tid, v]) => tid !== pid && v === main), `${n}: other threads (V8's, libuv's) keep the process's value`)
  }
})
