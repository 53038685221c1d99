/**
 * `quotactl top`: a live terminal view of a whole cluster, from every node's
 * `status` over its Unix socket. This file owns the I/O; what is shown, and
 * how, is top-render.ts (pure).
 *
 * - polling (`TopPoller`): one client per node, a `status` per refresh; a
 *   node that does not answer is DOWN and is dialled again at the next
 *   refresh, never an error. Decisions per second are the difference of
 *   the rules' allowed/denied counters between two refreshes.
 * - `runTop` ties it to the terminal (clear + home each refresh, q or Ctrl-C
 *   to quit; --once: one frame or JSON snapshot, no clearing) and returns
 *   the exit status; quotactl exits with it.
 */
import { basename, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { QuotadClient } from '@quotad/client'
import { loadClusterFile } from '../config/load.js'
import { findNode } from '../config/validate.js'
import { ErrorCodes, ExitCodes, isQuotadError } from '../errors.js'
import { usage } from './common.js'
import { renderTop, rulesOf, summarize, type NodeView, type Obj, type Sample, type Target, type TopSnapshot } from './top-render.js'

// ---- polling ---------------------------------------------------------------

class Probe {
  readonly target: Target
  private client: QuotadClient | null = null
  private prev: Sample | null = null
  private lastUpAt: number

  constructor (target: Target, startedAt: number) {
    this.target = target
    this.lastUpAt = startedAt
  }

  async sample (timeoutMs: number): Promise<{ view: NodeView, status?: Obj }> {
    try {
      this.client ??= await QuotadClient.connect({ socketPath: this.target.socket, timeoutMs, reconnect: false })
      const status = await this.client.status()
      const at = performance.now()
      const { view, sample } = summarize(this.target, status, at, this.prev)
      this.prev = sample
      this.lastUpAt = at
      return { view, status }
    } catch (err) {
      // Not awaited: closing a connection to a hung node waits for it.
      void this.client?.close().catch(() => {})
      this.client = null
      this.prev = null
      return {
        view: {
          name: this.target.name,
          socket: this.target.socket,
          up: false,
          error: isQuotadError(err) && err.code === ErrorCodes.TIMEOUT ? `no reply within ${timeoutMs} ms` : err instanceof Error ? err.message : String(err),
          downForMs: Math.round(performance.now() - this.lastUpAt),
          allowedPerS: null,
          deniedPerS: null,
          ruleProblems: [],
          keys: []
        }
      }
    }
  }

  async close (): Promise<void> {
    await this.client?.close().catch(() => {})
    this.client = null
  }
}

/** Polls every target's status; a node that does not answer is DOWN until it does. */
export class TopPoller {
  readonly intervalMs: number
  private readonly probes: Probe[]
  private readonly timeoutMs: number

  constructor (targets: Target[], intervalMs: number) {
    const now = performance.now()
    this.probes = targets.map(t => new Probe(t, now))
    this.intervalMs = intervalMs
    // A hung node must not hold up the refresh much longer than one interval.
    this.timeoutMs = Math.max(200, Math.min(2000, intervalMs))
  }

  async poll (): Promise<TopSnapshot> {
    const results = await Promise.all(this.probes.map(async p => await p.sample(this.timeoutMs)))
    const first = results.find(r => r.status !== undefined)
    return {
      at: new Date().toISOString(),
      intervalMs: this.intervalMs,
      nodes: results.map(r => r.view),
      rules: first?.status !== undefined ? rulesOf(first.status) : []
    }
  }

  async close (): Promise<void> {
    await Promise.all(this.probes.map(async p => await p.close()))
  }
}

/** The nodes to watch: one socket, every node of a cluster file, or one node of it. */
export async function topTargets (socket?: string, config?: string, node?: string): Promise<Target[]> {
  if (socket !== undefined) return [{ name: basename(socket).replace(/\.sock$/, ''), socket: resolve(socket) }]
  if (config === undefined) throw usage('top needs --socket PATH (one node) or --config FILE (every node of the cluster file)')
  const cfg = await loadClusterFile(resolve(config))
  const nodes = node !== undefined ? [findNode(cfg, node)] : cfg.nodes
  return nodes.map(n => ({ name: n.name, socket: n.socket }))
}

// ---- the terminal loop -----------------------------------------------------

export interface TopOptions {
  intervalMs: number
  /** One frame (rates over one interval), no clearing, then return. */
  once: boolean
  /** With `once`: the snapshot as JSON instead of the frame. */
  json: boolean
}

const CLEAR = '\x1b[2J\x1b[H'
const HIDE_CURSOR = '\x1b[?25l'
const SHOW_CURSOR = '\x1b[?25h'

export async function runTop (targets: Target[], opts: TopOptions): Promise<number> {
  if (opts.json && !opts.once) throw usage('top --json needs --once (one snapshot as JSON)')
  const poller = new TopPoller(targets, opts.intervalMs)
  try {
    if (opts.once) {
      // Two samples one interval apart, so decisions per second are known.
      await poller.poll()
      await sleep(opts.intervalMs)
      const snap = await poller.poll()
      process.stdout.write(opts.json ? JSON.stringify(snap) + '\n' : renderTop(snap).join('\n') + '\n')
      return ExitCodes.OK
    }
    await live(poller, opts.intervalMs)
    return ExitCodes.OK
  } finally {
    await poller.close()
  }
}

async function live (poller: TopPoller, intervalMs: number): Promise<void> {
  const stdin = process.stdin
  const stdout = process.stdout
  let quit: () => void = () => {}
  const quitting = new Promise<void>(resolve => { quit = resolve })
  const onKey = (b: Buffer): void => {
    const s = b.toString()
    if (s.includes('q') || s.includes('Q') || s.includes('\x03')) quit()
  }
  const raw = stdin.isTTY
  if (raw) {
    stdin.setRawMode(true)
    stdin.on('data', onKey)
    stdin.resume()
  }
  process.on('SIGINT', quit)
  process.on('SIGTERM', quit)
  stdout.write(HIDE_CURSOR)
  let stopped = false
  void quitting.then(() => { stopped = true })
  try {
    while (!stopped) {
      const started = performance.now()
      const snap = await poller.poll()
      if (stopped) break
      let lines = renderTop(snap, { live: true }).map(l => l.slice(0, stdout.columns ?? 80))
      const rows = stdout.rows ?? 0
      if (rows > 2 && lines.length > rows - 1) lines = [...lines.slice(0, rows - 2), `... ${lines.length - rows + 2} more line(s): enlarge the terminal`]
      stdout.write(CLEAR + lines.join('\n') + '\n')
      await Promise.race([sleep(Math.max(0, intervalMs - (performance.now() - started))), quitting])
    }
  } finally {
    process.off('SIGINT', quit)
    process.off('SIGTERM', quit)
    if (raw) {
      stdin.off('data', onKey)
      stdin.setRawMode(false)
      stdin.pause()
    }
    stdout.write(SHOW_CURSOR)
  }
}

async function sleep (ms: number): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, ms))
}
