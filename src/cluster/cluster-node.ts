/**
 * The cluster driver: carries the pure ClusterCore's messages over the
 * libp2p transport, on a clock, and keeps the node's durable state.
 *
 * It owns: the tick timer; msgpack encoding of cluster messages; the
 * name <-> peer id map (learned from signed gossip); requests and their
 * replies; the graceful-stop handoff; and the state file. Every decision is
 * the core's. A peer's malformed or oversized message is dropped, counted
 * (`badMessages`) and logged at debug; the node keeps running.
 */
import { Packr } from 'msgpackr'
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { Clock } from '../clock.js'
import type { ClusterConfig, NodeConfig } from '../config/types.js'
import { parseSwarmKey } from '../config/swarm-key.js'
import type { Logger } from '../util/log.js'
import { ClusterCore, type Outbound } from './cluster-core.js'
import { clusterStatus } from './cluster-status.js'
import { readState, startKind, writeState, type SavedKey, type StartKind } from './durable-state.js'
import { restoreKeys, snapshotKeys } from './persist.js'
import { DEFAULT_BOUNDS, parseMessage, type Grant, type MessageBounds, type Want } from './messages.js'
import type { Transport, TransportOptions } from './transport/types.js'

const packr = new Packr({ useRecords: false })

export interface ClusterNodeOptions {
  config: ClusterConfig
  node: NodeConfig
  clock: Clock
  log: Logger
  /** Build the transport (tests may inject). @default the libp2p transport */
  createTransport?: (opts: TransportOptions) => Promise<Transport>
  /** Called when tokens arrived, so waiting acquires can be served. */
  onTokens?: () => void
}

export class ClusterNode {
  readonly core: ClusterCore
  readonly startKind: StartKind
  private readonly opts: ClusterNodeOptions
  private transport: Transport | null = null
  private readonly idsByName = new Map<string, string>()
  private timer: NodeJS.Timeout | null = null
  /** Requests sent on ticks and not yet settled (each is bounded by its timeout). */
  private readonly inflight = new Set<Promise<void>>()
  private stopping = false
  private readonly restored: SavedKey[]
  private readonly bounds: MessageBounds

  private constructor (opts: ClusterNodeOptions, core: ClusterCore, kind: StartKind, restored: SavedKey[]) {
    this.opts = opts
    this.core = core
    this.startKind = kind
    this.restored = restored
    this.bounds = { ...DEFAULT_BOUNDS, maxKeyBytes: opts.config.limits.maxKeyBytes }
  }

  /** Read the durable state and build the state machine (nothing runs yet). */
  static async create (opts: ClusterNodeOptions): Promise<ClusterNode> {
    const saved = await readState(opts.node.dataDir)
    const kind = startKind(saved)
    const allocate = kind === 'first-start' || (kind === 'clean-restart' && saved?.allocate === true)
    const core = new ClusterCore({
      node: opts.node.name,
      epoch: randomBytes(8).toString('hex'),
      seeds: opts.config.nodes.filter(n => n.seed).map(n => n.name),
      rules: opts.config.rules,
      limits: opts.config.limits,
      allocate,
      tuning: { gossipIntervalMs: opts.config.cluster.gossipIntervalMs }
    })
    return new ClusterNode(opts, core, kind, kind === 'clean-restart' ? saved?.keys ?? [] : [])
  }

  async start (): Promise<void> {
    const { node, config, clock, log } = this.opts
    const now = clock.now()
    const restored = restoreKeys(this.core, this.restored, now)
    for (const k of restored.dropped) {
      log.warn('saved tokens of a changed or removed rule are dropped (stranded, never re-created)', { key: k.key, rule: k.rule })
    }
    // Consume the saved state before serving: a crash from here on starts with nothing.
    await writeState(node.dataDir, { version: 1, node: node.name, cluster: config.cluster.name, status: 'running', allocate: this.core.limiter.allocate, keys: [] })
    this.core.init(now)
    log.info('cluster state', { start: this.startKind, allocate: this.core.limiter.allocate, restoredKeys: restored.keys, restoredTokens: restored.tokens })

    const psk = parseSwarmKey(await readFile(config.cluster.secretFile, 'utf8'), config.cluster.secretFile)
    const create = this.opts.createTransport ?? (await import('./transport/libp2p-transport.js')).createTransport
    const t = await create({
      listen: node.listen,
      seeds: config.nodes.filter(n => n.name !== node.name).map(n => n.listen),
      psk,
      dataDir: node.dataDir,
      topic: `quotad/${config.cluster.name}/gossip/1`,
      onEvent: (name, fields) => log.debug(name, fields)
    })
    t.onGossip = (from, data) => this.onGossip(from, data)
    t.onRequest = (from, data) => this.onRequest(from, data)
    t.onPeer = (peerId, connected) => log.info(connected ? 'peer connected' : 'peer disconnected', { peerId })
    await t.start()
    this.transport = t
    log.info('cluster started', { peerId: t.peerId, listen: t.listenAddrs, epoch: this.core.epoch })
    this.timer = setInterval(() => this.tick(), this.core.tuning.tickMs)
  }

  private tick (): void {
    this.dispatch(this.core.tick(this.opts.clock.now()))
  }

  private dispatch (out: Outbound[]): void {
    const t = this.transport
    if (t === null) return
    for (const o of out) {
      if (o.kind === 'gossip') {
        t.publish(packr.pack(o.msg)).catch(err => this.opts.log.debug('publish failed', { err }))
      } else {
        const p = this.request(t, o.to, o.msg)
        this.inflight.add(p)
        void p.finally(() => this.inflight.delete(p))
      }
    }
  }

  private async request (t: Transport, to: string, msg: Want | Grant): Promise<void> {
    const clock = this.opts.clock
    const peerId = this.idsByName.get(to)
    if (peerId === undefined) { this.core.onRequestFailed(msg, clock.now()); return }
    try {
      const raw = await t.request(peerId, packr.pack(msg), this.core.tuning.wantTimeoutMs)
      const reply = parseMessage(packr.unpack(raw), this.bounds)
      if (reply.t !== 'grant' && reply.t !== 'ack' && reply.t !== 'none') throw new Error(`unexpected reply ${reply.t}`)
      this.core.onReply(msg, reply, clock.now())
      if (reply.t === 'grant') this.opts.onTokens?.()
    } catch (err) {
      this.core.onRequestFailed(msg, clock.now())
      this.opts.log.debug('request failed', { to, type: msg.t, err })
    }
  }

  private onGossip (from: string, data: Uint8Array): void {
    try {
      const m = parseMessage(packr.unpack(data), this.bounds)
      if (m.t !== 'gossip') throw new Error('not a gossip')
      const known = this.idsByName.get(m.node)
      if (known !== from) {
        if (known !== undefined) this.opts.log.warn('node name moved to another peer id', { node: m.node, was: known, now: from })
        this.idsByName.set(m.node, from)
      }
      const before = this.core.peers.get(m.node)?.rules
      this.core.onGossip(m, this.opts.clock.now())
      if (before !== undefined) this.logRuleChanges(m.node, before)
      else this.logRuleChanges(m.node, {})
    } catch (err) {
      this.core.onBadMessage()
      this.opts.log.debug('dropped a malformed gossip', { from, err })
    }
  }

  /** Say so (once per change) when a peer's rules differ from ours: those rules' tokens are not shared. */
  private logRuleChanges (peer: string, before: Record<string, string>): void {
    const after = this.core.peers.get(peer)?.rules ?? {}
    for (const r of this.core.limiter.rules) {
      const was = before[r.name] === r.hash
      const is = after[r.name] === r.hash
      if (was !== is || (Object.keys(before).length === 0 && !is)) {
        const fields = { peer, rule: r.name, ours: r.hash, theirs: after[r.name] ?? null }
        if (is) this.opts.log.info('rule agreed with peer; sharing its tokens', fields)
        else this.opts.log.warn('rule differs from peer; its tokens are not shared with that peer', fields)
      }
    }
  }

  private onRequest (_from: string, data: Uint8Array): Uint8Array {
    const now = this.opts.clock.now()
    let m
    try {
      m = parseMessage(packr.unpack(data), this.bounds)
    } catch (err) {
      this.core.onBadMessage()
      this.opts.log.debug('dropped a malformed request', { err })
      throw err
    }
    if (m.t === 'want') return packr.pack(this.core.onWant(m, now))
    if (m.t === 'grant') {
      const ack = this.core.onGrant(m, now)
      this.opts.onTokens?.()
      return packr.pack(ack)
    }
    this.core.onBadMessage()
    throw new Error(`unexpected request ${m.t}`)
  }

  status (nowMs: number): Record<string, unknown> {
    const s = clusterStatus(this.core, nowMs, this.idsByName)
    return { ...s, cluster: { ...(s.cluster as object), start: this.startKind, peerId: this.transport?.peerId, transport: this.transport?.stats() } }
  }

  /**
   * Graceful stop: hand held tokens to live peers and wait (bounded) for
   * their acks, publish a last gossip, save what is left, stop libp2p.
   */
  async stop (handoffTimeoutMs = 3000): Promise<void> {
    if (this.stopping) return
    this.stopping = true
    if (this.timer !== null) clearInterval(this.timer)
    // A want sent on the last ticks may still bring tokens: let it settle before
    // the handoff and the save, or tokens credited after them would be lost.
    await Promise.allSettled([...this.inflight])
    this.timer = null
    const { clock, node, config, log } = this.opts
    const t = this.transport
    if (t !== null) {
      // Say we are leaving and give peers a moment to hear it, so that nodes
      // stopping at the same time don't hand tokens to each other and lose them.
      this.core.leaving = true
      await t.publish(packr.pack(this.core.gossipNow(clock.now()))).catch(() => 0)
      await new Promise(resolve => setTimeout(resolve, 2 * this.core.tuning.gossipIntervalMs))
      const grants = this.core.handoff(clock.now())
      const sent = grants.filter(o => o.kind === 'request').length
      const deadline = AbortSignal.timeout(handoffTimeoutMs)
      await Promise.race([
        Promise.all(grants.map(async o => o.kind === 'request' ? await this.request(t, o.to, o.msg) : undefined)),
        new Promise(resolve => deadline.addEventListener('abort', resolve))
      ])
      const given = grants.reduce((n, o) => n + (o.kind === 'request' && o.msg.t === 'grant' ? o.msg.items.reduce((m, i) => m + i[1], 0) : 0), 0)
      let unacked = 0
      for (const n of this.core.ledger.inTransit().values()) unacked += n
      // Unacked grants may or may not have been applied: they can't be saved (that could create
      // tokens), so whatever was not applied is stranded. Say how much is at risk.
      if (unacked > 0) log.warn('handoff not acknowledged; tokens in those grants may be stranded', { tokens: unacked })
      log.info('handed off tokens', { grants: sent, tokens: given })
      // A last gossip so peers see what this node no longer holds.
      await t.publish(packr.pack(this.core.gossipNow(clock.now()))).catch(() => 0)
    }
    const now = clock.now()
    const keys = snapshotKeys(this.core, now)
    await writeState(node.dataDir, { version: 1, node: node.name, cluster: config.cluster.name, status: 'stopped', allocate: this.core.limiter.allocate, stoppedAt: now, keys })
    if (t !== null) await t.stop()
    this.transport = null
  }
}
