/**
 * The cluster driver: carries the pure ClusterCore's messages over the
 * libp2p transport, on a clock, and keeps the node's durable state.
 *
 * It owns: the tick timer; msgpack encoding of cluster messages; requests
 * and their replies, the journal and what waits for it (node-effects.ts, shared with the simulator); and the state file. It hands the core every message with
 * the peer id the transport authenticated (the gossip's signer, the stream's
 * remote peer): the core takes it only if the name in it is bound to that id
 * (membership.ts). A reply counts only if it names the node asked. Every decision is the core's, stopping
 * included: `stop()` starts the core's stop machine (lifecycle.ts), ticks it
 * until it hands over its snapshot, and writes that. A peer's malformed or
 * oversized message is dropped, counted (`badMessages`) and logged at debug;
 * the node keeps running.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { wallEdge, type Clock } from '../clock.js'
import { LogOnce } from '../util/log-once.js'
import type { ClusterConfig, NodeConfig, RuleConfig } from '../config/types.js'
import { loadSwarmKey } from '../config/swarm-key.js'
import type { Resolution } from '../core/limiter.js'
import type { Logger } from '../util/log.js'
import type { ClusterCore } from './cluster-core.js'
import { clusterStatus } from './cluster-status.js'
import { readState, STATE_FILE, writeState, type StartKind } from './durable-state.js'
import { startCore, type Restored } from './persist.js'
import { openAttestations, readAttestations, writeAttestations } from './attest-file.js'
import { NodeFiles, readJournal } from './node-disk.js'
import { readReplicas } from './replica-file.js'
import { checkOwner } from './state-schema.js'
import { clusterHash } from './cluster-hash.js'
import { ReclaimLog } from './reclaim-log.js'
import { GossipInbox } from './gossip-inbox.js'
import { NodeEffects, type Done, type LocalAcquire } from './node-effects.js'
import { ForwardSlots } from './forward-slots.js'
import { isWaitHandle, type AcquireResult, type Decision } from '../core/types.js'
import { DEFAULT_BOUNDS, gossipTopic, membersTopic, seedsTopic, type Gossip, type Hb, type MessageBounds } from './messages.js'
import { decodeGossip, encodeGossip } from './gossip-codec.js'
import { needsLease } from './member-gossip.js'
import { gossipAudience } from './member-sums.js'
import type { Transport, TransportOptions } from './transport/types.js'
import { ErrorCodes, QuotadError } from '../errors.js'


export interface ClusterNodeOptions {
  config: ClusterConfig
  node: NodeConfig
  clock: Clock
  log: Logger
  /** Build the transport (tests may inject). @default the libp2p transport, in a worker thread */
  createTransport?: (opts: TransportOptions) => Promise<Transport>
  /** Called when tokens arrived, so waiting acquires can be served. */
  onTokens?: () => void
  /** A member's forwarded acquire with a `wait`, served as this node's own client's (the daemon's LocalQuota). */
  acquire?: (key: string, count: number, waitMs: number, here: boolean) => AcquireResult | undefined
  /**
   * Called once when this incarnation must give way to a new one (ClusterCore.renewal: a quorum of seeds attests it
   * dead, or its calendar must realign): the daemon starts a new one in-process (daemon.ts renew).
   */
  onRenew?: (why: 'reclaimed' | 'calendar') => void
}

export class ClusterNode {
  readonly core: ClusterCore
  readonly startKind: StartKind
  private readonly opts: ClusterNodeOptions
  /** Warnings a peer causes (rules that differ, refused grants): once per interval per (peer, reason), with a count. */
  private readonly once: LogOnce
  private readonly restored: Restored
  private transport: Transport | null = null
  private timer: NodeJS.Timeout | null = null
  private stopping: Promise<void> | null = null
  private readonly bounds: MessageBounds
  /** The journal, the journal copies and the attestations on disk (node-disk.ts): the disk port. */
  private readonly files: NodeFiles
  /** Requests in and out, and what waits for the disk (node-effects.ts): the interpreter the simulator runs too. */
  private readonly fx: NodeEffects
  /** A voter found no attestations file (a first start, or a state file from before `attestKept`): start() creates it. */
  private attestMissing = false
  /** Gossip is applied in slices off the transport's callback, so socket reads are not queued behind it (gossip-inbox.ts). */
  private readonly inbox = new GossipInbox({ apply: (from, data) => this.onGossip(from, data) })

  private constructor (opts: ClusterNodeOptions, core: ClusterCore, restored: Restored) {
    this.opts = opts
    this.core = core
    this.loggedFenced = core.fence.fenced
    this.reclaimLog = new ReclaimLog(opts.log)
    this.startKind = restored.kind
    this.restored = restored
    this.bounds = { ...DEFAULT_BOUNDS, maxKeyBytes: opts.config.limits.maxKeyBytes, maxMembers: opts.config.limits.maxMembers }
    this.memberTopic = gossipTopic(opts.config.cluster.name)
    this.once = new LogOnce(() => opts.clock.mono())
    this.files = new NodeFiles(opts.node.dataDir, opts.node.name, opts.config.cluster.name)
    const stopped = (done: Done<Uint8Array>): void => { done(new Error('the transport is stopped')) }
    this.fx = new NodeEffects({
      core,
      disk: this.files,
      net: {
        request: (_to, peerId, bytes, _msg, timeoutMs, done) => {
          const t = this.transport
          if (t === null) stopped(done)
          else t.request(peerId, bytes, timeoutMs).then(r => { done(null, r) }, done)
        },
        call: (_to, peerId, bytes, _msg, timeoutMs, done) => {
          const t = this.transport
          if (t === null) stopped(done)
          else t.call(peerId, bytes, timeoutMs).then(r => { done(null, r) }, done)
        },
        publish: (msg, members) => { if (this.transport !== null) this.publish(this.transport, msg, members) }
      },
      clock: opts.clock,
      bounds: this.bounds,
      log: opts.log,
      once: this.once,
      slots: this.slots,
      onTokens: () => { opts.onTokens?.() },
      acquire: localAcquire(opts.acquire)
    })
  }

  /** Read the durable state and build the state machine (nothing runs, nothing is written yet). */
  static async create (opts: ClusterNodeOptions): Promise<ClusterNode> {
    const { node, config, clock } = opts
    const saved = await readState(node.dataDir)
    if (saved !== undefined) checkOwner(saved, join(node.dataDir, STATE_FILE), node.name, config.cluster.name)
    const journal = saved?.status === 'running' ? await readJournal(node.dataDir, node.name, config.cluster.name, opts.log) : undefined
    const seeds = config.nodes.filter(n => n.seed).map(n => n.name)
    // A seed keeps copies of the other seeds' journals (replica-store.ts): what a heir would read.
    const replicas = seeds.includes(node.name) ? await readReplicas(node.dataDir, seeds.filter(s => s !== node.name)) : undefined
    const superseded = seeds.includes(node.name) ? await readReplicas(node.dataDir, seeds.filter(s => s !== node.name), true) : undefined
    const { core, restored } = startCore({
      node: node.name,
      epoch: randomBytes(8).toString('hex'),
      cluster: config.cluster.name,
      clusterHash: clusterHash(config),
      seeds,
      replicas,
      superseded,
      listed: new Map(config.nodes.map(n => [n.name, n.peerId])),
      maxMembers: config.limits.maxMembers,
      maxMembersPerHost: config.limits.maxMembersPerHost,
      limits: config.limits,
      tuning: {
        gossipIntervalMs: config.cluster.gossipIntervalMs,
        leases: config.cluster.leases,
        leaseMs: config.cluster.leaseMs,
        reclaimMs: config.cluster.reclaimMs,
        maxClockSkewMs: config.cluster.maxClockSkewMs,
        voters: config.cluster.voters,
        firstUseWaitMs: config.cluster.firstUseWaitMs,
        inheritSeeds: config.cluster.inheritSeeds
      },
      ...wallEdge(clock)
    }, config.rules, saved, clock.mono(), journal)
    // A voter's attestations outlive it: it must never echo again what it attested (reclaim.ts). A lost file is
    // refused, not taken for "none" (attest-file.ts); a voter's first start creates it, before its state file.
    const voting = core.reclaim.voting
    const { attested, missing } = voting
      ? await openAttestations(node.dataDir, node.name, config.cluster.name, saved?.attestKept === true)
      : { attested: await readAttestations(node.dataDir, node.name, config.cluster.name), missing: false }
    for (const [n, inc] of attested) core.reclaim.attested.set(n, inc)
    const created = new ClusterNode(opts, core, restored)
    created.attestMissing = voting && missing
    return created
  }

  async start (): Promise<void> {
    const { node, config, log } = this.opts
    const r = this.restored
    if (r.dropped > 0) log.warn('saved keys of removed rules are dropped, as a reload would drop them', { keys: r.dropped })
    if (r.changed.length > 0) log.info('rules changed since the stop; keys carried over as by a reload', { rules: r.changed })
    // The attestations file exists before a state file says it is kept (persist.ts `attestKept`).
    if (this.attestMissing) await writeAttestations(node.dataDir, node.name, config.cluster.name, this.core.reclaim.attested)
    // Consume the saved state before serving: a crash from here on starts with nothing.
    await writeState(node.dataDir, this.core.save(this.opts.clock.mono(), 'running'))
    // This incarnation's journal starts with a checkpoint of what it has now, before it serves or gives anything.
    if (!await settle(this.fx.persistJournal())) throw new QuotadError(ErrorCodes.JOURNAL_UNWRITABLE, `cannot write the journal in ${node.dataDir}`, { dataDir: node.dataDir })
    log.info('cluster state', {
      start: this.startKind, allocate: this.core.limiter.allocate, incarnation: this.core.incarnation,
      restoredKeys: r.keys, restoredTokens: r.tokens, owedBurn: r.burn, recovered: r.recovered
    })
    if (r.recovered) {
      log.info('recovered the crashed incarnation\'s tokens from the journal; they are spendable once its last spends have returned',
        { tokens: r.tokens, keys: r.keys })
    }

    const psk = await loadSwarmKey(config.cluster.secretFile)
    // libp2p runs in a worker thread, off the loop that answers the socket (thread-transport.ts).
    const create = this.opts.createTransport ?? (await import('./transport/thread-transport.js')).createTransport
    const t = await create({
      listen: node.listen,
      // Port 0 is "any port": such an entry can't be dialled (its node dials us instead).
      seeds: config.nodes.filter(n => n.name !== node.name && !/\/tcp\/0$/.test(n.listen)).map(n => n.listen),
      psk,
      dataDir: node.dataDir,
      threadNice: config.cluster.transportNice,
      // An honest origin publishes at most two gossips an interval (a seed: its own and its members' copy);
      // twice that is its budget before the transport drops its gossip and graylists a flooder (flood-guard.ts).
      maxGossipPerSec: 2 * 2 * 1000 / config.cluster.gossipIntervalMs,
      // A member hears the gossip topic (the seeds' copies for members: member-gossip.ts) and publishes on the
      // members' topic, which only seeds hear (member-sums.ts). A seed hears the seeds' and the members' topics,
      // publishes its whole gossip on the seeds' and the members' copy on the gossip topic.
      ...(gossipAudience(node.name, this.core.seeds) === 'seeds'
        ? { topic: gossipTopic(config.cluster.name), publishTopic: membersTopic(config.cluster.name) }
        : { topic: seedsTopic(config.cluster.name), alsoSubscribe: [membersTopic(config.cluster.name)], alsoPublish: [gossipTopic(config.cluster.name)] }),
      onEvent: (name, fields) => {
        if (name === 'thread-exited') log.error('the transport thread ended: this node hears no peer; restart it', fields)
        else if (name === 'thread-nice') log.info('transport thread priority', fields)
        else if (name === 'gossip-flood') log.warn('a peer floods gossip with its own key, far above any honest node\'s rate: its gossip is ignored unread for penaltyMs', { ...fields, name: this.core.membership.nameOf(String(fields.peerId)) ?? null })
        else log.debug(name, fields)
      }
    })
    t.onGossip = (from, data) => this.inbox.push(from, data)
    t.onRequest = async (from, data) => await new Promise((resolve, reject) => { this.fx.serveRequest(from, data, answered(resolve, reject)) })
    t.onCall = async (from, data) => await new Promise((resolve, reject) => { this.fx.serveCall(from, data, answered(resolve, reject)) })
    t.onPeer = (peerId, connected) => log.info(connected ? 'peer connected' : 'peer disconnected', { peerId, node: this.core.membership.nameOf(peerId) ?? null })
    await t.start()
    this.transport = t
    // A seed admits a member only from a peer connected now, a bounded number per address (membership.ts).
    this.core.membership.hostOf = id => t.hostOf(id)
    const pinned = node.peerId
    if (pinned !== undefined && pinned !== t.peerId) {
      // Our own entry pins another key: peers would drop everything we say. Say so plainly.
      log.error('this node\'s peer id is not the one the cluster file pins for it: peers will ignore it', { pinned, actual: t.peerId })
    }
    const unpinned = config.nodes.filter(n => n.seed && n.peerId === undefined).map(n => n.name)
    if (unpinned.length > 0 && config.nodes.length > 1) log.warn('seeds without a pinned peerId are bound to the first peer id that speaks for them; pin them (quotad peer-id)', { seeds: unpinned })
    log.info('cluster started', { peerId: t.peerId, listen: t.listenAddrs, epoch: this.core.epoch })
    this.timer = setInterval(() => this.tick(), this.core.tuning.tickMs)
  }

  /**
   * A member's acquire of a `decide: "seeds"` rule (forward.ts): the seed's
   * decision, or a denial after waitMs + forwardTimeoutMs; null when
   * this node decides it (a seed, another rule, no seed to ask).
   */
  forward (key: string, count: number, waitMs: number, here = false): Promise<Decision> | null {
    if (this.transport === null) return null
    let d: Decision | undefined
    let k: ((d: Decision) => void) | undefined
    // Answered later, as a promise is, even when decided at once (credit, a kept denial).
    if (!this.fx.forwardAcquire(key, count, waitMs, here, v => { if (k !== undefined) k(v); else d = v })) return null
    return new Promise(resolve => { if (d !== undefined) resolve(d); else k = resolve })
  }

  /** Forwards in flight per seed, the rest queued (forward-slots.ts). */
  private readonly slots = new ForwardSlots()

  /** Tick once more as soon as the event loop is free (one pending at most): a first-use want goes out now. */
  private soon = false
  /** The driver was told this incarnation must give way (onRenew): once. */
  private renewAsked = false
  tickSoon (): void {
    if (this.soon || this.timer === null) return
    this.soon = true
    setImmediate(() => { this.soon = false; if (this.timer !== null) this.tick() })
  }

  private tick (): void {
    const { clock } = this.opts
    const mono = clock.mono()
    this.core.observeWall(clock.now(), mono)
    this.fx.dispatch(this.core.tick(mono))
    this.logFence(mono)
    if (this.core.wallClockOff !== this.loggedWallOff) {
      this.loggedWallOff = this.core.wallClockOff
      if (this.loggedWallOff) this.opts.log.warn('this node\'s wall clock stepped back, or is off from a quorum of seeds\' wall clocks: its calendar keeps the cluster\'s time and does not follow it (fix the clock: NTP)', { wallGapMs: Math.round(this.core.calendar.wallGapMs) })
      else this.opts.log.info('this node\'s wall clock agrees with a quorum of seeds\' again: its calendar follows it', {})
    }
    this.reclaimLog.tick(this.core)
    const why = this.core.renewal
    if (why !== null && !this.renewAsked) {
      this.renewAsked = true
      if (why === 'calendar') this.opts.log.warn('this node\'s calendar is off from a quorum of seeds while its wall clock agrees with them (it started on a wrong clock): starting a new incarnation in-process, whose calendar reads the wall clock', { clockOffsetMs: Math.round(this.core.fence.skewOffsetMs), wallGapMs: Math.round(this.core.calendar.wallGapMs) })
      this.opts.onRenew?.(why)
    }
    // Credits since the last write (no fsync needed: a lost credit is a lost token, never a double one).
    if (this.transport !== null) this.fx.persistJournal()
  }

  /** The fence as last logged: as at the start (fenced until its first quorum echo, unless a seed's start lease, lease.ts). */
  private loggedFenced: boolean
  private loggedSkewed = false
  private loggedWallOff = false
  private logFence (mono: number): void {
    const f = this.core.fence
    // Fenced for want of a lease, then for a skewed clock (or back), is a change worth a line too.
    if (f.fenced === this.loggedFenced && (!f.fenced || f.skewed === this.loggedSkewed)) return
    this.loggedFenced = f.fenced
    this.loggedSkewed = f.skewed
    const lease = f.status(mono)
    if (f.fenced && !needsLease(this.core, mono)) this.opts.log.info('no lease: this member decides no rule itself (decide: "seeds") and holds nothing, so it asks the seeds for none', {})
    else if (f.fenced && f.skewed) this.opts.log.warn('fenced: this node\'s clock is off from a quorum of seeds by more than maxClockSkewMs; hard-mode spending and giving stop until it agrees (fix the clock: NTP)', { clockOffsetMs: Math.round(f.skewOffsetMs), maxClockSkewMs: this.core.tuning.maxClockSkewMs })
    else if (f.fenced) this.opts.log.warn('fenced: no quorum of seeds echoed this node within leaseMs; hard-mode spending and giving stop', { leaseMs: lease.leaseMs, echoAgeMs: lease.echoAgeMs })
    else this.opts.log.info('unfenced: a quorum of seeds echoes this node; hard-mode spending resumes', { echoAgeMs: lease.echoAgeMs })
  }

  /** Apply new rules (SIGHUP): the core carries keys over (rule-change.ts). */
  setRules (rules: RuleConfig[]): Resolution[] {
    return this.core.setRules(rules, this.opts.clock.mono())
  }

  private readonly reclaimLog: ReclaimLog

  /** A gossip; and, at a seed with members, the members' copy on the gossip topic (the same bytes when it is the same). */
  private publish (t: Transport, msg: Gossip | Hb, members: Gossip | Hb | undefined): void {
    const bytes = encodeGossip(msg)
    const failed = (err: unknown): void => { this.opts.log.debug('publish failed', { err }) }
    t.publish(bytes).catch(failed)
    if (members !== undefined) t.publish(members === msg ? bytes : encodeGossip(members), this.memberTopic).catch(failed)
  }

  private readonly memberTopic: string

  private onGossip (from: string, data: Uint8Array): void {
    try {
      const m = decodeGossip(data, this.bounds)
      if (m.t !== 'gossip' && m.t !== 'hb') throw new Error('not a gossip')
      const before = this.core.peers.get(m.node)?.rules
      const verdict = this.core.onGossip(m, from, this.opts.clock.mono())
      if (verdict !== 'ok') { this.refused(verdict, m.node, from); return }
      // A settled incarnation's gossip is ignored (it is in no peer table): no rules to compare, nothing to log.
      if (this.core.peers.get(m.node) !== undefined) this.logRuleChanges(m.node, before ?? {})
      if (m.t === 'gossip' && m.members !== undefined) this.checkName()
    } catch (err) {
      this.core.onBadMessage()
      this.opts.log.debug('dropped a malformed gossip', { from, err })
    }
  }

  /** Messages in a name not bound to their sender: counted in status; logged once per name and peer id. */
  private readonly warned = new Set<string>()
  private refused (verdict: 'impostor' | 'unknown', node: string, from: string): void {
    const k = `${node}/${from}`
    if (this.warned.has(k) || this.warned.size > 256) return
    this.warned.add(k)
    if (verdict === 'impostor') {
      this.opts.log.error('refused a node: its name is bound to another peer id (two processes with one name, or a copied data directory)',
        { code: 'E_NAME_TAKEN', node, from, boundTo: this.core.membership.idOf(node) ?? null })
    }
    else this.opts.log.info('dropped messages from a name no one vouches for yet', { node, from })
  }

  /** Seeds that refuse this node's name (status); logged once per change. */
  private nameTaken: { seeds: string[], heldBy: string | undefined } = { seeds: [], heldBy: undefined }
  private checkName (): void {
    const id = this.transport?.peerId
    if (id === undefined) return
    const t = this.core.membership.takenBy(id)
    if (t.seeds.join() === this.nameTaken.seeds.join()) return
    this.nameTaken = t
    if (t.seeds.length > 0) {
      this.opts.log.error('the cluster refuses this node: its name is taken by another peer id; start it under another --node name (or stop the other process)',
        { code: 'E_NAME_TAKEN', node: this.core.node, peerId: id, heldBy: t.heldBy ?? null, seeds: t.seeds })
    } else {
      this.opts.log.info('the seeds no longer refuse this node\'s name', { node: this.core.node })
    }
  }

  /**
   * Say so when a peer's rules differ from ours (those rules' tokens are not shared): one line for all the rules
   * that changed, and for one peer at most once per interval (LogOnce), so a peer (or a made-up name's first
   * gossip, which says no rules) costs a line, never one per rule.
   */
  private logRuleChanges (peer: string, before: Record<string, string>): void {
    const after = this.core.peers.get(peer)?.rules ?? {}
    if (after === before) return
    const differ: string[] = []
    const agreed: string[] = []
    for (const r of this.core.limiter.rules) {
      const was = before[r.name] === r.hash
      const is = after[r.name] === r.hash
      if (was !== is || (Object.keys(before).length === 0 && !is)) (is ? agreed : differ).push(r.name)
    }
    if (agreed.length > 0) this.opts.log.debug('rule agreed with peer; sharing its tokens', { peer, rules: agreed.slice(0, 16), count: agreed.length })
    if (differ.length > 0) {
      this.once.log(this.opts.log, 'warn', peer, 'rules differ', 'rule differs from peer; its tokens are not shared with that peer',
        { peer, rules: differ.slice(0, 16), count: differ.length })
    }
  }

  status (): Record<string, unknown> {
    const s = clusterStatus(this.core, this.opts.clock.mono(), this.opts.clock.now())
    const taken = this.nameTaken.seeds.length > 0 ? { nameTaken: { seeds: this.nameTaken.seeds, heldBy: this.nameTaken.heldBy ?? null } } : {}
    return { ...s, cluster: { ...(s.cluster as object), start: this.startKind, peerId: this.transport?.peerId, listen: this.transport?.listenAddrs, transport: this.transport?.stats(), inbox: this.inbox.stats(), ...taken } }
  }

  /** The transport's counters (empty before start and after stop). */
  transportStats (): Record<string, number> {
    return this.transport?.stats() ?? {}
  }

  /**
   * Graceful stop, run by the core's stop machine (lifecycle.ts): announce
   * leaving, settle, hand off, wait for acks, snapshot. Then write the
   * snapshot and stop libp2p. Idempotent.
   */
  stop (): Promise<void> {
    this.stopping ??= this.runStop()
    return this.stopping
  }

  private async runStop (): Promise<void> {
    const { clock, node, log } = this.opts
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    this.fx.dispatch(this.core.beginStop(clock.mono()))
    // The machine's phases all have deadlines; this loop only keeps it ticking.
    while (this.core.snapshot === null) {
      await new Promise(resolve => setTimeout(resolve, this.core.tuning.tickMs))
      this.tick()
    }
    const snap = this.core.snapshot
    const unacked = this.core.ledger.unackedTotal()
    // Unacked grants may or may not have been applied: not saved (that could create tokens). Say how much is at risk.
    if (unacked > 0) log.warn('handoff not acknowledged; tokens in those grants may be stranded', { tokens: unacked })
    log.info('handed off tokens', { tokens: this.core.counters.handedOff })
    await writeState(node.dataDir, snap)
    // The snapshot supersedes the journal (a clean restart reads only the snapshot).
    await settle(this.fx.settled())
    await this.files.close()
    this.inbox.close()
    const t = this.transport
    this.transport = null
    if (t !== null) await t.stop()
  }
}

/** An effect's outcome as a promise (the daemon awaits it). */
async function settle<T> (l: { then: (k: (v: T) => void) => void }): Promise<T> {
  return await new Promise<T>(resolve => { l.then(resolve) })
}

/** A served request's answer to the transport: its bytes, or a throw that resets the stream. */
function answered (resolve: (b: Uint8Array) => void, reject: (err: unknown) => void): Done<Uint8Array> {
  return (err, bytes) => { if (err != null) reject(err); else resolve(bytes as Uint8Array) }
}

/** The daemon's LocalQuota acquire, as the interpreter's `acquire` port: a wait handle's promise answers `late`. */
function localAcquire (acquire: ClusterNodeOptions['acquire']): LocalAcquire | undefined {
  if (acquire === undefined) return undefined
  return (key, count, waitMs, here, late) => {
    const r: AcquireResult | undefined = acquire(key, count, waitMs, here)
    if (r === undefined || !isWaitHandle(r)) return r
    r.promise.then(late, (error: unknown) => { late({ error }) })
    return 'waiting'
  }
}
