/**
 * A virtual cluster: N ClusterCores (the production state machine, the same
 * object the daemon drives) joined by a virtual network on virtual time.
 *
 * - Each node ticks on its own schedule (its tuning's tickMs, with a seeded
 *   phase). It has two clocks, as a real node does: a monotonic one (true
 *   time plus a constant per-node origin, which may be set far apart from
 *   the wall clock to catch any mixing of the two) and a wall clock (true
 *   time plus its skew, which a scenario can step forward or back). The
 *   core gets the wall clock only through `observeWall` on each tick.
 * - Every message is msgpack-encoded and validated by the daemon's own
 *   parseMessage, so the wire format is exercised too (sim-dispatch.ts).
 * - What a node does around its I/O (persist then reply, a grant only once
 *   covered, each request settled once, a member's forward served) is the
 *   daemon's own effects interpreter (node-effects.ts) on this cluster's
 *   virtual disk and network (sim-ports.ts): no copy of it lives here.
 * - Lifecycle, with the daemon's own code paths: a node starts with
 *   `startCore` from its "disk" (the last state it wrote: absent, running,
 *   or a clean stop's snapshot), stops through the core's stop machine
 *   (`beginStop`, then ticks until the snapshot), crashes (its disk keeps
 *   the "running" file, so the next start is unclean), reloads its rules
 *   (`setRules`, as SIGHUP does), and restarts with a changed file.
 *   `audit` (a TokenAudit) sees every grant, birth, death and rule change,
 *   so conservation can be checked at any moment.
 *
 * Determinism: one seeded Rng, one event heap ordered by (time, insertion).
 */
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import type { ClusterCore, Outbound } from '../cluster/cluster-core.js'
import { encodeState, type SavedState } from '../cluster/durable-state.js'
import { parseState } from '../cluster/state-schema.js'
import { CLUSTER_VERSION, type Grant } from '../cluster/messages.js'
import { startCore } from '../cluster/persist.js'
import { ReplicaWitness } from './replica-check.js'
import { transmit } from './sim-dispatch.js'
import { simEffects } from './sim-ports.js'
import { replayJournal } from '../cluster/journal.js'
import type { Fwd } from '../cluster/forward-messages.js'
import { defaultTuning, type ClusterTuning } from '../cluster/tuning.js'
import type { Decision } from '../core/types.js'
import { EventQueue } from './event-queue.js'
import { LeaseWitness } from './lease-check.js'
import { Cuts, PERFECT, type NetworkModel } from './network.js'
import { Rng } from './rng.js'
import { PositionAudit } from './position-audit.js'
import { TokenAudit } from './token-audit.js'
import { hostOfId, idOf, LINGER_MS, rogueId, type SimNode } from './sim-node.js'
import { GossipFields } from './gossip-fields.js'


export { PERFECT, type NetworkModel } from './network.js'
export { idOf, LINGER_MS, type NodeState, type SimNode } from './sim-node.js'

export interface VirtualClusterOptions {
  /** Nodes running from the start. */
  nodes: string[]
  /** The cluster file's seeds (pre-allocated shares). @default nodes */
  seeds?: string[]
  /** The cluster file's nodes (seeds and members), pinned to their ids; any other node is a joiner the seeds admit. @default seeds */
  listed?: string[]
  rules: RuleConfig[]
  limits: LimitsConfig
  seed: number
  startMs: number
  network?: NetworkModel
  tuning?: Partial<ClusterTuning>
  /** A request with no reply fails after this. @default the core's wantTimeoutMs */
  requestTimeoutMs?: number
  /** Wall-clock offset per node, ms (true time + skew = the node's wall clock). */
  skewMs?: Record<string, number>
  /** Each node's monotonic origin: mono = true time + this. @default 0 (mono equals true time) */
  monoOffsetMs?: (node: string) => number
}


/**
 * A decision at a seed that counts as an admission: the seed, the key and
 * count, what it decided, and `credit` when a member handed out a token of
 * the seed's credit (forward-credit.ts: the seed spent it, under its lease,
 * when it gave it; the oracle places it on the seed's calendar, now).
 */
export type Decided = (seed: string, key: string, count: number, d: Decision, credit: boolean) => void

/**
 * How long a reclaimed node takes to start its new incarnation once its old
 * one has stopped: the daemon does it in-process (daemon.ts `renew`: the
 * same stop, then the same start from its disk), restarting its transport.
 */
export const RESTART_RECLAIMED_MS = 500

export class VirtualCluster {
  /** The live cores (up or stopping), by node name. */
  readonly cores = new Map<string, ClusterCore>()
  readonly nodes = new Map<string, SimNode>()
  readonly rng: Rng
  readonly audit: TokenAudit
  /** Checks that every node's positions (positions.ts) agree with the accounts' books. */
  readonly positions: PositionAudit
  /** The leases as the network saw them (lease-check.ts); null with leases off. */
  readonly leases: LeaseWitness | null
  /** Every grant from a replicating seed left with its give at a quorum of disks (replica-check.ts). */
  readonly replicaWitness: ReplicaWitness
  /** Every forwarded acquire decided at a seed, and every token of a seed's credit handed out (the oracle's admissions). */
  onDecided: Decided | undefined
  /** A member's forward being read at its seed, for the key-number invariant (sim-ports.ts). */
  reading: { req: Fwd, sender: SimNode, core: ClusterCore } | null = null
  readonly seeds: string[]
  /** The cluster file's nodes: the seeds, and members listed from the start. */
  readonly listed: string[]
  now: number
  network: NetworkModel
  readonly cuts = new Cuts()
  /** Every core ever started, in order (crashed and stopped ones stay, for their counters). */
  readonly incarnations: ClusterCore[] = []
  /** The cluster file's rules: what a node starts with (a reload may give a node other rules). */
  file: RuleConfig[]
  private readonly queue = new EventQueue()
  readonly opts: VirtualClusterOptions

  constructor (opts: VirtualClusterOptions) {
    this.opts = opts
    this.rng = new Rng(opts.seed)
    this.now = opts.startMs
    this.network = opts.network ?? PERFECT
    this.seeds = opts.seeds ?? opts.nodes
    this.listed = opts.listed ?? this.seeds
    this.file = opts.rules
    this.audit = new TokenAudit(this.seeds, opts.rules)
    this.positions = new PositionAudit(this.seeds)
    const tuning = { ...defaultTuning(opts.tuning?.gossipIntervalMs), ...opts.tuning }
    this.leases = tuning.leases ? new LeaseWitness(this.seeds, tuning.leaseMs, tuning.voters) : null
    this.replicaWitness = new ReplicaWitness(this.seeds)
    for (const name of opts.nodes) this.start(name)
  }

  /** The node's wall clock (what a log line would show). */
  clock (name: string): number {
    return this.now + (this.nodes.get(name)?.skewMs ?? this.opts.skewMs?.[name] ?? 0)
  }

  /** The node's monotonic clock: what its core's `nowMs` is. */
  mono (name: string): number {
    return this.now + (this.nodes.get(name)?.monoOffsetMs ?? 0)
  }

  /** The node's calendar (where its windows fall), or its wall clock when it is down. */
  calendar (name: string): number {
    const core = this.nodes.get(name)?.core
    return core != null ? core.calendar.at(this.mono(name)) : this.clock(name)
  }

  /** Schedule `run` at true time `at` (not before now). */
  at (at: number, run: () => void): void {
    this.queue.push(Math.max(at, this.now), run)
  }

  // ---- lifecycle -------------------------------------------------------

  /** Start (first start, join, or restart) a node from its disk, with the file's rules (or `rules`). */
  start (name: string, rules: RuleConfig[] = this.file): void {
    let n = this.nodes.get(name)
    if (n === undefined) {
      n = {
        name, state: 'stopped', core: null, effects: null, skewMs: this.opts.skewMs?.[name] ?? 0, monoOffsetMs: this.opts.monoOffsetMs?.(name) ?? 0,
        disk: undefined, journal: '', replicas: new Map(), superseded: new Map(), attest: new Map(), lingering: null, incarnations: 0, pausedUntil: 0, waiters: new Map(), sentBytes: 0, sentMessages: 0, recvBytes: 0
      }
      this.nodes.set(name, n)
    }
    if (n.state === 'up' || n.state === 'stopping') return
    n.lingering = null
    const mono = this.mono(name)
    const { core } = startCore({
      node: name,
      epoch: `${name}.${++n.incarnations}.${this.rng.int(0, 0xffffff).toString(16)}`,
      cluster: 'sim',
      clusterHash: 'sim',
      seeds: this.seeds,
      // The file's nodes are pinned to their ids; joiners are members the seeds admit.
      listed: new Map(this.listed.map(s => [s, idOf(s)])),
      limits: this.opts.limits,
      tuning: this.opts.tuning,
      replicas: n.replicas,
      superseded: n.superseded,
      wallMs: this.clock(name),
      monoMs: mono
    }, rules, n.disk, mono, n.disk?.status === 'running' && n.journal !== '' ? replayJournal(n.journal, name, name, 'sim') : undefined)
    for (const [k, v] of n.attest) core.reclaim.attested.set(k, v)
    core.membership.hostOf = id => hostOfId(id, this.nodes)
    // Like the daemon: the saved state is consumed before serving; a crash from here on is unclean.
    n.disk = throughDisk(core.save(mono, 'running'))
    n.core = core
    const fx = n.effects = simEffects(this, n, core)
    // This incarnation's journal starts with a checkpoint of what it has now, before it serves or gives anything.
    fx.persistJournal()
    n.state = 'up'
    this.cores.set(name, core)
    this.incarnations.push(core)
    this.audit.born(core)
    this.positions.born(core)
    this.leases?.started(core, this.now)
    const tickMs = core.tuning.tickMs
    const tick = (): void => {
      if (n.core !== core) return
      // Paused (SIGSTOP): the first tick after the resume sees the whole gap at once, as a real process's timers do.
      if (this.now < n.pausedUntil) { this.at(n.pausedUntil, tick); return }
      this.tickNow(n, core)
      this.audit.inheritances(core)
      this.poll(n, core) // deferred credits fall due on ticks
      if (core.snapshot !== null) { this.finishStop(n, core); return }
      // Reclaimed (a quorum of voters attests it dead), or a calendar to realign: the daemon stops its cluster layer
      // cleanly and starts a new incarnation from its disk, in-process (daemon.ts renew).
      if (core.renewal !== null && n.state === 'up') { this.stop(name); this.startWhenStopped(name) }
      this.at(this.now + tickMs, tick)
    }
    this.at(this.now + this.rng.next() * tickMs, tick)
  }

  /** The daemon's tick (cluster-node.ts `tick`): the core's messages out through the interpreter, then its journal written. */
  private tickNow (n: SimNode, core: ClusterCore): void {
    const fx = n.effects
    if (fx === null || fx.core !== core) return
    core.observeWall(this.clock(n.name), this.mono(n.name))
    this.dispatch(n.name, core.tick(this.mono(n.name)))
    fx.persistJournal()
  }

  /**
   * A rogue insider (FaultSpec.flood) speaks once for each of `names` made-up
   * member names (`x0`, `x1`, ...), name i from its peer id i mod `ids`, in a
   * gossip every seed hears: a quiet member's first gossip, no books.
   */
  flood (names: number, ids: number): void {
    for (const seed of this.seeds) {
      const core = this.nodes.get(seed)?.core
      if (core == null) continue
      for (let i = 0; i < names; i++) {
        this.floodSeq++
        core.onGossip({
          v: CLUSTER_VERSION, t: 'gossip', node: `x${i}`, epoch: `x${i}.1`, inc: 1, seq: this.floodSeq, now: this.calendar(seed),
          pending: [], carries: [], cfg: 'sim', rules: {}, keys: [], acks: [], alloc: false
        }, rogueId('rogue', i % ids), this.mono(seed))
      }
    }
  }

  private floodSeq = 0

  /** kill -9: what the node held is stranded until it restarts and recovers it from its journal (journal.ts). */
  crash (name: string): void {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || (n.state !== 'up' && n.state !== 'stopping')) return
    this.dropWaiters(n)
    this.audit.died(n.core, 'crash')
    this.positions.died(n.core)
    n.state = 'crashed'
    n.core = null
    n.effects = null
    this.cores.delete(name)
  }

  /** Start `name` again once its stop has finished (a supervisor restarting a daemon that exited). */
  private startWhenStopped (name: string): void {
    const n = this.nodes.get(name)
    if (n?.state === 'stopping') { this.at(this.now + 20, () => this.startWhenStopped(name)); return }
    if (n?.state === 'stopped') this.at(this.now + RESTART_RECLAIMED_MS, () => this.start(name))
  }

  /** SIGTERM: the core's own stop machine runs on the node's ticks until it hands over its snapshot. */
  stop (name: string): void {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || n.state !== 'up') return
    this.dropWaiters(n)
    n.state = 'stopping'
    this.dispatch(name, n.core.beginStop(this.mono(name)))
  }

  private finishStop (n: SimNode, core: ClusterCore): void {
    const snap = core.snapshot as SavedState
    n.disk = throughDisk(snap)
    this.audit.died(core, 'stop', snap)
    this.positions.died(core)
    const fx = n.effects
    n.state = 'stopped'
    n.core = null
    n.effects = null
    this.cores.delete(n.name)
    // The daemon writes the file, then closes libp2p: until then the stopped core still gets requests.
    n.lingering = fx
    this.at(this.now + LINGER_MS, () => { if (n.lingering === fx) n.lingering = null })
  }

  /**
   * SIGSTOP for `ms`, then SIGCONT: the process keeps its state but runs no
   * code meanwhile (no tick, no message read, no client answered); its
   * clocks go on. A gossip sent to it is lost; a request or a reply waits
   * for the resume, unless its sender gave up first (sim-dispatch.ts).
   */
  pause (name: string, ms: number): void {
    const n = this.nodes.get(name)
    if (n !== undefined) n.pausedUntil = Math.max(n.pausedUntil, this.now + ms)
  }

  /** Whether `name` is paused (SIGSTOP) now. */
  paused (name: string): boolean {
    return this.now < (this.nodes.get(name)?.pausedUntil ?? 0)
  }

  /** SIGHUP with new rules (the daemon's reload path). */
  reload (name: string, rules: RuleConfig[]): void {
    const core = this.nodes.get(name)?.core
    if (core == null) return
    core.setRules(rules, this.mono(name))
    this.audit.reloaded(core)
  }

  /** Step a node's wall clock (NTP, an operator, a VM resume): its monotonic clock does not move. */
  stepWall (name: string, ms: number): void {
    const n = this.nodes.get(name)
    if (n !== undefined) n.skewMs += ms
  }

  /**
   * A local acquire at a node with no `waitMs`, as LocalQuota decides it:
   * at once, or (the first request for a key new here, first-use.ts) queued
   * for up to `firstUseWaitMs`, with an immediate tick so the want goes out
   * now. A queued request returns 'waiting' and is answered later through
   * `late` (allowed when tokens arrive, denied at its deadline, dropped if
   * the node crashes or starts to stop, like a client's connection). A
   * member's acquire of a `decide: "seeds"` rule goes to a seed through the
   * interpreter (node-effects.ts `forwardAcquire`): 'forwarded', answered
   * through `late`. Undefined when the node is not serving.
   */
  acquire (name: string, key: string, count: number): Decision | undefined
  acquire (name: string, key: string, count: number, late: (d: Decision) => void, clientWaitMs?: number, here?: boolean): Decision | 'waiting' | 'forwarded' | undefined
  acquire (name: string, key: string, count: number, late?: (d: Decision) => void, clientWaitMs = 0, here = false): Decision | 'waiting' | 'forwarded' | undefined {
    const n = this.nodes.get(name)
    if (n === undefined || n.core === null || n.effects === null || n.state !== 'up' || this.paused(name)) return undefined
    const core = n.core
    const mono = this.mono(name)
    if (late !== undefined) {
      // Answered later, as the daemon's promise is, even when decided at once (credit, a seed's kept denial).
      let now = true
      const forwarded = n.effects.forwardAcquire(key, count, clientWaitMs, here, d => {
        if (!now) late(d)
        else this.at(this.now, () => { if (n.core === core && n.state === 'up') late(d) })
      })
      now = false
      if (forwarded) return 'forwarded'
    }
    // As LocalQuota.decide: the client's own waitMs, else a first use's short wait (which ticks at once).
    const urgent = clientWaitMs <= 0
    const waitMs = late === undefined ? 0 : urgent ? core.firstUseWaitMs(key, count, mono) : clientWaitMs
    if (waitMs <= 0) return core.acquire(key, count, mono)
    const r = core.acquireOrWait(key, count, waitMs, mono, late)
    if ('allowed' in r) return r
    n.waiters.set(late, r)
    if (urgent) this.tickNow(n, core)
    this.at(this.now + waitMs + 1, () => this.poll(n, core))
    return 'waiting'
  }

  /** Answer a node's waiters that its limiter can now decide (LocalQuota's kick and timer; the interpreter's `onTokens`). */
  poll (n: SimNode, core: ClusterCore): void {
    if (n.core !== core || n.state !== 'up' || n.waiters.size === 0) return
    for (const r of core.limiter.poll(this.mono(n.name))) {
      n.waiters.delete(r.ref)
      ;(r.ref as (d: Decision) => void)(r.decision)
    }
  }

  /** The node's waiting clients go away (its server stops first, or it died): nothing they waited for is admitted. */
  private dropWaiters (n: SimNode): void {
    for (const w of n.waiters.values()) n.core?.limiter.cancel(w)
    n.waiters.clear()
  }

  // ---- network -----------------------------------------------------------

  partition (a: string, b: string, oneWay = false): void {
    this.cuts.split([a], [b], oneWay)
  }

  heal (): void {
    this.cuts.heal()
  }

  /** Carry one copy (or two, or none) of an encoded message from -> to (sim-dispatch.ts; sim-ports.ts sends through it). */
  transmit (from: string, to: string, bytes: Uint8Array, deliver: () => void, grant?: Grant, gossip = false, deadline = Infinity): void {
    transmit(this, from, to, bytes, deliver, grant, gossip, deadline)
  }

  /** A gossip's bytes by field (the figures' `gossipFields`). */
  readonly gossipFields = new GossipFields()
  /** A seed's members' copy's bytes by field (the figures' `copyFields`). */
  readonly copyFields = new GossipFields()

  /** What the nodes sent, per message type (`t`): the figures' traffic breakdown. */
  readonly traffic = new Map<string, { messages: number, bytes: number }>()

  count (from: string, bytes: number, type: string): void {
    const n = this.nodes.get(from)
    if (n === undefined) return
    const e = this.traffic.get(type)
    if (e === undefined) this.traffic.set(type, { messages: 1, bytes })
    else { e.messages++; e.bytes += bytes }
    n.sentBytes += bytes
    n.sentMessages++
  }

  /** A node's outbound messages, through its interpreter (node-effects.ts `dispatch`), as the daemon's tick and stop send them. */
  dispatch (from: string, out: Outbound[]): void {
    this.nodes.get(from)?.effects?.dispatch(out)
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

/**
 * What a start reads back of a state the node wrote: the daemon's bytes
 * (durable-state.ts) through the daemon's parser (state-schema.ts), so a
 * field the file drops is dropped in the simulator too.
 */
function throughDisk (s: SavedState): SavedState {
  return parseState(encodeState(s), 'simulated quotad-state.json')
}
