#!/usr/bin/env node
/**
 * `npm start`: run every node of a cluster file as a real `quotad` process and
 * drive a small skewed load at them through their Unix sockets, printing what
 * each node allowed and denied every second. Ctrl-C (or --duration) stops the
 * load, then every node with SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { QuotadClient } from '../client/index.js'
import { loadClusterFile } from '../config/load.js'
import { writeSwarmKey } from '../config/swarm-key.js'
import type { ClusterConfig } from '../config/types.js'
import { fail, parseCli, intFlag } from './common.js'

const QUOTAD = resolve(dirname(fileURLToPath(import.meta.url)), 'quotad.js')

/** Demand per second per node: node 0 is hot, the last is nearly idle. */
const SKEW = [0.6, 0.3, 0.1]

interface Counts { allowed: number, denied: number }

async function main (): Promise<void> {
  const { values } = parseCli({
    options: {
      config: { type: 'string', default: 'cluster.example.json' },
      duration: { type: 'string' },
      rate: { type: 'string' }
    }
  })
  const file = resolve(values.config as string)
  const cfg = await loadClusterFile(file)
  const durationS = intFlag('duration', values.duration, 0)
  if (!existsSync(cfg.cluster.secretFile)) await writeSwarmKey(cfg.cluster.secretFile)

  const children = cfg.nodes.map(n => startNode(file, n.name))
  const clients = await Promise.all(cfg.nodes.map(async n => await connectWhenUp(n.socket)))
  process.stdout.write(`quotad demo: ${cfg.nodes.length} nodes (${cfg.nodes.map(n => n.name).join(', ')}) from ${file}\n`)

  const rule = pickRule(cfg)
  const totalRate = intFlag('rate', values.rate, Math.round(rule.limit * 1.5 * 1000 / rule.perMs), 1)
  process.stdout.write(`load: ${totalRate} req/s on "${rule.match}" (rule ${rule.name}: ${rule.limit} per ${rule.per}, ${rule.algorithm}), split ${cfg.nodes.map((n, i) => `${n.name} ${Math.round(share(i, cfg.nodes.length) * 100)}%`).join(', ')}\n\n`)
  process.stdout.write(`${'second'.padEnd(8)}${cfg.nodes.map(n => `${n.name}: allowed/denied`.padEnd(24)).join('')}cluster allowed\n`)

  const counts: Counts[] = cfg.nodes.map(() => ({ allowed: 0, denied: 0 }))
  const credit = cfg.nodes.map(() => 0)
  const tickMs = 10
  const load = setInterval(() => {
    for (let i = 0; i < clients.length; i++) {
      credit[i] += totalRate * share(i, clients.length) * tickMs / 1000
      for (; credit[i] >= 1; credit[i]--) {
        clients[i].acquire(rule.match).then(d => { if (d.allowed) counts[i].allowed++; else counts[i].denied++ }, () => {})
      }
    }
  }, tickMs)
  let second = 0
  const report = setInterval(() => {
    second++
    const row = counts.map(c => `${c.allowed}/${c.denied}`.padEnd(24)).join('')
    const total = counts.reduce((n, c) => n + c.allowed, 0)
    process.stdout.write(`${String(second).padEnd(8)}${row}${total}\n`)
    for (const c of counts) { c.allowed = 0; c.denied = 0 }
    if (durationS > 0 && second >= durationS) void shutdown()
  }, 1000)

  let stopping = false
  const shutdown = async (): Promise<void> => {
    if (stopping) return
    stopping = true
    clearInterval(load)
    clearInterval(report)
    await Promise.all(clients.map(async c => await c.close()))
    await Promise.all(children.map(async c => await stopChild(c)))
    process.stdout.write('stopped every node\n')
    process.exit(0)
  }
  process.on('SIGINT', () => { void shutdown() })
  process.on('SIGTERM', () => { void shutdown() })
}

function share (i: number, n: number): number {
  const weights = Array.from({ length: n }, (_, j) => SKEW[j] ?? SKEW[SKEW.length - 1])
  return weights[i] / weights.reduce((a, b) => a + b, 0)
}

/** The first exact-key rule: one global key every node shares. */
function pickRule (cfg: ClusterConfig) {
  const r = cfg.rules.find(r => !r.match.includes('*'))
  if (r === undefined) throw new Error('the demo needs at least one exact-key rule in the cluster file')
  return r
}

function startNode (file: string, name: string): ChildProcess {
  const child = spawn(process.execPath, [QUOTAD, '--config', file, '--node', name, '--log-level', 'warn'], { stdio: ['ignore', 'inherit', 'inherit'] })
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null) process.stderr.write(`node ${name} exited with status ${code}\n`)
  })
  return child
}

async function connectWhenUp (socketPath: string): Promise<QuotadClient> {
  const deadline = Date.now() + 15_000
  while (true) {
    try {
      const c = await QuotadClient.connect({ socketPath, timeoutMs: 2000 })
      await c.ping()
      return c
    } catch (err) {
      if (Date.now() > deadline) throw err
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
}

async function stopChild (c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return
  await new Promise<void>(resolve => {
    c.once('exit', () => resolve())
    c.kill('SIGTERM')
  })
}

main().catch(err => fail(err))
