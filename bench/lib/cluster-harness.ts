/**
 * Real local quotad clusters for the cluster benchmark: cluster files on free
 * loopback ports in a temp dir, a fresh swarm key, one `quotad` process per
 * node (`node dist/src/cli/quotad.js --config FILE --node NAME`), readiness
 * (socket answers a ping; every node sees its peers alive and agreeing on the
 * rules), SIGTERM on stop.
 *
 * Also what the bench reads from outside the daemons: TCP bytes per process
 * from `ss -tinp` (the libp2p connections on loopback), since the transport
 * has no byte counters.
 *
 * Copied in spirit from test/helpers/cluster-procs.ts (bench must not import
 * from test/).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { appendFileSync, existsSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { writeSwarmKey } from '../../src/config/swarm-key.js'

/** dist/src/cli/quotad.js, found from this file's place in dist/bench/lib. */
export const QUOTAD_CLI = fileURLToPath(new URL('../../src/cli/quotad.js', import.meta.url))

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

export interface ClusterFile {
  file: string
  names: string[]
  sockets: Record<string, string>
  raw: Record<string, unknown>
}

/**
 * Write `<dir>/cluster.json` for `names` (all seeds) on free ports, with a new
 * `<dir>/swarm.key`. One name gives a single-node file: the daemon then runs
 * without the cluster layer (no libp2p, no gossip).
 */
export async function writeClusterFile (dir: string, name: string, names: string[], rules: unknown[], gossipIntervalMs: number, cluster: Record<string, unknown> = {}): Promise<ClusterFile> {
  const nodes = []
  const sockets: Record<string, string> = {}
  for (const n of names) {
    const port = names.length === 1 ? 0 : await freePort()
    sockets[n] = path.join(dir, `${n}.sock`)
    nodes.push({ name: n, listen: `/ip4/127.0.0.1/tcp/${port}`, socket: sockets[n], dataDir: path.join(dir, 'data', n) })
  }
  const raw = {
    cluster: { name, secretFile: 'swarm.key', gossipIntervalMs, ...cluster },
    nodes,
    rules,
    limits: { maxInflightPerConnection: 4096 }
  }
  const file = path.join(dir, 'cluster.json')
  writeFileSync(file, JSON.stringify(raw, null, 2) + '\n')
  await writeSwarmKey(path.join(dir, 'swarm.key'))
  return { file, names, sockets, raw }
}

export interface NodeProc {
  name: string
  pid: number
  socketPath: string
  /** The last 16 KB of the process's stdout + stderr. */
  output: () => string
  /** Exit description once it exited, else null. */
  exited: () => string | null
  stop: () => Promise<void>
}

/** How to spawn a node beyond its flags (the chaos bench: in a network namespace, under libfaketime, logged whole). */
export interface SpawnOpts {
  /** An argv prefix that runs the command, e.g. `ip netns exec NS` (it must exec, so the pid stays the node's). */
  wrap?: string[]
  /** Extra environment variables. */
  env?: Record<string, string>
  /** Append all of the node's output to this file too. */
  logFile?: string
}

/**
 * Start one node and wait until its socket answers a ping. `cli`: another build's quotad.js (a before/after bench);
 * `nodeArgs`: node's own flags (e.g. --cpu-prof, which NODE_OPTIONS refuses); `spawnOpts`: see SpawnOpts.
 */
export async function startNode (file: ClusterFile, name: string, logLevel = 'warn', timeoutMs = 30_000, cli = QUOTAD_CLI, nodeArgs: string[] = [], spawnOpts: SpawnOpts = {}): Promise<NodeProc> {
  if (!existsSync(cli)) throw new Error(`${cli} does not exist: run npx tsc -p . first`)
  const argv = [...(spawnOpts.wrap ?? []), process.execPath, ...nodeArgs, cli, '--config', file.file, '--node', name, '--log-level', logLevel]
  const child: ChildProcess = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], ...(spawnOpts.env === undefined ? {} : { env: { ...process.env, ...spawnOpts.env } }) })
  let out = ''
  const logFile = spawnOpts.logFile
  const keep = (b: Buffer): void => {
    out = (out + b.toString()).slice(-16_000)
    if (logFile !== undefined) appendFileSync(logFile, b)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  let exit: string | null = null
  child.once('exit', (code, signal) => { exit = `exit code ${String(code)}, signal ${String(signal)}` })
  if (child.pid === undefined) throw new Error(`could not spawn quotad ${name}`)
  const pid = child.pid
  const socketPath = file.sockets[name]
  try {
    await waitForSocket(socketPath, timeoutMs, () => exit === null ? null : `${exit}\n${out}`)
  } catch (err) {
    if (exit === null) child.kill('SIGKILL')
    throw err
  }
  return {
    name,
    pid,
    socketPath,
    output: () => out,
    exited: () => exit,
    stop: async () => {
      if (exit !== null) return
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      const timer = setTimeout(() => { if (exit === null) child.kill('SIGKILL') }, 10_000)
      await exited
      clearTimeout(timer)
    }
  }
}

import { waitForSocket } from './quotad-target.js'
export { waitForSocket }

interface PeersStatus {
  peers?: Array<{ name: string, alive: boolean }>
  ruleAgreement?: Array<{ name: string, shared: boolean }>
}

/** Wait until every client's node sees `peers` alive peers and shares every rule with them. */
export async function waitForPeers (clients: QuotadClient[], peers: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (const client of clients) {
    while (true) {
      const s = await client.status() as PeersStatus
      const alive = (s.peers ?? []).filter(p => p.alive).length
      const shared = (s.ruleAgreement ?? []).every(r => r.shared)
      if (alive >= peers && shared) break
      if (Date.now() > deadline) throw new Error(`${client.socketPath}: cluster did not form: peers ${JSON.stringify(s.peers)}, rules ${JSON.stringify(s.ruleAgreement)}`)
      await sleep(100)
    }
  }
}

// ---------------------------------------------------------------------------
// TCP bytes per process, from ss

/** Per process: per TCP connection (local -> peer), bytes acked (sent) and received so far. */
export type TcpSnapshot = Map<number, Map<string, { out: number, in: number }>>

let ssWorks: boolean | null = null

/** Whether `ss -tinp` is available here (iproute2). */
export function ssAvailable (): boolean {
  if (ssWorks === null) ssWorks = spawnSync('ss', ['-V'], { encoding: 'utf8' }).status === 0
  return ssWorks
}

/** Established TCP connections of `pids`, with their byte counters (empty if ss is missing). */
export function tcpSnapshot (pids: readonly number[]): TcpSnapshot {
  const snap: TcpSnapshot = new Map(pids.map(p => [p, new Map()]))
  if (!ssAvailable()) return snap
  const r = spawnSync('ss', ['-tinpH', 'state', 'established'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) return snap
  // Each socket is a line with addresses and users:((...,pid=N,...)), then an indented tcp_info line.
  const lines = r.stdout.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const head = lines[i]
    if (head.length === 0 || /^\s/.test(head)) continue
    const info = /^\s/.test(lines[i + 1] ?? '') ? lines[i + 1] : ''
    const cols = head.trim().split(/\s+/)
    // With "state established" the State column is omitted: Recv-Q Send-Q Local Peer Process.
    const local = cols[2]
    const peer = cols[3]
    const pidMatch = /pid=(\d+)/.exec(head) ?? /pid=(\d+)/.exec(info)
    if (pidMatch === null) continue
    const conns = snap.get(Number(pidMatch[1]))
    if (conns === undefined) continue
    const acked = /bytes_acked:(\d+)/.exec(info)
    const received = /bytes_received:(\d+)/.exec(info)
    conns.set(`${local}>${peer}`, { out: acked === null ? 0 : Number(acked[1]), in: received === null ? 0 : Number(received[1]) })
  }
  return snap
}

/**
 * Bytes each process sent and received between two snapshots. A connection
 * opened in between counts from 0; one closed in between is lost (counted
 * up to the first snapshot only), so figures are lower bounds then.
 */
export function tcpDelta (before: TcpSnapshot, after: TcpSnapshot): Map<number, { out: number, in: number, connections: number }> {
  const out = new Map<number, { out: number, in: number, connections: number }>()
  for (const [pid, conns] of after) {
    const prev = before.get(pid) ?? new Map()
    let o = 0
    let n = 0
    for (const [k, v] of conns) {
      const p = prev.get(k)
      o += v.out - (p?.out ?? 0)
      n += v.in - (p?.in ?? 0)
    }
    out.set(pid, { out: o, in: n, connections: conns.size })
  }
  return out
}
