/**
 * The composition root: the one place that builds a quotad node's components
 * and starts and stops them in order. CLI entry points stay thin and call
 * this; tests call it directly to run real nodes in-process.
 *
 * Start order: data dir and its lock (one daemon per node; nothing is read or
 * written before it is held) -> cluster (durable state consumed, libp2p up)
 * -> decision service -> Unix socket -> Envoy's gRPC Rate Limit Service (if
 * nodes[].grpc; it decides through the same service as the socket). Stop
 * order is the reverse: the socket and the gRPC server stop taking work
 * first (in-flight waiters are answered), then the cluster hands its tokens
 * to peers and saves what is left, then timers stop, then the lock goes.
 *
 * A cluster file with one node runs without the cluster layer (no libp2p,
 * no swarm key needed): the node holds the whole stock.
 *
 * A new incarnation in-process (`renew`): when a quorum of seeds attests
 * this incarnation dead (it was cut off or paused past reclaimMs, and its
 * peers settled it), the cluster layer alone restarts, through its one
 * stop and start path: the old ClusterNode stops (its stop machine, its
 * snapshot), a new one is created from the data directory as any clean
 * restart is, and the decision service decides through it. The lock, the
 * socket, the gRPC and HTTP listeners stay open throughout, and every
 * request is answered (denied by the old incarnation, which admits nothing
 * once attested: its books are dropped).
 */
import { makeDirs } from './util/make-dirs.js'
import { ErrorCodes, QuotadError } from './errors.js'
import { systemClock, type Clock } from './clock.js'
import type { ClusterConfig, NodeConfig } from './config/types.js'
import { findNode } from './config/validate.js'
import { LocalQuota, type ClusterBinding } from './node/local-quota.js'
import { LoneStore } from './node/lone-store.js'
import { UnixServer } from './server/unix-server.js'
import { ClusterNode } from './cluster/cluster-node.js'
import { createLogger, type Logger } from './util/log.js'
import { DataLock } from './node/data-lock.js'
import type { HttpServer } from './http/http-server.js'
import type { MetricSources } from './http/metrics.js'
import type { RlsServer } from './envoy/rls-server.js'

/**
 * The listeners a node runs only when configured, loaded only then: the gRPC server's modules (grpc-js and the
 * protobuf loader) and the metrics' are a tenth of a node's start on the main thread (bench/member-flood.ts).
 */
interface Optional {
  RlsServer: typeof RlsServer | null
  http: { HttpServer: typeof HttpServer, Metrics: typeof import('./http/metrics.js').Metrics } | null
}

async function loadOptional (node: NodeConfig): Promise<Optional> {
  const [rls, http, metrics] = await Promise.all([
    node.grpc === undefined ? null : import('./envoy/rls-server.js'),
    node.http === undefined ? null : import('./http/http-server.js'),
    node.http === undefined ? null : import('./http/metrics.js')
  ])
  return { RlsServer: rls?.RlsServer ?? null, http: http === null || metrics === null ? null : { HttpServer: http.HttpServer, Metrics: metrics.Metrics } }
}

/** Why a new incarnation started in-process (ClusterCore.renewal), as status and the log say it. */
const RENEW_WHY = {
  reclaimed: 'a quorum of seeds attests this incarnation dead (it was cut off or paused for longer than reclaimMs); its peers were credited what it held',
  calendar: 'its calendar was off from a quorum of seeds while its wall clock agreed with them (started on a wrong clock): the new one\'s calendar reads the wall clock'
} as const

export interface DaemonOptions {
  config: ClusterConfig
  /** Which of the cluster file's nodes this process is. */
  node: string
  /** @default systemClock */
  clock?: Clock
  /** @default JSON lines on stderr at info */
  logger?: Logger
  /**
   * A quorum of seeds attested this incarnation dead and its new incarnation
   * could not be started in-process (`renew`): the CLI stops the daemon and
   * exits with ExitCodes.RESTART for its supervisor to start it again.
   */
  onRenewFailed?: () => void
}

export class Daemon {
  readonly node: NodeConfig
  readonly quota: LocalQuota
  readonly server: UnixServer
  /** The cluster layer: replaced by a new incarnation's when this one is attested dead (`renew`). */
  get cluster (): ClusterNode | null { return this.current }
  private current: ClusterNode | null
  /** The metrics and health listener (nodes[].http / --http), if configured. */
  readonly http: HttpServer | null
  /** Envoy's Rate Limit Service over gRPC (nodes[].grpc / --grpc), if configured. */
  readonly rls: RlsServer | null
  private config: ClusterConfig
  private readonly log: Logger
  private state: 'new' | 'running' | 'stopping' | 'stopped' = 'new'

  private readonly lock: DataLock
  private readonly clock: Clock
  private readonly opts: DaemonOptions
  /** What the metrics and /readyz read: its cluster and limiter follow a renewal. */
  private readonly sources: MetricSources | null = null
  /** New incarnations started in-process, and the last one's reason (status: `cluster.renewals`). */
  private renewals: { count: number, last: { why: string, from: number, to: number, tookMs: number } | null } = { count: 0, last: null }
  /** The renewal under way, if any: a stop waits for it. */
  private renewing: Promise<void> | null = null

  private constructor (opts: DaemonOptions, node: NodeConfig, log: Logger, cluster: ClusterNode | null, lock: DataLock, optional: Optional) {
    this.lock = lock
    this.opts = opts
    this.config = opts.config
    this.node = node
    this.log = log
    this.current = cluster
    const clock = this.clock = opts.clock ?? systemClock
    this.quota = new LocalQuota({
      node: this.node.name,
      seeds: opts.config.nodes.map(n => n.name),
      rules: opts.config.rules,
      limits: opts.config.limits,
      clock,
      cluster: cluster === null ? undefined : this.binding(cluster)
    })
    this.server = new UnixServer({
      path: this.node.socket,
      socketMode: this.node.socketMode,
      limits: opts.config.limits,
      service: this.quota
    })
    this.rls = optional.RlsServer === null || node.grpc === undefined
      ? null
      : new optional.RlsServer({ address: node.grpc, socketMode: node.socketMode, envoy: opts.config.envoy, service: this.quota, limits: opts.config.limits, clock, log: log.child('envoy') })
    if (optional.http === null || node.http === undefined) {
      this.http = null
    } else {
      const sources = this.sources = { limiter: this.quota.limiter, server: this.server, cluster, now: () => clock.mono() }
      const metrics = new optional.http.Metrics(sources)
      this.quota.timing = metrics
      this.http = new optional.http.HttpServer({ address: node.http, metrics, sources, status: () => this.quota.status() })
    }
  }

  /** Build and start a node. Rejects (with a QuotadError code) if it cannot serve. */
  static async start (opts: DaemonOptions): Promise<Daemon> {
    const node = findNode(opts.config, opts.node)
    const log = opts.logger ?? createLogger({ base: { node: node.name } })
    await makeDirs(node.dataDir, 0o700).catch(err => {
      throw new QuotadError(ErrorCodes.STATE_UNWRITABLE, `data directory ${node.dataDir} cannot be created: ${(err as Error).message}`, { errno: (err as NodeJS.ErrnoException).code })
    })
    const lock = await DataLock.acquire(node.dataDir)
    try {
      // The cluster is built first (it reads durable state) but reports arriving tokens to the quota built after it.
      const ref: { d?: Daemon } = {}
      const cluster = opts.config.nodes.length > 1 ? await Daemon.createCluster(opts.config, node, opts, log, ref) : null
      const d = ref.d = new Daemon(opts, node, log, cluster, lock, await loadOptional(node))
      await d.run()
      return d
    } catch (err) {
      await lock.release()
      throw err
    }
  }

  /** The cluster layer, from the data directory: at the start, and for each new incarnation (`renew`). */
  private static async createCluster (config: ClusterConfig, node: NodeConfig, opts: DaemonOptions, log: Logger, ref: { d?: Daemon }): Promise<ClusterNode> {
    return await ClusterNode.create({
      config, node, clock: opts.clock ?? systemClock, log: log.child('cluster'),
      onTokens: () => ref.d?.quota.kick(),
      acquire: (k, n, w, here) => ref.d?.quota.acquire(k, n, Math.min(w, config.limits.maxWaitMs), here),
      // Off the tick that learned it: the renewal stops this very cluster layer.
      onRenew: why => { setImmediate(() => { void ref.d?.renew(why) }) }
    })
  }

  /** How the decision service reaches a cluster layer. */
  private binding (cluster: ClusterNode): ClusterBinding {
    return {
      decider: cluster.core,
      limiter: cluster.core.limiter,
      status: () => this.clusterStatus(cluster),
      urgent: () => cluster.tickSoon(),
      forward: (k, n, w, here) => cluster.forward(k, n, w, here),
      elsewhere: k => cluster.core.forwarding.decidesAtSeeds(k)
    }
  }

  private clusterStatus (cluster: ClusterNode): Record<string, unknown> {
    const s = cluster.status()
    return { ...s, cluster: { ...(s.cluster as object), renewals: { count: this.renewals.count, last: this.renewals.last } } }
  }

  /**
   * Start a new incarnation of the cluster layer in-process (see the
   * header): the old one stops through its stop machine and writes its
   * snapshot, and the new one starts from the data directory, exactly as
   * a clean restart by a supervisor would (ClusterNode.create and start).
   *
   * Hard mode stays safe: a quorum of seeds attested the old incarnation,
   * so its peers settled it (credited themselves what it held of their
   * tokens; a seed's heir inherited its share) and no voter echoes it
   * again (it can never hold a lease again). It dropped its books when it
   * learned it (reclaim.ts `dropBooks`: held and deferred tokens to zero,
   * its spent ones owed as burn, its ledger's outboxes gone, a seed's
   * `allocate` off for good). The new incarnation has a new epoch and a
   * higher incarnation number; it carries the old one's snapshot, which
   * holds nothing spendable, and drops even that once a quorum attests the
   * carried incarnation (carrier.ts); it asks its peers for tokens anew,
   * as a member that joins does. So nothing the old one held is spent by
   * the new one, and what its peers were credited is theirs alone.
   *
   * A calendar to realign (`calendar`, fence.ts): the old incarnation was
   * alive and owned its books, so this is exactly a clean restart: its stop
   * hands what it can to peers and saves the rest, with return times moved
   * by the calendar's lag (persist.ts), and the new one restores them.
   */
  renew (reason: keyof typeof RENEW_WHY): Promise<void> {
    if (this.state !== 'running' || this.renewing !== null) return this.renewing ?? Promise.resolve()
    this.renewing = this.runRenew(reason).finally(() => { this.renewing = null })
    return this.renewing
  }

  private async runRenew (reason: keyof typeof RENEW_WHY): Promise<void> {
    const why = RENEW_WHY[reason]
    // E_RECLAIMED only where it was: a realigned calendar lost nothing.
    const code = reason === 'reclaimed' ? { code: ErrorCodes.RECLAIMED } : {}
    const old = this.current
    if (old === null) return
    const t0 = this.clock.mono()
    const from = old.core.incarnation
    try {
      await old.stop()
      const ref: { d?: Daemon } = { d: this }
      const config = this.config
      const next = await Daemon.createCluster(config, this.node, this.opts, this.log, ref)
      await next.start()
      this.current = next
      this.quota.bindCluster(this.binding(next))
      // A SIGHUP while this ran reached the old layer only (`reload`): the new one runs the file's rules from now on,
      // as a reload would give them to it. Without this it kept the rules from before the SIGHUP for good, and
      // disagreed with every peer (chaos 3+2 seed 20: a seed attested dead 0.6 s before a reload lowered a limit).
      if (this.config !== config) this.quota.setRules(this.config.rules)
      if (this.sources !== null) { this.sources.cluster = next; this.sources.limiter = next.core.limiter }
      const tookMs = Math.round(this.clock.mono() - t0)
      this.renewals = { count: this.renewals.count + 1, last: { why, from, to: next.core.incarnation, tookMs } }
      this.log.warn('new incarnation', { why, from, to: next.core.incarnation, epoch: next.core.epoch, tookMs, renewals: this.renewals.count, ...code })
    } catch (err) {
      // The old incarnation admits nothing again; without a new one this process serves nothing: its supervisor must.
      this.log.error('the new incarnation could not start in-process; exiting for the supervisor to start it', { err, ...code })
      this.opts.onRenewFailed?.()
    }
  }

  private async run (): Promise<void> {
    this.quota.start()
    try {
      if (this.cluster === null && this.quota.calendar !== null) {
        // A lone node's own books (lone-store.ts): restored before the socket opens, closed after it stops.
        const store = await LoneStore.open({
          dataDir: this.node.dataDir, node: this.node.name, limiter: this.quota.limiter, calendar: this.quota.calendar, skewMs: this.config.cluster.maxClockSkewMs
        }, this.clock.mono())
        this.quota.store = store
        this.log.info('state restored', { start: store.restored.kind, keys: store.restored.keys, tokens: store.restored.tokens })
      }
      await this.cluster?.start()
      await this.server.start()
      await this.rls?.start()
      await this.http?.start()
    } catch (err) {
      await this.rls?.stop().catch(() => {})
      await this.server.stop().catch(() => {})
      await this.cluster?.stop().catch(() => {})
      await this.quota.store?.close(this.clock.mono()).catch(() => {})
      this.quota.stop()
      throw err
    }
    this.state = 'running'
    this.log.info('serving', {
      socket: this.node.socket,
      socketMode: '0' + this.node.socketMode.toString(8),
      rules: this.config.rules.map(r => r.name),
      seeds: this.config.nodes.filter(n => n.seed).length,
      ...(this.http === null ? {} : { http: this.http.address }),
      ...(this.rls === null ? {} : { grpc: this.rls.address, envoyDomains: this.config.envoy?.domains.map(d => d.domain) ?? [] })
    })
    if (this.rls !== null && this.config.envoy === undefined) this.log.warn('gRPC Rate Limit Service without an envoy section: every domain is unknown, every request answered OK')
  }

  /**
   * Apply a new cluster file's rules (SIGHUP). The caller has validated it;
   * a file that fails validation never reaches here, so the old rules stay.
   */
  reload (next: ClusterConfig): void {
    const mine = findNode(next, this.node.name)
    if (mine.socket !== this.node.socket || mine.listen !== this.node.listen || mine.dataDir !== this.node.dataDir || mine.grpc !== this.node.grpc) {
      this.log.warn('reload applies rules and limits of rules only; socket, listen, dataDir and grpc changes need a restart')
    }
    const before = new Map(this.quota.limiter.rules.map(r => [r.name, r.hash]))
    this.quota.setRules(next.rules)
    // In the same turn as the rules its descriptors made: no call sees one without the other.
    this.rls?.setConfig(next.envoy)
    const after = this.quota.limiter.rules
    this.config = { ...this.config, rules: next.rules, envoy: next.envoy }
    this.log.info('rules reloaded', {
      rules: after.length,
      changed: after.filter(r => before.has(r.name) && before.get(r.name) !== r.hash).map(r => r.name),
      added: after.filter(r => !before.has(r.name)).map(r => r.name),
      removed: [...before.keys()].filter(n => !after.some(r => r.name === n))
    })
  }

  async stop (): Promise<void> {
    if (this.state === 'stopping' || this.state === 'stopped') return
    this.state = 'stopping'
    this.log.info('stopping')
    // A renewal under way finishes first (it stops the old cluster layer and starts the next): then the next one stops.
    await this.renewing?.catch(() => {})
    try {
      // The HTTP listener goes last: while the node stops, /readyz says so and /healthz still answers.
      await Promise.all([this.server.stop(), this.rls?.stop()])
      await this.cluster?.stop()
      await this.quota.store?.close(this.clock.mono())
      this.quota.stop()
      await this.http?.stop()
    } finally {
      await this.lock.release()
    }
    this.state = 'stopped'
    this.log.info('stopped')
  }
}
