/**
 * An N-node cluster of real `quotad` processes on loopback, with a fresh
 * swarm key, for tests.
 *
 * Ports: every node listens on /tcp/0, so the OS picks a free port (no
 * "find a free port, then bind it" race). The cluster file starts with every
 * node at /tcp/0 (nodes skip such entries when dialling); as each node
 * starts, the file gets its real address, so nodes started later dial it.
 * A restarted node gets a new port and dials the others itself.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeSwarmKey } from '../../src/config/swarm-key.js'
import { peerIdOf } from '../../src/cluster/transport/identity.js'
import { QuotadClient } from '@quotad/client'
import { startQuotad, stop, tempDir, waitForLog, waitForSocket, type Proc } from './proc.js'

export const ANY_PORT = '/ip4/127.0.0.1/tcp/0'

export interface TestCluster {
  dir: string
  file: string
  names: string[]
  sockets: Record<string, string>
  procs: Record<string, Proc>
  /** Start (or restart) a node and wait until it serves; its real address goes into the file. */
  start: (name: string, opts?: { config?: string, args?: string[], env?: Record<string, string> }) => Promise<void>
  /** Change the rules in the file (nodes read it on start and on SIGHUP). */
  setRules: (rules: unknown[]) => void
  stopAll: () => Promise<void>
}

interface FileNode { name: string, listen: string, http?: string }

/**
 * `pin` (default true): every node's peer id is pinned in the file (its key
 * is made first, as `quotad peer-id` does), the setup the docs recommend.
 */
export async function makeCluster (names: string[], rules: unknown[], opts: { gossipIntervalMs?: number, extraNodes?: Array<{ name: string, seed: boolean }>, pin?: boolean, cluster?: Record<string, unknown> } = {}): Promise<TestCluster> {
  const dir = tempDir()
  const all = [...names.map(name => ({ name, seed: true })), ...(opts.extraNodes ?? [])]
  const nodes = []
  const sockets: Record<string, string> = {}
  for (const n of all) {
    sockets[n.name] = join(dir, `${n.name}.sock`)
    const peerId = opts.pin === false ? undefined : (await peerIdOf(join(dir, 'data', n.name))).peerId
    nodes.push({ name: n.name, listen: ANY_PORT, socket: `${n.name}.sock`, dataDir: `data/${n.name}`, ...(n.seed ? {} : { seed: false }), ...(peerId === undefined ? {} : { peerId }) })
  }
  const file = join(dir, 'cluster.json')
  writeFileSync(file, JSON.stringify({ cluster: { name: 'test', secretFile: 'swarm.key', gossipIntervalMs: opts.gossipIntervalMs ?? 100, ...opts.cluster }, nodes, rules }, null, 2))
  await writeSwarmKey(join(dir, 'swarm.key'))
  const procs: Record<string, Proc> = {}
  // Starts run one at a time, so each node reads a file with the real addresses of those before it.
  let queue: Promise<void> = Promise.resolve()
  const edit = (f: (cfg: { nodes: FileNode[], rules: unknown[] }) => void): void => {
    const cfg = JSON.parse(readFileSync(file, 'utf8')) as { nodes: FileNode[], rules: unknown[] }
    f(cfg)
    writeFileSync(file, JSON.stringify(cfg, null, 2))
  }
  return {
    dir,
    file,
    names: all.map(n => n.name),
    sockets,
    procs,
    start: async (name, o = {}) => {
      const run = queue.then(async () => {
        procs[name] = startQuotad(['--config', o.config ?? file, '--node', name, '--listen', ANY_PORT, '--log-level', 'debug', ...(o.args ?? [])], o.env)
        await waitForSocket(sockets[name], procs[name], 90_000)
        const listen = await listenAddr(sockets[name])
        // Started with --http HOST:0: the bound address goes into the file too (`quotactl top` reads it there).
        const http = (o.args ?? []).includes('--http') ? await httpAddr(procs[name]) : undefined
        edit(cfg => {
          for (const n of cfg.nodes) {
            if (n.name !== name) continue
            n.listen = listen
            if (http !== undefined) n.http = http
          }
        })
      })
      queue = run.catch(() => {})
      await run
    },
    setRules: rules => edit(cfg => { cfg.rules = rules }),
    stopAll: async () => { await Promise.all(Object.values(procs).map(async p => await stop(p))) }
  }
}

/** The HTTP listener's bound address, from the node's `serving` log line (logged once the listener is up). */
export async function httpAddr (proc: Proc): Promise<string> {
  await waitForLog(proc, '"serving"')
  const line = proc.stderr().split('\n').find(l => l.includes('"serving"'))
  const http = (JSON.parse(line ?? '{}') as { http?: string }).http
  if (http === undefined) throw new Error(`no http address in the serving line: ${line}`)
  return http
}

/** The node's actual TCP listen address (from status), without its /p2p/ part. */
async function listenAddr (socketPath: string): Promise<string> {
  const c = await QuotadClient.connect({ socketPath })
  try {
    const s = await c.status() as { cluster?: { listen?: string[] } }
    const addr = (s.cluster?.listen ?? []).map(a => a.replace(/\/p2p\/.*$/, '')).find(a => a.startsWith('/ip4/127.0.0.1/tcp/'))
    if (addr === undefined) throw new Error(`no loopback listen address in status: ${JSON.stringify(s.cluster?.listen)}`)
    return addr
  } finally {
    await c.close()
  }
}

/**
 * Wait until every listed node sees `peers` alive peers and holds its lease
 * (a node starts fenced until a quorum of seeds has echoed it: lease.ts).
 */
export async function waitForPeers (c: TestCluster, names: string[], peers: number, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms
  for (const name of names) {
    const client = await QuotadClient.connect({ socketPath: c.sockets[name] })
    try {
      while (true) {
        const s = await client.status() as { peers?: Array<{ alive: boolean }>, cluster?: { lease?: { valid?: boolean }, leaseNeeded?: boolean } }
        // A member that needs no lease (member-gossip.ts) is never echoed: its peers are enough.
        const leased = s.cluster?.lease?.valid !== false || s.cluster?.leaseNeeded === false
        if ((s.peers ?? []).filter(p => p.alive).length >= peers && leased) break
        if (Date.now() > deadline) throw new Error(`${name} sees ${JSON.stringify(s.peers)}, lease ${JSON.stringify(s.cluster?.lease)}`)
        await new Promise(resolve => setTimeout(resolve, 100))
      }
    } finally {
      await client.close()
    }
  }
}
