/**
 * `quotactl top`: a live terminal view of a whole cluster, from every node's
 * `status`: over HTTP (`/status`) for a node with an `http` address in the
 * cluster file, so nodes on other hosts are read, else over its Unix socket
 * (a node on this host). Members not in the file are listed as the nodes
 * that answered see them. This file owns the I/O; what is shown, and how,
 * is top-render.ts (pure).
 *
 * - polling (`TopPoller`): one client per node, a `status` per refresh; a
 *   node that does not answer is DOWN and is dialled again at the next
 *   refresh, never an error. Decisions per second are the difference of
 *   the rules' allowed/denied counters between two refreshes.
 * - `runTop` ties it to the terminal (clear + home each refresh, q or Ctrl-C
 *   to quit; --once: one frame or JSON snapshot, no clearing; piped: frame
 *   after frame, no escape codes) and returns the exit status; quotactl
 *   exits with it.
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

  /** The node's status: over HTTP where it has an address (any host), else over its socket (this host). */
  private async status (timeoutMs: number): Promise<Obj> {
    const addr = this.target.http
    if (addr !== undefined) {
      let r: Response
      try {
        r = await fetch(`http://${addr}/status`, { signal: AbortSignal.timeout(timeoutMs) })
      } catch (err) {
        const cause = (err as { cause?: { code?: string } }).cause?.code
        throw new Error((err as Error).name === 'TimeoutError' ? `no reply within ${timeoutMs} ms at http://${addr}` : `cannot reach http://${addr}${cause !== undefined ? ` (${cause})` : ''}`)
      }
      if (!r.ok) throw new Error(`http://${addr}/status answered ${r.status}`)
      return await r.json() as Obj
    }
    this.client ??= await QuotadClient.connect({ socketPath: this.target.socket, timeoutMs, reconnect: false })
    return await this.client.status()
  }

  async sample (timeoutMs: number): Promise<{ view: NodeView, status?: Obj }> {
    try {
      const status = await this.status(timeoutMs)
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
    const answered = results.flatMap(r => r.status !== undefined ? [{ name: r.view.name, status: r.status }] : [])
    return {
      at: new Date().toISOString(),
      intervalMs: this.intervalMs,
      nodes: [...results.map(r => r.view), ...membersSeen(results.map(r => r.view.name), answered)],
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
  return nodes.map(n => {
    const http = n.http === undefined ? undefined : reachable(n.http, n.listen)
    return { name: n.name, socket: n.socket, ...(http === undefined ? {} : { http }) }
  })
}

/**
 * Where to reach a node's HTTP listener from here: its `http` address, with
 * a wildcard host (0.0.0.0, ::) replaced by the host of its libp2p `listen`
 * address. Undefined when neither names a host: the socket is then the way
 * (it works on the node's own host).
 */
export function reachable (http: string, listen: string): string | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(http)
  if (m === null) return undefined
  const host = m[1] ?? m[2]
  if (host !== '0.0.0.0' && host !== '::') return http
  const l = /^\/(ip4|ip6|dns4|dns6|dns)\/([^/]+)\//.exec(listen)
  if (l === null || l[2] === '0.0.0.0' || l[2] === '::') return undefined
  return l[1] === 'ip6' ? `[${l[2]}]:${m[3]}` : `${l[2]}:${m[3]}`
}

/**
 * Members not in the cluster file, as the nodes that answered know them (a
 * seed's status lists every peer it hears, members included). A member has
 * no address in the file to read it from, so its row is the seeds' view:
 * up while any node that answered sees it alive.
 */
export function membersSeen (listed: string[], answered: Array<{ name: string, status: Obj }>): NodeView[] {
  const known = new Set(listed)
  const seen = new Map<string, { by: string, alive: boolean, lastHeardMs: number }>()
  for (const { name, status } of answered) {
    if (!Array.isArray(status.peers)) continue
    for (const p of status.peers as Obj[]) {
      if (typeof p.name !== 'string' || known.has(p.name)) continue
      const alive = p.alive === true
      const heard = typeof p.lastHeardMs === 'number' ? p.lastHeardMs : Infinity
      const was = seen.get(p.name)
      // The freshest view wins: alive anywhere is alive.
      if (was === undefined || (alive && !was.alive) || (alive === was.alive && heard < was.lastHeardMs)) seen.set(p.name, { by: name, alive, lastHeardMs: heard })
    }
  }
  return [...seen.entries()].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([name, v]) => ({
    name,
    socket: '',
    up: v.alive,
    member: true,
    seenBy: v.by,
    ...(v.alive ? {} : { error: `not alive at ${v.by} (last heard ${Number.isFinite(v.lastHeardMs) ? `${Math.round(v.lastHeardMs / 1000)} s ago` : 'never'})` }),
    ...(Number.isFinite(v.lastHeardMs) ? { lastHeardMs: v.lastHeardMs } : {}),
    allowedPerS: null,
    deniedPerS: null,
    ruleProblems: [],
    keys: []
  }))
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
  // Piped or redirected: frames one after another, no escape codes (a file or a pager shows them as junk).
  const tty = stdout.isTTY
  if (raw) {
    stdin.setRawMode(true)
    stdin.on('data', onKey)
    stdin.resume()
  }
  process.on('SIGINT', quit)
  process.on('SIGTERM', quit)
  if (tty) stdout.write(HIDE_CURSOR)
  let stopped = false
  void quitting.then(() => { stopped = true })
  try {
    while (!stopped) {
      const started = performance.now()
      const snap = await poller.poll()
      if (stopped) break
      if (!tty) {
        stdout.write(renderTop(snap).join('\n') + '\n\n')
      } else {
        let lines = renderTop(snap, { live: true }).map(l => l.slice(0, stdout.columns ?? 80))
        const rows = stdout.rows ?? 0
        if (rows > 2 && lines.length > rows - 1) lines = [...lines.slice(0, rows - 2), `... ${lines.length - rows + 2} more line(s): enlarge the terminal`]
        stdout.write(CLEAR + lines.join('\n') + '\n')
      }
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
    if (tty) stdout.write(SHOW_CURSOR)
  }
}

async function sleep (ms: number): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, ms))
}
