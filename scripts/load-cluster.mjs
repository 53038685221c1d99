// A 3-node quotad cluster under load whose nodes restart in a loop, as
// background noise for scripts/test-under-load.sh (see there).
//
//   node scripts/load-cluster.mjs DIST WORKDIR
//
// DIST is a compiled tree (its src/cli/quotad.js is
// used; it must not be the dist that `npm test` deletes and rebuilds).
// WORKDIR gets the cluster file, the swarm key, the sockets, the data
// directories and the nodes' logs. Every node listens on tcp/0; as a node
// (re)starts, the file gets its real address, so the next one to start dials
// it. Load: each node is asked for tokens of three keys, ~300 a second in all.
// Restarts: every few seconds the next node is stopped, alternately with
// SIGTERM (a clean restart) and SIGKILL (an unclean one), and started again.
// SIGTERM or SIGINT to this process stops the load and every node, then exits.
/* global process, console, setTimeout, clearTimeout */
import { spawn, execFileSync } from 'node:child_process'
import { openSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

const [distArg, workArg] = process.argv.slice(2)
if (distArg === undefined || workArg === undefined) {
  console.error('usage: node scripts/load-cluster.mjs DIST WORKDIR')
  process.exit(2)
}
const dist = resolve(distArg)
const work = resolve(workArg)
const QUOTAD = join(dist, 'src/cli/quotad.js')
// The client is its own package (packages/client), linked into node_modules by the workspace.
const { QuotadClient } = await import('@quotad/client')

const NAMES = ['a', 'b', 'c']
const ANY_PORT = '/ip4/127.0.0.1/tcp/0'
const file = join(work, 'cluster.json')
const sockets = Object.fromEntries(NAMES.map(n => [n, join(work, `${n}.sock`)]))
writeFileSync(file, JSON.stringify({
  cluster: { name: 'load', secretFile: 'swarm.key', gossipIntervalMs: 100 },
  nodes: NAMES.map(n => ({ name: n, listen: ANY_PORT, socket: `${n}.sock`, dataDir: `data/${n}` })),
  rules: [
    { name: 'api', match: 'api', limit: 200, per: '1s', algorithm: 'token-bucket' },
    { name: 'reports', match: 'reports', limit: 3000, per: '1m', algorithm: 'fixed-window' },
    { name: 'user', match: 'user:*', limit: 20, per: '10s', algorithm: 'sliding-window' }
  ]
}, null, 2))
execFileSync(process.execPath, [QUOTAD, 'keygen', join(work, 'swarm.key')])

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const log = msg => console.log(`${new Date().toISOString()} load-cluster: ${msg}`)
const procs = {}
let stopping = false

function start (name) {
  const out = openSync(join(work, `${name}.log`), 'a')
  const child = spawn(process.execPath, [QUOTAD, '--config', file, '--node', name, '--listen', ANY_PORT, '--log-level', 'warn'],
    { stdio: ['ignore', out, out] })
  child.exited = new Promise(resolve => child.on('exit', (code, signal) => resolve({ code, signal })))
  procs[name] = child
}

/** Wait until the node answers; then put its real address into the file. */
async function serving (name) {
  for (let i = 0; i < 1200 && !stopping; i++) {
    if (procs[name].exitCode !== null || procs[name].signalCode !== null) throw new Error(`node ${name} exited at start (see ${name}.log)`)
    try {
      const c = await QuotadClient.connect({ socketPath: sockets[name], timeoutMs: 5000, reconnect: false })
      try {
        const s = await c.status()
        const addr = (s.cluster?.listen ?? []).map(a => a.replace(/\/p2p\/.*$/, '')).find(a => a.startsWith('/ip4/127.0.0.1/tcp/'))
        const cfg = JSON.parse(readFileSync(file, 'utf8'))
        for (const n of cfg.nodes) if (n.name === name && addr !== undefined) n.listen = addr
        writeFileSync(file, JSON.stringify(cfg, null, 2))
        return
      } finally {
        await c.close()
      }
    } catch {
      await sleep(100)
    }
  }
}

async function stopNode (name, signal) {
  const child = procs[name]
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
  child.kill(signal)
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  await child.exited
  clearTimeout(timer)
}

/** Per node: acquires on three keys, paced at ~100 a second, whatever the node answers. */
async function load (name) {
  const client = await QuotadClient.connect({ socketPath: sockets[name], timeoutMs: 5000 })
  let i = 0
  while (!stopping) {
    const batch = [{ key: 'api' }, { key: 'reports' }, { key: `user:${i++ % 50}` }]
    await Promise.all(batch.map(b => client.acquire(b.key).catch(() => {})))
    await sleep(30)
  }
  await client.close().catch(() => {})
}

async function shutdown () {
  if (stopping) return
  stopping = true
  log('stopping every node')
  await Promise.all(NAMES.map(n => stopNode(n, 'SIGTERM')))
  log('stopped')
  process.exit(0)
}
process.on('SIGTERM', () => { void shutdown() })
process.on('SIGINT', () => { void shutdown() })

for (const n of NAMES) {
  start(n)
  await serving(n)
}
log(`3 nodes up in ${work}`)
const loads = NAMES.map(n => load(n))
let round = 0
while (!stopping) {
  await sleep(4000)
  if (stopping) break
  const name = NAMES[round % NAMES.length]
  const signal = round % 2 === 0 ? 'SIGTERM' : 'SIGKILL'
  round++
  await stopNode(name, signal)
  if (stopping) break
  start(name)
  try {
    await serving(name)
    if (!stopping) log(`restart ${round}: ${name} (${signal}) is serving again`)
  } catch (err) {
    log(`restart ${round}: ${err.message}`)
  }
}
await Promise.all(loads)
