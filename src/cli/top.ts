/**
 * `quotactl top`: a live terminal view of a whole cluster, from every node's
 * `status` over its Unix socket. It owns three separate steps so each can be
 * tested and reused (the demo reads key figures through `summarize`):
 *
 * - polling (`TopPoller`): one client per node, a `status` per refresh; a
 *   node that does not answer is DOWN and is dialled again at the next
 *   refresh, never an error. Decisions per second are the difference of
 *   the rules' allowed/denied counters between two refreshes.
 * - the snapshot (`TopSnapshot`): plain JSON, what `--once --json` prints.
 * - rendering (`renderTop`): a pure function, snapshot -> lines of at most
 *   `width` (80) columns.
 *
 * `runTop` ties them to the terminal (clear + home each refresh, q or Ctrl-C
 * to quit) and returns the exit status; quotactl exits with it.
 */
import { basename, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { QuotadClient } from '../client/index.js'
import { loadClusterFile } from '../config/load.js'
import { findNode } from '../config/validate.js'
import { ExitCodes } from '../errors.js'
import { usage } from './common.js'

/** A node to watch: a display name and its socket. */
export interface Target { name: string, socket: string }

/** One key at one node. `rate` and `clusterRemaining` are null for a node not in cluster mode. */
export interface KeyView {
  key: string
  rule: string
  held: number
  rate: number | null
  clusterRemaining: number | null
  transfersIn: number
  transfersOut: number
  stranded: number
  tight: boolean
}

export interface RuleProblem { rule: string, differ: string[] }

export interface NodeView {
  name: string
  socket: string
  up: boolean
  /** Why it is DOWN. */
  error?: string
  /** How long it has been DOWN (since it last answered, or since top started). */
  downForMs?: number
  uptimeMs?: number
  /** Cut off from every peer (cluster mode). */
  isolated?: boolean
  peersAlive?: number
  peersKnown?: number
  /** Decisions since the node started, over all rules. */
  allowed?: number
  denied?: number
  /** Decisions per second since the previous refresh; null on the first one. */
  allowedPerS: number | null
  deniedPerS: number | null
  keyCount?: number
  waiters?: number
  /** Rules some alive peer has with other settings: their tokens are not shared with it. */
  ruleProblems: RuleProblem[]
  keys: KeyView[]
}

export interface RuleInfo { name: string, match: string, algorithm: string, limit: number, per: string }

export interface TopSnapshot {
  /** When the snapshot was taken (ISO 8601, UTC). */
  at: string
  intervalMs: number
  nodes: NodeView[]
  /** The rules, as the first node that answered reports them. */
  rules: RuleInfo[]
}

// ---- reading a status ------------------------------------------------------

type Obj = Record<string, unknown>

const num = (v: unknown, dflt = 0): number => typeof v === 'number' && Number.isFinite(v) ? v : dflt
const str = (v: unknown, dflt = ''): string => typeof v === 'string' ? v : dflt
const arr = (v: unknown): Obj[] => Array.isArray(v) ? v.filter((x): x is Obj => x !== null && typeof x === 'object') : []

/** Counters of one sample, kept to turn the next one into rates. */
export interface Sample { atMs: number, uptimeMs: number, allowed: number, denied: number }

/**
 * A node's `status` (as the daemon sends it) turned into a NodeView. Pure.
 * With `prev` (the previous sample of the same node), rates are filled in;
 * a restart (uptime went back) or a reload that reset counters gives null.
 */
export function summarize (target: Target, status: Obj, atMs: number, prev: Sample | null): { view: NodeView, sample: Sample } {
  const rules = arr(status.rules)
  const allowed = rules.reduce((n, r) => n + num(r.allowed), 0)
  const denied = rules.reduce((n, r) => n + num(r.denied), 0)
  const uptimeMs = num(status.uptimeMs)
  const sample: Sample = { atMs, uptimeMs, allowed, denied }
  let allowedPerS: number | null = null
  let deniedPerS: number | null = null
  const dt = prev === null ? 0 : (atMs - prev.atMs) / 1000
  if (prev !== null && dt > 0 && uptimeMs >= prev.uptimeMs && allowed >= prev.allowed && denied >= prev.denied) {
    allowedPerS = (allowed - prev.allowed) / dt
    deniedPerS = (denied - prev.denied) / dt
  }
  const cluster = status.cluster !== null && typeof status.cluster === 'object' ? status.cluster as Obj : undefined
  const peers = arr(status.peers)
  const ruleProblems = arr(status.ruleAgreement)
    .filter(r => r.shared === false)
    .map(r => ({ rule: str(r.name), differ: Array.isArray(r.differ) ? r.differ.map(String) : [] }))
  const keys: KeyView[] = cluster !== undefined
    ? arr(status.clusterKeys).map(k => ({
      key: str(k.key),
      rule: str(k.rule),
      held: num(k.held),
      rate: num(k.rate),
      clusterRemaining: num(k.clusterRemaining),
      transfersIn: num(k.transfersIn),
      transfersOut: num(k.transfersOut),
      stranded: num(k.stranded),
      tight: k.tight === true
    }))
    : arr(status.activeKeys).map(k => ({
      key: str(k.key), rule: str(k.rule), held: num(k.held), rate: null, clusterRemaining: null, transfersIn: 0, transfersOut: 0, stranded: 0, tight: false
    }))
  const view: NodeView = {
    name: str(status.node, target.name),
    socket: target.socket,
    up: true,
    uptimeMs,
    allowed,
    denied,
    allowedPerS,
    deniedPerS,
    keyCount: num(status.keys),
    waiters: num(status.waiters),
    ruleProblems,
    keys
  }
  if (cluster !== undefined) {
    view.isolated = cluster.isolated === true
    view.peersAlive = peers.filter(p => p.alive === true).length
    view.peersKnown = peers.length
  }
  return { view, sample }
}

export function rulesOf (status: Obj): RuleInfo[] {
  return arr(status.rules).map(r => ({ name: str(r.name), match: str(r.match), algorithm: str(r.algorithm), limit: num(r.limit), per: str(r.per) }))
}

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
      const client = this.client
      this.client = null
      this.prev = null
      await client?.close().catch(() => {})
      return {
        view: {
          name: this.target.name,
          socket: this.target.socket,
          up: false,
          error: err instanceof Error ? err.message : String(err),
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

// ---- rendering -------------------------------------------------------------

export interface RenderOptions {
  /** Columns; every line is cut to this. @default 80 */
  width?: number
  /** Keys shown, busiest (by cluster-wide rate) first. @default 20 */
  maxKeys?: number
  /** Add the "q: quit" hint. */
  live?: boolean
}

/** A number in at most ~6 characters: 12, 12.5, 12.3k, 4.1M. */
export function fmt (n: number | null | undefined, decimals = 1): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-'
  const a = Math.abs(n)
  if (a >= 1e9) return (n / 1e9).toFixed(1) + 'G'
  if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M'
  if (a >= 1e4) return (n / 1e3).toFixed(1) + 'k'
  if (Number.isInteger(n)) return String(n)
  return n.toFixed(decimals)
}

export function fmtDuration (ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-'
  const s = Math.floor(ms / 1000)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`
  return `${Math.floor(s / 86400)}d${String(Math.floor(s / 3600) % 24).padStart(2, '0')}h`
}

function cut (s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, Math.max(0, n - 1)) + '~'
}

/** Cells: a positive width pads at the end (text), a negative one at the start (numbers). */
function row (cells: Array<[string, number]>): string {
  return cells.map(([s, w]) => w > 0 ? cut(s, w).padEnd(w) : cut(s, -w).padStart(-w)).join(' ').trimEnd()
}

const NODE_COLS = [8, 12, -7, -5, -8, -8, -6, -5] as const
const KEY_COLS = [16, 8, -7, -7, -8, -6, -6, -6, 5] as const

function cols (widths: readonly number[], values: string[]): string {
  return row(values.map((v, i) => [v, widths[i]]))
}

/** Keys over all nodes, busiest first. */
function keyGroups (nodes: NodeView[]): Array<{ key: string, rule: string, rate: number, held: number, at: Array<{ node: string, k: KeyView }> }> {
  const byKey = new Map<string, { key: string, rule: string, rate: number, held: number, at: Array<{ node: string, k: KeyView }> }>()
  for (const n of nodes) {
    for (const k of n.keys) {
      let g = byKey.get(k.key)
      if (g === undefined) { g = { key: k.key, rule: k.rule, rate: 0, held: 0, at: [] }; byKey.set(k.key, g) }
      g.rate += k.rate ?? 0
      g.held += k.held
      g.at.push({ node: n.name, k })
    }
  }
  return [...byKey.values()].sort((x, y) => y.rate - x.rate || y.held - x.held || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0))
}

/** The whole screen, as lines. Pure: the same snapshot always gives the same lines. */
export function renderTop (snap: TopSnapshot, opts: RenderOptions = {}): string[] {
  const width = opts.width ?? 80
  const maxKeys = opts.maxKeys ?? 20
  const up = snap.nodes.filter(n => n.up).length
  const down = snap.nodes.length - up
  const out: string[] = []
  const time = snap.at.length >= 19 ? snap.at.slice(11, 19) + ' UTC' : snap.at
  out.push(`quotad top - ${snap.nodes.length} node${snap.nodes.length === 1 ? '' : 's'}, ${up} up` +
    `${down > 0 ? `, ${down} DOWN` : ''} - ${time} - every ${fmt(snap.intervalMs / 1000)}s${opts.live === true ? ' - q: quit' : ''}`)
  out.push('')
  out.push(cols(NODE_COLS, ['NODE', 'STATE', 'UPTIME', 'PEERS', 'ALLOW/s', 'DENY/s', 'KEYS', 'WAIT']))
  const notes: string[] = []
  for (const n of snap.nodes) {
    if (!n.up) {
      out.push(row([[n.name, 8], [`DOWN ${fmtDuration(n.downForMs)}`, 12], [`${n.error ?? 'no answer'} (retrying)`, width - 22]]))
      continue
    }
    const state = n.isolated === true ? 'isolated' : 'up'
    const peers = n.peersKnown === undefined ? '-' : `${n.peersAlive ?? 0}/${n.peersKnown}`
    out.push(cols(NODE_COLS, [n.name, state, fmtDuration(n.uptimeMs), peers, fmt(n.allowedPerS), fmt(n.deniedPerS), fmt(n.keyCount), fmt(n.waiters)]))
    for (const p of n.ruleProblems) {
      notes.push(`! ${n.name}: rule "${p.rule}" differs at ${p.differ.length > 0 ? p.differ.join(', ') : 'a peer'}: its tokens are not shared`)
    }
    if (n.isolated === true) notes.push(`! ${n.name}: isolated (no peer alive): it decides on what it holds alone`)
  }
  if (notes.length > 0) out.push('', ...notes)

  const groups = keyGroups(snap.nodes)
  out.push('')
  if (groups.length === 0) {
    out.push('no active keys')
  } else {
    out.push(cols(KEY_COLS, ['KEY', 'NODE', 'HELD', 'RATE/s', 'CLUSTER', 'IN', 'OUT', 'STRAND', 'TIGHT']))
    const limits = new Map(snap.rules.map(r => [r.name, `of ${fmt(r.limit)}/${r.per}`]))
    for (const g of groups.slice(0, maxKeys)) {
      g.at.forEach(({ node, k }, i) => {
        out.push(cols(KEY_COLS, [i === 0 ? g.key : '', node, fmt(k.held), fmt(k.rate), fmt(k.clusterRemaining), fmt(k.transfersIn),
          fmt(k.transfersOut), fmt(k.stranded), k.tight ? 'TIGHT' : '']))
      })
      if (g.at.length > 1) {
        const rate = g.at.every(a => a.k.rate === null) ? null : g.rate
        out.push(row([['', 16], ['(sum)', 8], [fmt(g.held), -7], [fmt(rate), -7], [limits.get(g.rule) ?? '', 30]]))
      }
    }
    if (groups.length > maxKeys) out.push(`... ${groups.length - maxKeys} more key(s), less busy`)
  }
  return out.map(l => cut(l, width))
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
