/**
 * A run's figures, from its arrivals and three admission vectors (the
 * cluster's, the central limiter's, the static split's):
 *
 * - utilization: admitted / what the exact central limiter admitted on the
 *   same arrivals. For a fixed window that is exactly admitted /
 *   sum over windows of min(demand, limit); for the other algorithms the
 *   central limiter's admissions are that bound.
 * - fairness: Jain's index over nodes of each node's admitted / demand
 *   (1 = every node got the same fraction of what it asked for).
 * - follow: after the hot spot moves to node h, the time until h's
 *   admissions reach 90% of what the central limiter admits of h's requests,
 *   for 3 bins of 100 ms in a row (bins where the central limiter admits
 *   nothing of h, its stock being spent, are skipped).
 * - control traffic: bytes and messages each node sent (a gossip counted
 *   once, as published), per node per second of the run; and the same per
 *   message type (`traffic`: want, grant, none, jrep, jack, gossip, ...), so
 *   that a change aimed at one kind of message can be judged by it; and a
 *   gossip's bytes by field (`gossipFields`), and of the seeds' members'
 *   copies (`copyFields`).
 */
import type { Arrival, HotMove } from './types.js'
import type { VirtualCluster } from './virtual-cluster.js'

export interface Side {
  admitted: number
  utilization: number
  fairness: number
}

export interface Figures {
  demand: number
  /** The cluster's admissions, utilization and fairness. */
  cluster: Side
  central: Side
  static: Side
  overshoot: number
  overdraft: number
  /** Follow time per hot-spot move, ms (Infinity: not followed before the next move). */
  followMs: number[]
  bytesPerNodeSec: number
  messagesPerNodeSec: number
  /** Bytes each node received per second (every peer's gossip reaches it). */
  recvBytesPerNodeSec: number
  /**
   * Bytes a seed and a member sent and received per second, each the mean
   * over nodes of that role (crashed and joined nodes by their name's role):
   * where members are many and seeds few, the mean over all nodes above is
   * mostly the seeds' load spread thin. `members` is absent without members.
   */
  roles: { seeds: RoleTraffic, members?: RoleTraffic }
  /** Sent per node per second, by message type (`t`); the types' sums are the two figures above. */
  traffic: Record<string, { messagesPerNodeSec: number, bytesPerNodeSec: number }>
  /**
   * A gossip's mean bytes by field (each field packed alone, on a sample of
   * one gossip in 16): where a gossip's size goes (`keys`, `acks`, `heard`,
   * ...), which every node receives from every other.
   */
  gossipFields: Record<string, number>
  /**
   * The same for the seeds' members' copies (member-gossip.ts; empty when
   * no seed published one): what each member receives from each seed.
   */
  copyFields: Record<string, number>
  stranded: number
  /** Tokens moved by applied grants. */
  transferred: number
}

export interface RoleTraffic {
  nodes: number
  sentBytesPerNodeSec: number
  recvBytesPerNodeSec: number
}

export interface FigureInput {
  arrivals: readonly Arrival[]
  admitted: Uint8Array
  central: Uint8Array
  static: Uint8Array
  moves: readonly HotMove[]
  startMs: number
  endMs: number
  vc: VirtualCluster
  keys: readonly string[]
  overshoot: number
  overdraft: number
  gossipIntervalMs: number
}

const BIN_MS = 100
const FOLLOW_FRACTION = 0.9
const FOLLOW_BINS = 3

function side (arrivals: readonly Arrival[], ok: Uint8Array, centralTotal: number): Side {
  const demand = new Map<string, number>()
  const got = new Map<string, number>()
  let admitted = 0
  for (let i = 0; i < arrivals.length; i++) {
    const a = arrivals[i]
    demand.set(a.node, (demand.get(a.node) ?? 0) + a.count)
    if (ok[i] === 1) { admitted += a.count; got.set(a.node, (got.get(a.node) ?? 0) + a.count) }
  }
  return { admitted, utilization: centralTotal > 0 ? admitted / centralTotal : 1, fairness: jain([...demand].map(([n, d]) => (got.get(n) ?? 0) / d)) }
}

/** Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all equal. */
export function jain (xs: readonly number[]): number {
  let s = 0
  let s2 = 0
  for (const x of xs) { s += x; s2 += x * x }
  return s2 === 0 ? 1 : (s * s) / (xs.length * s2)
}

function follow (inp: FigureInput, m: HotMove, until: number): number {
  const nb = Math.max(0, Math.floor((until - m.at) / BIN_MS))
  const mine = new Float64Array(nb)
  const best = new Float64Array(nb)
  for (let i = 0; i < inp.arrivals.length; i++) {
    const a = inp.arrivals[i]
    if (a.node !== m.node || a.at < m.at) continue
    const b = Math.floor((a.at - m.at) / BIN_MS)
    if (b >= nb) break
    if (inp.admitted[i] === 1) mine[b] += a.count
    if (inp.central[i] === 1) best[b] += a.count
  }
  const real: Array<[bin: number, ok: boolean]> = []
  for (let b = 0; b < nb; b++) if (best[b] > 0) real.push([b, mine[b] >= FOLLOW_FRACTION * best[b]])
  for (let i = 0; i + FOLLOW_BINS <= real.length; i++) {
    if (real.slice(i, i + FOLLOW_BINS).every(([, ok]) => ok)) return real[i][0] * BIN_MS
  }
  return Infinity
}

export function figures (inp: FigureInput): Figures {
  let centralTotal = 0
  let demand = 0
  for (let i = 0; i < inp.arrivals.length; i++) {
    demand += inp.arrivals[i].count
    if (inp.central[i] === 1) centralTotal += inp.arrivals[i].count
  }
  const seconds = (inp.endMs - inp.startMs) / 1000
  let bytes = 0
  let msgs = 0
  let recv = 0
  const role = { seeds: { nodes: 0, sent: 0, recv: 0 }, members: { nodes: 0, sent: 0, recv: 0 } }
  for (const [name, n] of inp.vc.nodes) {
    bytes += n.sentBytes; msgs += n.sentMessages; recv += n.recvBytes
    const r = inp.vc.seeds.includes(name) ? role.seeds : role.members
    r.nodes++; r.sent += n.sentBytes; r.recv += n.recvBytes
  }
  const perNode = (r: typeof role.seeds): RoleTraffic => ({ nodes: r.nodes, sentBytesPerNodeSec: r.sent / Math.max(1, r.nodes) / seconds, recvBytesPerNodeSec: r.recv / Math.max(1, r.nodes) / seconds })
  const nodes = Math.max(1, inp.vc.nodes.size)
  let stranded = 0
  for (const k of inp.keys) stranded += inp.vc.audit.account(k).stranded
  // The first move is the start (nothing to follow); a move needs a whole 1 s after it to be judged.
  const followMs: number[] = []
  for (let i = 1; i < inp.moves.length; i++) {
    const until = i + 1 < inp.moves.length ? inp.moves[i + 1].at : inp.endMs
    if (until - inp.moves[i].at >= 1000) followMs.push(follow(inp, inp.moves[i], until))
  }
  return {
    demand,
    cluster: side(inp.arrivals, inp.admitted, centralTotal),
    central: side(inp.arrivals, inp.central, centralTotal),
    static: side(inp.arrivals, inp.static, centralTotal),
    overshoot: inp.overshoot,
    overdraft: inp.overdraft,
    followMs,
    bytesPerNodeSec: bytes / nodes / seconds,
    messagesPerNodeSec: msgs / nodes / seconds,
    recvBytesPerNodeSec: recv / nodes / seconds,
    roles: role.members.nodes > 0 ? { seeds: perNode(role.seeds), members: perNode(role.members) } : { seeds: perNode(role.seeds) },
    traffic: Object.fromEntries([...inp.vc.traffic].sort((a, b) => b[1].bytes - a[1].bytes)
      .map(([t, e]) => [t, { messagesPerNodeSec: e.messages / nodes / seconds, bytesPerNodeSec: e.bytes / nodes / seconds }])),
    gossipFields: inp.vc.gossipFields.means(),
    copyFields: inp.vc.copyFields.means(),
    stranded,
    transferred: inp.vc.audit.applied
  }
}
