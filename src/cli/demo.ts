#!/usr/bin/env node
/**
 * `npm start`: run every node of a cluster file as a real `quotad` process and
 * drive a skewed load at them through their Unix sockets, so a newcomer sees
 * the product work. Every second it prints, per node, what it allowed and
 * denied, the tokens it holds of the demo key and the tokens moved in/out
 * over that second (from each node's `status`), and the cluster total.
 *
 * The load runs in phases, over and over:
 * 1. the first exact-key rule (payments), node 0 hot: tokens flow to it;
 * 2. the same key, the last node hot: the tokens follow the demand;
 * 3. only if the file has an exact-key fixed-window rule with a window of 10 s
 *    to 1 h (e.g. reports, 300 per 1m): a load that nearly exhausts it, so the
 *    cluster gets tight (*) and paces its last tokens over the window.
 *
 * The nodes run in their own process group, so Ctrl-C reaches only the demo:
 * it stops the load first, then every node with SIGTERM, and exits 0.
 * --duration S does the same by itself after S seconds. The nodes stop one
 * at a time, each once its predecessor no longer looks alive to the others:
 * a stopping node hands its tokens to a live peer, and a peer that is itself
 * stopping may drop them (they would be stranded, and the next `npm start`
 * would have fewer). The last node keeps its tokens in its state file.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { QuotadClient } from '@quotad/client'
import { loadClusterFile } from '../config/load.js'
import { writeSwarmKey } from '../config/swarm-key.js'
import type { ClusterConfig, RuleConfig } from '../config/types.js'
import { defaultTuning } from '../cluster/tuning.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import { fail, parseCli, intFlag } from './common.js'
import { summarize, type KeyView } from './top-render.js'

const QUOTAD = resolve(dirname(fileURLToPath(import.meta.url)), 'quotad.js')

/** Seconds per phase. */
const SHIFT_S = 10
const TIGHT_S = 20
/** Phase 3 spends this fraction of the stock in about TIGHT_RAMP_S seconds, then the cluster is tight. */
const TIGHT_RAMP_S = 6
const NODE_STOP_TIMEOUT_MS = 10_000

interface Phase {
  rule: RuleConfig
  seconds: number
  /** Total requests per second, split by `weights`. */
  rate: number
  weights: number[]
  banner: (startedAt: number) => string
}

interface Counts { allowed: number, denied: number }

/** Set once Ctrl-C (or --duration) began the shutdown: startup steps give up quietly. */
let stopping = false

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
  const mainRule = pickRule(cfg)
  const totalRate = intFlag('rate', values.rate, Math.round(mainRule.limit * 1.5 * 1000 / mainRule.perMs), 1)
  if (!existsSync(cfg.cluster.secretFile)) await writeSwarmKey(cfg.cluster.secretFile)
  const names = cfg.nodes.map(n => n.name)
  const phases = makePhases(cfg, mainRule, totalRate)

  for (const n of cfg.nodes) {
    if (await answers(n.socket)) throw new QuotadError(ErrorCodes.SOCKET_IN_USE, `a quotad already serves ${n.socket}: is another demo running with ${file}?`)
  }
  const children: ChildProcess[] = []
  const gapMs = defaultTuning(cfg.cluster.gossipIntervalMs).aliveTimeoutMs + 300
  const stopAll = async (): Promise<boolean> => await stopInTurn(children, names, gapMs)
  // Whatever happens to the demo, its nodes do not outlive it.
  process.on('exit', () => { for (const c of children) if (running(c)) c.kill('SIGTERM') })
  let shutdown = async (): Promise<void> => {
    if (stopping) return
    stopping = true
    process.stdout.write('stopping every node (SIGTERM)\n')
    process.exit(await stopAll() ? 0 : 1)
  }
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => { void shutdown() })

  process.stdout.write(`quotad demo: ${names.length} nodes (${names.join(', ')}) from ${file}\n` + legend(durationS))
  const gone = (): string | undefined => names.find((_, i) => children[i] !== undefined && !running(children[i]))
  const clients = await startAll(cfg, file, children, () => stopping, gone)
  await waitForPeers(clients, names.length - 1)
  if (stopping) return
  // A node that died at start (its log says why) may have left another process's socket for us to talk to.
  const dead = gone()
  if (dead !== undefined) throw new QuotadError(ErrorCodes.CONNECTION, `node ${dead} exited during startup (see its log above)`)
  if (phases.length < 3) {
    process.stdout.write(`(To also see tightening, add a fixed-window rule to ${file}, e.g.\n` +
      ' { "name": "reports", "match": "reports", "limit": 300, "per": "1m",\n' +
      '   "algorithm": "fixed-window", "pace": true })\n')
  }

  const counts: Counts[] = names.map(() => ({ allowed: 0, denied: 0 }))
  // Tokens in and out per node over the last second: the cumulative counters, less what they were.
  const moved = new Map<string, { in: number, out: number }>()
  const credit = names.map(() => 0)
  let phase = phases[0]
  let phaseIndex = 0
  let phaseLeft = phase.seconds
  let window = windowIndex(phase.rule)
  process.stdout.write(phase.banner(0) + '\n' + header(names))
  const tickMs = 10
  const load = setInterval(() => {
    for (let i = 0; i < clients.length; i++) {
      credit[i] += phase.rate * phase.weights[i] * tickMs / 1000
      const key = phase.rule.match
      for (; credit[i] >= 1; credit[i]--) {
        clients[i].acquire(key).then(d => { if (d.allowed) counts[i].allowed++; else counts[i].denied++ }, () => {})
      }
    }
  }, tickMs)

  let second = 0
  let reporting = false
  const report = setInterval(() => {
    if (reporting || stopping) return
    reporting = true
    second++
    const done = counts.map(c => ({ ...c }))
    for (const c of counts) { c.allowed = 0; c.denied = 0 }
    const key = phase.rule.match
    void Promise.all(clients.map(async (c, i) => await keyAt(c, names[i], key))).then(keys => {
      if (stopping) return
      process.stdout.write(line(second, done, keys, moved))
      if (durationS > 0 && second >= durationS) { void shutdown(); return }
      const w = windowIndex(phase.rule)
      if (w !== window && phaseIndex === 2) process.stdout.write(`-- the ${phase.rule.per} window of "${key}" rolled over: the spent tokens are back\n`)
      window = w
      if (--phaseLeft <= 0) {
        phaseIndex = (phaseIndex + 1) % phases.length
        phase = phases[phaseIndex]
        phaseLeft = phase.seconds
        window = windowIndex(phase.rule)
        credit.fill(0)
        process.stdout.write(phase.banner(second) + '\n' + header(names))
      }
    }).finally(() => { reporting = false })
  }, 1000)

  shutdown = async () => {
    if (stopping) return
    stopping = true
    clearInterval(load)
    clearInterval(report)
    process.stdout.write('stopping: the load, then every node (SIGTERM)\n')
    await Promise.all(clients.map(async c => await c.close()))
    const ok = await stopAll()
    process.stdout.write(ok ? 'stopped every node\n' : 'some node did not stop cleanly (see above)\n')
    process.exit(ok ? 0 : 1)
  }
}

/** The phases, from the rules the file has. */
function makePhases (cfg: ClusterConfig, main: RuleConfig, totalRate: number): Phase[] {
  const n = cfg.nodes.length
  const names = cfg.nodes.map(x => x.name)
  const first = names[0]
  const last = names[n - 1]
  const split = (w: number[]): string => names.map((x, i) => `${x} ${Math.round(w[i] * 100)}%`).join(' ')
  const what = (r: RuleConfig): string => `"${r.match}" (${r.limit} per ${r.per}, ${r.algorithm})`
  const hotFirst = skew(n, 0)
  const hotLast = skew(n, n - 1)
  const phases: Phase[] = [
    {
      rule: main, seconds: SHIFT_S, rate: totalRate, weights: hotFirst,
      banner: t => `-- ${t}s: ${totalRate} req/s on ${what(main)}, ${first} is hot: ${split(hotFirst)}`
    },
    {
      rule: main, seconds: SHIFT_S, rate: totalRate, weights: hotLast,
      banner: t => `-- ${t}s: the hot node moves from ${first} to ${last} (${split(hotLast)}): tokens follow it`
    }
  ]
  const fixed = cfg.rules.find(r => r.algorithm === 'fixed-window' && !r.match.includes('*') && r.perMs >= 10_000 && r.perMs <= 3_600_000)
  if (fixed !== undefined) {
    const hot = skew(n, Math.floor(n / 2))
    const rate = Math.max(1, Math.round(0.85 * fixed.limit / TIGHT_RAMP_S))
    phases.push({
      rule: fixed, seconds: TIGHT_S, rate, weights: hot,
      banner: t => {
        const left = Math.ceil((windowIndex(fixed) + 1) * fixed.perMs / 1000 - Date.now() / 1000)
        return `-- ${t}s: ${rate} req/s on ${what(fixed)}, ${split(hot)}\n` +
          `   near exhaustion it gets tight (*): each node paces its last tokens (window resets in ${left}s)`
      }
    })
  }
  return phases
}

/** Weights for n nodes: the hot node 6, its neighbours 3, the rest 1; normalized. */
function skew (n: number, hot: number): number[] {
  const w = Array.from({ length: n }, (_, i) => Math.abs(i - hot) === 0 ? 6 : Math.abs(i - hot) === 1 ? 3 : 1)
  const sum = w.reduce((a, b) => a + b, 0)
  return w.map(x => x / sum)
}

/** The first exact-key rule: one global key every node shares. */
function pickRule (cfg: ClusterConfig): RuleConfig {
  const r = cfg.rules.find(r => !r.match.includes('*'))
  if (r === undefined) throw new Error('the demo needs at least one exact-key rule in the cluster file')
  return r
}

/** Index of the calendar-aligned window now (fixed windows are UTC-aligned). */
function windowIndex (rule: RuleConfig): number {
  return Math.floor(Date.now() / rule.perMs)
}

// ---- output ------------------------------------------------------------------

/**
 * Said before the nodes start, so it is read while they do: that the demo
 * does not end by itself (a newcomer should not wait for it to), and what the
 * columns of its rows are.
 */
function legend (durationS: number): string {
  return (durationS > 0
    ? `It runs its load phases for ${durationS} s (--duration), then stops every node.\n`
    : 'It runs its load phases over and over until you press Ctrl-C, which stops every node cleanly.\n') +
    'Each second it prints one row: the time since the load began, then per node\n' +
    '  ok/deny  requests the node allowed / denied in that second\n' +
    '  held     tokens of the key that the node holds now; * = tight: the cluster is near its limit\n' +
    '           and the node paces out its last tokens\n' +
    '  in/out   tokens its peers moved to it / it moved to its peers in that second\n' +
    'and under "cluster" the same summed over every node (ok/deny, held).\n' +
    'Watch: held tokens follow the busy node; the cluster never allows more than its limit.\n'
}

/** Per node: ok/deny (8), held + tight mark (7), in/out (9), gap (2). */
const CELL = 26
const perLine = (n: number): number => Math.max(1, Math.min(n, Math.floor((100 - 6 - 14) / CELL)))

function header (names: string[]): string {
  const per = perLine(names.length)
  const lines: string[] = []
  for (let i = 0; i < names.length; i += per) {
    const group = names.slice(i, i + per)
    const last = i + per >= names.length
    lines.push('time  ' + group.map(n => `-- ${n} `.padEnd(CELL, '-')).join('') + (last ? ' -- cluster --' : ''))
    lines.push('      ' + group.map(() => 'ok/deny'.padStart(8) + 'held '.padStart(7) + 'in/out'.padStart(9) + '  ').join('') +
      (last ? 'ok/deny'.padStart(8) + 'held'.padStart(6) : ''))
  }
  return lines.join('\n') + '\n'
}

function line (second: number, counts: Counts[], keys: Array<KeyView | undefined>, last: Map<string, { in: number, out: number }>): string {
  const per = perLine(counts.length)
  const cell = (c: Counts, k: KeyView | undefined, i: number): string => {
    const held = k === undefined ? '?' : `${Math.floor(k.held)}${k.tight ? '*' : ' '}`
    let moved = '?'
    if (k !== undefined) {
      const id = `${i}/${k.key}`
      const was = last.get(id) ?? { in: k.transfersIn, out: k.transfersOut }
      moved = `${Math.round(k.transfersIn - was.in)}/${Math.round(k.transfersOut - was.out)}`
      last.set(id, { in: k.transfersIn, out: k.transfersOut })
    }
    return `${c.allowed}/${c.denied}`.padStart(8) + held.padStart(7) + moved.padStart(9) + '  '
  }
  const ok = counts.reduce((n, c) => n + c.allowed, 0)
  const no = counts.reduce((n, c) => n + c.denied, 0)
  const held = keys.every(k => k !== undefined) ? String(Math.floor(keys.reduce((n, k) => n + (k?.held ?? 0), 0))) : '?'
  const lines: string[] = []
  for (let i = 0; i < counts.length; i += per) {
    const last = i + per >= counts.length
    lines.push((i === 0 ? `${second}s`.padStart(4) + '  ' : '      ') +
      counts.slice(i, i + per).map((c, j) => cell(c, keys[i + j], i + j)).join('') +
      (last ? `${ok}/${no}`.padStart(8) + held.padStart(6) : ''))
  }
  return lines.map(l => l.trimEnd()).join('\n') + '\n'
}

// ---- nodes ---------------------------------------------------------------------

/** The demo key's figures at one node, from its status; undefined if it did not answer. */
async function keyAt (client: QuotadClient, name: string, key: string): Promise<KeyView | undefined> {
  try {
    const status = await client.status()
    return summarize({ name, socket: client.socketPath }, status, 0, null).view.keys.find(k => k.key === key)
  } catch {
    return undefined
  }
}

/**
 * Start every node. With fixed ports, all at once. With port 0 (the OS picks;
 * the tests do this), one at a time: each later node reads a copy of the file,
 * next to it, that holds the real addresses of the nodes before it.
 */
async function startAll (cfg: ClusterConfig, file: string, children: ChildProcess[], stopped: () => boolean, gone: () => string | undefined): Promise<QuotadClient[]> {
  if (!cfg.nodes.some(n => /\/tcp\/0$/.test(n.listen))) {
    for (const n of cfg.nodes) children.push(startNode(file, n.name))
    return await Promise.all(cfg.nodes.map(async n => await connectWhenUp(n.socket, stopped, gone)))
  }
  const raw = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Array<{ name: string, listen: string }> }
  const derived = join(dirname(file), `.${basename(file)}.demo-${process.pid}.json`)
  process.on('exit', () => rmSync(derived, { force: true }))
  let current = file
  const clients: QuotadClient[] = []
  for (const n of cfg.nodes) {
    children.push(startNode(current, n.name))
    const c = await connectWhenUp(n.socket, stopped, gone)
    clients.push(c)
    const s = await c.status() as { cluster?: { listen?: string[] } }
    const addr = s.cluster?.listen?.[0]?.replace(/\/p2p\/.*$/, '')
    const entry = raw.nodes.find(x => x.name === n.name)
    if (addr !== undefined && entry !== undefined) entry.listen = addr
    writeFileSync(derived, JSON.stringify(raw, null, 2))
    current = derived
  }
  return clients
}

function startNode (file: string, name: string): ChildProcess {
  // detached: its own process group, so the terminal's Ctrl-C reaches the demo only.
  const child = spawn(process.execPath, [QUOTAD, '--config', file, '--node', name, '--log-level', 'warn'],
    { stdio: ['ignore', 'inherit', 'inherit'], detached: true })
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null) process.stderr.write(`node ${name} exited with status ${code}\n`)
  })
  return child
}

async function connectWhenUp (socketPath: string, stopped: () => boolean, gone: () => string | undefined): Promise<QuotadClient> {
  const deadline = performance.now() + 15_000
  while (true) {
    const dead = gone()
    if (dead !== undefined) throw new QuotadError(ErrorCodes.CONNECTION, `node ${dead} exited during startup (see its log above)`)
    try {
      const c = await QuotadClient.connect({ socketPath, timeoutMs: 2000 })
      await c.ping()
      return c
    } catch (err) {
      if (stopped()) await new Promise(() => {}) // the shutdown exits
      if (performance.now() > deadline) throw err
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
}

/** Whether something already answers on a socket. */
async function answers (socketPath: string): Promise<boolean> {
  try {
    const c = await QuotadClient.connect({ socketPath, timeoutMs: 1000, reconnect: false })
    await c.close()
    return true
  } catch {
    return false
  }
}

/** Give the nodes up to 15 s to see each other, so the load starts on a formed cluster. */
async function waitForPeers (clients: QuotadClient[], peers: number): Promise<void> {
  if (peers <= 0) return
  process.stdout.write('waiting for the nodes to find each other...\n')
  const deadline = performance.now() + 15_000
  while (performance.now() < deadline) {
    const seen = await Promise.all(clients.map(async c => {
      const s = await c.status().catch(() => ({})) as { peers?: Array<{ alive?: boolean }> }
      return (s.peers ?? []).filter(p => p.alive === true).length
    }))
    if (seen.every(n => n >= peers)) return
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  process.stdout.write('(not every node sees every other yet; starting the load anyway)\n')
}

function running (c: ChildProcess): boolean {
  return c.exitCode === null && c.signalCode === null
}

/** SIGTERM the nodes one at a time, `gapMs` apart. True if all stopped cleanly. */
async function stopInTurn (children: ChildProcess[], names: string[], gapMs: number): Promise<boolean> {
  let ok = true
  for (let i = 0; i < children.length; i++) {
    if (i > 0 && running(children[i])) await new Promise(resolve => setTimeout(resolve, gapMs))
    const clean = await stopChild(children[i])
    process.stdout.write(`  ${names[i]} ${clean ? 'stopped' : 'did NOT stop cleanly'}\n`)
    ok &&= clean
  }
  return ok
}

async function stopChild (c: ChildProcess): Promise<boolean> {
  if (!running(c)) return c.exitCode === 0 || c.signalCode === 'SIGTERM'
  return await new Promise<boolean>(resolve => {
    const timer = setTimeout(() => { c.kill('SIGKILL') }, NODE_STOP_TIMEOUT_MS)
    c.once('exit', code => { clearTimeout(timer); resolve(code === 0) })
    c.kill('SIGTERM')
  })
}

main().catch(err => { if (!stopping) fail(err) })
