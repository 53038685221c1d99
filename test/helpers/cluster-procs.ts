/**
 * An N-node cluster of real `quotad` processes on loopback, on free ports
 * (found by binding port 0), with a fresh swarm key, for tests.
 */
import { createServer } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeSwarmKey } from '../../src/config/swarm-key.js'
import { QuotadClient } from '../../src/client/index.js'
import { startQuotad, stop, tempDir, waitForSocket, type Proc } from './proc.js'

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

export interface TestCluster {
  dir: string
  file: string
  names: string[]
  sockets: Record<string, string>
  procs: Record<string, Proc>
  start: (name: string) => Promise<void>
  stopAll: () => Promise<void>
}

export async function makeCluster (names: string[], rules: unknown[], opts: { gossipIntervalMs?: number, extraNodes?: Array<{ name: string, seed: boolean }> } = {}): Promise<TestCluster> {
  const dir = tempDir()
  const all = [...names.map(name => ({ name, seed: true })), ...(opts.extraNodes ?? [])]
  const nodes = []
  const sockets: Record<string, string> = {}
  for (const n of all) {
    const port = await freePort()
    sockets[n.name] = join(dir, `${n.name}.sock`)
    nodes.push({ name: n.name, listen: `/ip4/127.0.0.1/tcp/${port}`, socket: `${n.name}.sock`, dataDir: `data/${n.name}`, ...(n.seed ? {} : { seed: false }) })
  }
  const file = join(dir, 'cluster.json')
  writeFileSync(file, JSON.stringify({ cluster: { name: 'test', secretFile: 'swarm.key', gossipIntervalMs: opts.gossipIntervalMs ?? 100 }, nodes, rules }, null, 2))
  await writeSwarmKey(join(dir, 'swarm.key'))
  const procs: Record<string, Proc> = {}
  const c: TestCluster = {
    dir,
    file,
    names: all.map(n => n.name),
    sockets,
    procs,
    start: async (name: string) => {
      procs[name] = startQuotad(['--config', file, '--node', name, '--log-level', 'debug'])
      await waitForSocket(sockets[name], procs[name], 20_000)
    },
    stopAll: async () => { await Promise.all(Object.values(procs).map(async p => await stop(p))) }
  }
  return c
}

/** Wait until every listed node sees `peers` alive peers. */
export async function waitForPeers (c: TestCluster, names: string[], peers: number, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  for (const name of names) {
    const client = await QuotadClient.connect({ socketPath: c.sockets[name] })
    try {
      while (true) {
        const s = await client.status() as { peers?: Array<{ alive: boolean }> }
        if ((s.peers ?? []).filter(p => p.alive).length >= peers) break
        if (Date.now() > deadline) throw new Error(`${name} sees ${JSON.stringify(s.peers)}`)
        await new Promise(resolve => setTimeout(resolve, 100))
      }
    } finally {
      await client.close()
    }
  }
}
