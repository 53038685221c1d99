/**
 * The quotad under test: a real daemon process (`node dist/src/cli/quotad.js
 * --config <file> --node a`) on a one-node cluster file written to a temp dir,
 * or, with `--in-process`, the same Daemon composition root started inside the
 * bench process (for profiling with one `--cpu-prof`; its numbers share one
 * event loop with the load generator and are not comparable).
 *
 * Ready means: a client's ping gets an answer on the socket. Stop is SIGTERM
 * by pid (the CLI then stops the daemon and exits, which also makes
 * `--cpu-prof` write its profile), SIGKILL after 10 s.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { writeSwarmKey } from '../../src/config/swarm-key.js'
import { loadClusterFile } from '../../src/config/load.js'
import { Daemon } from '../../src/daemon.js'
import { silentLogger } from '../../src/util/log.js'

/** dist/src/cli/quotad.js, found from this file's place in dist/bench/lib. */
export const QUOTAD_CLI = fileURLToPath(new URL('../../src/cli/quotad.js', import.meta.url))

export interface BenchRule {
  name: string
  match: string
  limit: number
  per: string
  algorithm: 'fixed-window'
}

export interface BenchCluster {
  file: string
  socketPath: string
  raw: Record<string, unknown>
}

/** Write `cluster.json` and `swarm.key` for one node "a" in `dir`. */
export async function writeBenchCluster (dir: string, rules: readonly BenchRule[]): Promise<BenchCluster> {
  const socketPath = path.join(dir, 'a.sock')
  const raw = {
    cluster: { name: 'bench', secretFile: 'swarm.key' },
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: socketPath, dataDir: path.join(dir, 'data') }],
    rules,
    limits: { maxKeys: 1_000_000, maxBatchItems: 1000, maxInflightPerConnection: 4096 }
  }
  const file = path.join(dir, 'cluster.json')
  writeFileSync(file, JSON.stringify(raw, null, 2) + '\n')
  await writeSwarmKey(path.join(dir, 'swarm.key'))
  return { file, socketPath, raw }
}

export interface QuotadTarget {
  readonly mode: 'process' | 'in-process'
  readonly socketPath: string
  /** The daemon's pid (null in-process). */
  readonly pid: number | null
  stop: () => Promise<void>
}

/** Wait until a ping on `socketPath` is answered; `alive` says whether to keep trying. */
export async function waitForSocket (socketPath: string, timeoutMs: number, alive: () => string | null): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = 'no attempt'
  while (Date.now() < deadline) {
    const dead = alive()
    if (dead !== null) throw new Error(`quotad exited before it served: ${dead}`)
    if (existsSync(socketPath)) {
      try {
        const c = await QuotadClient.connect({ socketPath, reconnect: false, timeoutMs: 1000 })
        try {
          await c.ping()
          return
        } finally {
          await c.close()
        }
      } catch (err) {
        last = err instanceof Error ? err.message : String(err)
      }
    }
    await sleep(25)
  }
  throw new Error(`quotad did not answer a ping on ${socketPath} within ${timeoutMs} ms (last: ${last})`)
}

/** Start `node [nodeArgs] dist/src/cli/quotad.js --config FILE --node a` and wait until it serves. */
export async function startDaemonProcess (cluster: BenchCluster, nodeArgs: string[] = [], quotadArgs: string[] = []): Promise<QuotadTarget> {
  if (!existsSync(QUOTAD_CLI)) throw new Error(`${QUOTAD_CLI} does not exist: run npx tsc -p . first`)
  const args = [...nodeArgs, QUOTAD_CLI, '--config', cluster.file, '--node', 'a', '--log-level', 'warn', ...quotadArgs]
  const child: ChildProcess = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const keep = (b: Buffer): void => { output = (output + b.toString()).slice(-8000) }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  let exit: string | null = null
  child.once('exit', (code, signal) => { exit = `exit code ${String(code)}, signal ${String(signal)}\n${output}` })
  if (child.pid === undefined) throw new Error('could not spawn quotad')
  const pid = child.pid
  try {
    await waitForSocket(cluster.socketPath, 15_000, () => exit)
  } catch (err) {
    if (exit === null) child.kill('SIGKILL')
    throw err
  }
  return {
    mode: 'process',
    socketPath: cluster.socketPath,
    pid,
    stop: async () => {
      if (exit !== null) return
      const exited = once(child, 'exit')
      process.kill(pid, 'SIGTERM')
      const timer = setTimeout(() => { if (exit === null) process.kill(pid, 'SIGKILL') }, 10_000)
      await exited
      clearTimeout(timer)
    }
  }
}

/** The same Daemon, in this process. */
export async function startInProcess (cluster: BenchCluster): Promise<QuotadTarget> {
  const daemon = await Daemon.start({ config: await loadClusterFile(cluster.file), node: 'a', logger: silentLogger })
  await waitForSocket(cluster.socketPath, 5000, () => null)
  return { mode: 'in-process', socketPath: cluster.socketPath, pid: null, stop: () => daemon.stop() }
}
