/**
 * A virtual cluster: N ClusterCores (the production state machine, the same
 * object the daemon drives) joined by a virtual network on virtual time.
 *
 * - Each node ticks on its own schedule (its tuning's tickMs, with a seeded
 *   phase) and reads its own clock: true time plus its skew.
 * - Every message is msgpack-encoded and validated by the daemon's own
 *   parseMessage, so the wire format is exercised too. A gossip is encoded
 *   once and each receiver gets its own copy's delivery time, loss,
 *   duplication and reordering.
 * - Nodes crash (their holdings are stranded), stop gracefully (the
 *   daemon's sequence: settle in-flight requests, announce leaving, hand off,
 *   wait for acks, save), restart from their saved state or with nothing,
 *   and join late. `audit` (a TokenAudit) sees every grant and every death,
 *   so conservation can be checked at any moment.
 *
 * Determinism: one seeded Rng, one event heap ordered by (time, insertion).
 */
import { Packr } from 'msgpackr'
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import { ClusterCore, type Outbound } from '../cluster/cluster-core.js'
import { parseMessage, type Ack, type Grant, type None, type Want } from '../cluster/messages.js'
import { restoreKeys, snapshotKeys } from '../cluster/persist.js'
import type { SavedKey } from '../cluster/durable-state.js'
import type { ClusterTuning } from '../cluster/tuning.js'
import type { Decision } from '../core/types.js'
import { EventQueue } from './event-queue.js'
import { Cuts, PERFECT, sampleLatency, type NetworkModel } from './network.js'
import { Rng } from './rng.js'
import { TokenAudit } from './token-audit.js'

export { PERFECT, type NetworkModel } from './network.js'

export interface VirtualClusterOptions {
  /** Nodes running from the start. */
  nodes: string[]
  /** The cluster file's seeds (pre-allocated shares). @default nodes */
  seeds?: string[]
  rules: RuleConfig[]
  limits: LimitsConfig
  seed: number
  startMs: number
  network?: NetworkModel
  tuning?: Partial<ClusterTuning>
  /** A request with no reply fails after this. @default the core's wantTimeoutMs */
  requestTimeoutMs?: number
  /** Clock offset per node, ms (true time + skew = the node's clock). */
  skewMs?: Record<string, number>
  /** How long a stopping node waits for its handoff's acks. @default 3000 (the daemon's) */
  handoffTimeoutMs?: number
}

export type NodeState = 'up' | 'stopping' | 'stopped' | 'crashed'

export interface SimNode {
  name: string
  state: NodeState
  core: ClusterCore | null
  skewMs: number
  /** Requests this incarnation sent that are not settled yet. */
  inflight: number
  /** What a clean stop saved (consumed by the next start). */
  saved: { keys: SavedKey[], allocate: boolean } | null
  /** Whether the next start may materialize pre-allocated shares (false after a crash). */
  allocate: boolean
  incarnations: number
  sentBytes: number
  sentMessages: number
  recvBytes: number
}

const packr = new Packr({ useRecords: false })

export class VirtualCluster {
  /** The live cores (up or stopping), by node name. */
  readonly cores = new Map<string, ClusterCore>()
  readonly nodes = new Map<string, SimNode>()
  readonly rng: Rng
  readonly audit: TokenAudit
  readonly seeds: string[]
  now: number
  network: NetworkModel
  readonly cuts = new Cuts()
  /** Every core ever started, in order (crashed and stopped ones stay, for their counters). */
  readonly incarnations: ClusterCore[] = []
  private readonly queue = new EventQueue()
  private readonly opts: VirtualClusterOptions

  constructor (opts: VirtualClusterOptions) {
    this.opts = opts
    this.rng = new Rng(opts.seed)
    this.now = opts.startMs
    this.network = opts.network ?? PERFECT
    this.seeds = opts.seeds ?? opts.nodes
    this.audit = new TokenAudit(this.seeds)
    for (const name of opts.nodes) this.start(name)
  }

  /** The node's clock. */
  clock (name: string): number {
    return this.now + (this.nodes.get(name)?.skewMs ?? this.opts.skewMs?.[name] ?? 0)
  }

  /** Schedule `run` at true time `at` (not before now). */
  at (at: number, run: () => void): void {
    this.queue.push(Math.max(at, this.now), run)
  }

  // ---- lifecycle -------------------------------------------------------

  /** Start (first start, join, or restart) a node: new epoch; restores a clean stop's saved state. */
  start (name: string): void {
    let n = this.nodes.get(name)
    if (n === undefined) {
      n = { name, state: 'stopped', core: null, skewMs: this.opts.skewMs?.[name] ?? 0, inflight: 0, saved: null, allocate: true, incarnations: 0, sentBytes: 0, sentMessages: 0, recvBytes: 0 }
      this.nodes.set(name, n)
    }
    if (n.state === 'up' || n.state === 'stopping') return
    const allocate = n.saved !== null ? n.saved.allocate : n.allocate
    const core = new ClusterCore({
      node: name,
      epoch: `${name}.${++n.incarnations}.${this.rng.int(0, 0xffffff).toString(16)}`,
      seeds: this.seeds,
      rules: this.opts.rules,
      limits: this.opts.limits,
      allocate,
      tuning: this.opts.tuning
    })
    const now = this.clock(name)
    if (n.saved !== null) restoreKeys(core, n.saved.keys, now)
    // Like the daemon: the saved state is consumed before serving; a crash from here on starts with nothing.
    n.saved = null
    n.allocate = allocate
    core.init(now)
    n.core = core
    n.state = 'up'
    n.inflight = 0
    this.cores.set(name, core)
    this.incarnations.push(core)
    this.audit.born(core)
    const tickMs = core.tuning.tickMs
    const tick = (): void => {
      if (n.core !== core || n.state !== 'up') return
      this.dispatch(name, core.tick(this.clock(name)))
      this.at(this.now + tickMs, tick)
    }
    this.at(this.now + this.rng.next() * tickMs, tick)
  }

  /** kill -9: whatever the node held is stranded; it restarts with nothing. */
  crash (name: string): void {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || (n.state !== 'up' && n.state !== 'stopping')) return
    this.audit.died(n.core, 'crash')
    n.state = 'crashed'
    n.core = null
    n.saved = null
    n.allocate = false
    this.cores.delete(name)
  }

  /**
   * SIGTERM, as the daemon's ClusterNode.stop does it: stop ticking, let
   * in-flight requests settle, gossip `leaving`, wait two gossip intervals,
   * hand off, wait (bounded) for the acks, gossip once more, save.
   */
  stop (name: string): void {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || n.state !== 'up') return
    const core = n.core
    n.state = 'stopping'
    const live = (): boolean => n.core === core && n.state === 'stopping'
    const gossip = (): void => this.dispatch(name, [{ kind: 'gossip', msg: core.gossipNow(this.clock(name)) }])
    const waitFor = (done: () => boolean, then: () => void): void => {
      const poll = (): void => { if (live()) { if (done()) then(); else this.at(this.now + 10, poll) } }
      poll()
    }
    waitFor(() => n.inflight === 0, () => {
      core.leaving = true
      gossip()
      this.at(this.now + 2 * core.tuning.gossipIntervalMs, () => {
        if (!live()) return
        this.dispatch(name, core.handoff(this.clock(name)))
        const deadline = this.now + (this.opts.handoffTimeoutMs ?? 3000)
        waitFor(() => n.inflight === 0 || this.now >= deadline, () => {
          gossip()
          const now = this.clock(name)
          n.saved = { keys: snapshotKeys(core, now), allocate: core.limiter.allocate }
          this.audit.died(core, 'stop', n.saved.keys)
          n.state = 'stopped'
          n.core = null
          this.cores.delete(name)
        })
      })
    })
  }

  /** A local acquire at a node; undefined when the node is not serving. */
  acquire (name: string, key: string, count: number): Decision | undefined {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || n.state !== 'up') return undefined
    return n.core.acquire(key, count, this.clock(name))
  }

  // ---- network -----------------------------------------------------------

  partition (a: string, b: string, oneWay = false): void {
    this.cuts.split([a], [b], oneWay)
  }

  heal (): void {
    this.cuts.heal()
  }

  /** Carry one copy (or two, or none) of an encoded message from -> to. */
  private transmit (from: string, to: string, bytes: Uint8Array, deliver: () => void, grant?: Grant): void {
    if (this.cuts.has(from, to) || this.rng.chance(this.network.loss)) return
    const copies = this.rng.chance(this.network.duplicate) ? 2 : 1
    for (let i = 0; i < copies; i++) {
      if (grant !== undefined) this.audit.copies(grant, 1)
      this.at(this.now + sampleLatency(this.network, this.rng), () => {
        if (grant !== undefined) this.audit.copies(grant, -1)
        const n = this.nodes.get(to)
        if (n !== undefined) n.recvBytes += bytes.length
        deliver()
      })
    }
  }

  private count (from: string, bytes: number): void {
    const n = this.nodes.get(from)
    if (n === undefined) return
    n.sentBytes += bytes
    n.sentMessages++
  }

  /** Carry a node's outbound messages over the network. */
  dispatch (from: string, out: Outbound[]): void {
    const sender = this.nodes.get(from)
    const core = sender?.core
    if (sender === undefined || core == null) return
    for (const o of out) {
      if (o.kind === 'gossip') {
        // Published once (as pubsub does), decoded and validated once, delivered to each peer.
        const bytes = packr.pack(o.msg)
        this.count(from, bytes.length)
        const m = parseMessage(packr.unpack(bytes))
        if (m.t !== 'gossip') continue
        for (const [to, target] of this.nodes) {
          if (to === from || target.core === null) continue
          this.transmit(from, to, bytes, () => {
            const c = this.nodes.get(to)?.core
            if (c != null) c.onGossip(m, this.clock(to))
          })
        }
      } else {
        this.request(sender, core, o.to, o.msg)
      }
    }
  }

  private request (sender: SimNode, core: ClusterCore, to: string, msg: Want | Grant): void {
    if (msg.t === 'grant') this.audit.granted(msg)
    let settled = false
    sender.inflight++
    const settle = (): boolean => {
      if (settled) return false
      settled = true
      if (sender.core === core) sender.inflight--
      return sender.core === core
    }
    const timeout = this.opts.requestTimeoutMs ?? core.tuning.wantTimeoutMs
    this.at(this.now + timeout, () => { if (settle()) core.onRequestFailed(msg, this.clock(sender.name)) })
    const bytes = packr.pack(msg)
    this.count(sender.name, bytes.length)
    this.transmit(sender.name, to, bytes, () => {
      const target = this.nodes.get(to)
      const tc = target?.core
      if (target === undefined || tc == null) return
      const m = parseMessage(packr.unpack(bytes))
      let reply: Grant | Ack | None | undefined
      if (m.t === 'want') reply = tc.onWant(m, this.clock(to))
      else if (m.t === 'grant') reply = tc.onGrant(m, this.clock(to))
      if (reply === undefined) return
      if (reply.t === 'grant') this.audit.granted(reply)
      const back = packr.pack(reply)
      this.count(to, back.length)
      this.transmit(to, sender.name, back, () => {
        const r = parseMessage(packr.unpack(back))
        if (r.t !== 'grant' && r.t !== 'ack' && r.t !== 'none') return
        if (settle()) core.onReply(msg, r, this.clock(sender.name))
      }, reply.t === 'grant' ? reply : undefined)
    }, msg.t === 'grant' ? msg : undefined)
  }

  // ---- time --------------------------------------------------------------

  /** Run every event up to true time `t`; with `tickMs`, also call `onTick` every tickMs. */
  runUntil (t: number, tickMs?: number, onTick?: (now: number) => void): void {
    if (onTick !== undefined && tickMs !== undefined) {
      let next = this.now
      const cb = (): void => {
        if (this.now > t) return // a later runUntil: this callback belongs to an earlier call
        onTick(this.now)
        next += tickMs
        this.at(next, cb)
      }
      this.at(next, cb)
    }
    while (this.queue.peekAt() <= t) {
      const e = this.queue.pop()
      if (e === undefined) break
      this.now = e.at
      e.run()
    }
    this.now = t
  }

  /** Tokens of `key` held by the live nodes (bucket held), for quick assertions. */
  held (key: string): number {
    let n = 0
    for (const core of this.cores.values()) {
      const ks = core.limiter.existing(key)
      if (ks !== undefined) n += ks.bucket.held
    }
    return n
  }
}
