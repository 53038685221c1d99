/**
 * What `quotactl top` shows, without any I/O: the snapshot's shape (plain
 * JSON, what `--once --json` prints), `summarize` (a node's `status` reply ->
 * NodeView, with decisions per second from the previous sample), and
 * `renderTop` (snapshot -> lines of at most 80 columns). Pure functions, so
 * the screen can be tested from a made-up snapshot; the demo reads key
 * figures through `summarize` too.
 */

/** A node to watch: a display name, its socket, and its HTTP listener's HOST:PORT if it has one (read first). */
export interface Target { name: string, socket: string, http?: string }

/** One key at one node. `rate`, `clusterRemaining` and `shortfall` are null for a node not in cluster mode. */
export interface KeyView {
  key: string
  rule: string
  held: number
  rate: number | null
  clusterRemaining: number | null
  transfersIn: number
  transfersOut: number
  stranded: number
  /** The stock no live node accounts for, as this node sees the cluster (shortfall.ts). */
  shortfall: number | null
  tight: boolean
}

export interface RuleProblem { rule: string, differ: string[] }

export interface NodeView {
  name: string
  socket: string
  up: boolean
  /** A member not in the cluster file: its row is what `seenBy` (a node that answered) knows of it, not its own status. */
  member?: boolean
  seenBy?: string
  /** A member's: since `seenBy` last heard it. */
  lastHeardMs?: number
  /** Why it is DOWN. */
  error?: string
  /** How long it has been DOWN (since it last answered, or since top started). */
  downForMs?: number
  uptimeMs?: number
  /** Cut off from every peer (cluster mode). */
  isolated?: boolean
  /** No lease (cluster mode): spends no hard-mode tokens. */
  fenced?: boolean
  fencedForMs?: number
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

/** `burst`: a token bucket's stock (what the nodes may hold together), when it differs from `limit`. */
export interface RuleInfo { name: string, match: string, algorithm: string, limit: number, per: string, burst?: number }

export interface TopSnapshot {
  /** When the snapshot was taken (ISO 8601, UTC). */
  at: string
  intervalMs: number
  nodes: NodeView[]
  /** The rules, as the first node that answered reports them. */
  rules: RuleInfo[]
}

// ---- reading a status ------------------------------------------------------

export type Obj = Record<string, unknown>

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
      // An older daemon does not say: unknown, not 0.
      shortfall: typeof k.shortfall === 'number' ? k.shortfall : null,
      tight: k.tight === true
    }))
    : arr(status.activeKeys).map(k => ({
      key: str(k.key), rule: str(k.rule), held: num(k.held), rate: null, clusterRemaining: null, transfersIn: 0, transfersOut: 0, stranded: 0, shortfall: null, tight: false
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
    view.fenced = cluster.fenced === true
    const lease = cluster.lease as Record<string, unknown> | undefined
    if (typeof lease?.fencedForMs === 'number') view.fencedForMs = lease.fencedForMs
    view.peersAlive = peers.filter(p => p.alive === true).length
    view.peersKnown = peers.length
  }
  return { view, sample }
}

export function rulesOf (status: Obj): RuleInfo[] {
  return arr(status.rules).map(r => ({
    name: str(r.name), match: str(r.match), algorithm: str(r.algorithm), limit: num(r.limit), per: str(r.per),
    ...(typeof r.burst === 'number' && r.burst !== r.limit ? { burst: r.burst } : {})
  }))
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
const KEY_COLS = [15, 8, -6, -6, -7, -6, -6, -6, -6, 5] as const

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
    if (n.member === true) {
      // Seen through the cluster: the seeds' view, not the member's own figures.
      const heard = n.lastHeardMs === undefined ? '' : `, heard ${fmt(n.lastHeardMs / 1000)}s ago`
      out.push(row([[n.name, 8], [n.up ? 'member' : 'DOWN', 12], [n.up ? `a member, as ${n.seenBy ?? 'a seed'} sees it${heard}` : `${n.error ?? 'not alive'}`, width - 22]]))
      continue
    }
    if (!n.up) {
      // "retrying" first: a long reason is cut at the width, and this must still show.
      out.push(row([[n.name, 8], [`DOWN ${fmtDuration(n.downForMs)}`, 12], [`retrying: ${n.error ?? 'no answer'}`, width - 22]]))
      continue
    }
    const state = n.fenced === true ? 'FENCED' : n.isolated === true ? 'isolated' : 'up'
    const peers = n.peersKnown === undefined ? '-' : `${n.peersAlive ?? 0}/${n.peersKnown}`
    out.push(cols(NODE_COLS, [n.name, state, fmtDuration(n.uptimeMs), peers, fmt(n.allowedPerS), fmt(n.deniedPerS), fmt(n.keyCount), fmt(n.waiters)]))
    for (const p of n.ruleProblems) {
      notes.push(`! ${n.name}: rule "${p.rule}" differs at ${p.differ.length > 0 ? p.differ.join(', ') : 'a peer'}: its tokens are not shared`)
    }
    if (n.fenced === true) notes.push(`! ${n.name}: FENCED for ${fmtDuration(n.fencedForMs)} (no quorum of seeds echoes it): no hard-mode spending; soft rules follow onPartition`)
    else if (n.isolated === true) notes.push(`! ${n.name}: isolated (no peer alive): it decides on what it holds alone`)
  }
  if (notes.length > 0) out.push('', ...notes)

  const groups = keyGroups(snap.nodes)
  out.push('')
  if (groups.length === 0) {
    out.push('no active keys')
  } else {
    // STRAND: what this node knows is out of reach; SHORT: the stock no live node accounts for (they differ after a restart).
    out.push(cols(KEY_COLS, ['KEY', 'NODE', 'HELD', 'RATE/s', 'CLUSTER', 'IN', 'OUT', 'STRAND', 'SHORT', 'TIGHT']))
    // The rule, said as a rule: next to the sums, "of 300/1m" read as an overshoot when held or the rate was above 300.
    const limits = new Map(snap.rules.map(r => [r.name, `rule ${r.name}: ${fmt(r.limit)} per ${r.per}${r.burst !== undefined ? `, burst ${fmt(r.burst)}` : ''}`]))
    for (const g of groups.slice(0, maxKeys)) {
      g.at.forEach(({ node, k }, i) => {
        // A node outside cluster mode (rate null) has no transfers or stranded tokens to show.
        const c = k.rate !== null
        out.push(cols(KEY_COLS, [i === 0 ? g.key : '', node, fmt(k.held), fmt(k.rate), fmt(k.clusterRemaining), c ? fmt(k.transfersIn) : '-',
          c ? fmt(k.transfersOut) : '-', c ? fmt(k.stranded) : '-', c ? fmt(k.shortfall === null ? null : Math.round(k.shortfall)) : '-', k.tight ? 'TIGHT' : '']))
      })
      if (g.at.length > 1) {
        const rate = g.at.every(a => a.k.rate === null) ? null : g.rate
        out.push(row([['', 15], ['(sum)', 8], [fmt(g.held), -6], [fmt(rate), -6], [limits.get(g.rule) ?? '', width - 39]]))
      }
    }
    if (groups.length > maxKeys) out.push(`... ${groups.length - maxKeys} more key(s), less busy`)
  }
  return out.map(l => cut(l, width))
}
