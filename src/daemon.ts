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
 */
import { makeDirs } from './util/make-dirs.js'
import { ErrorCodes, QuotadError } from './errors.js'
import { systemClock, type Clock } from './clock.js'
import type { ClusterConfig, NodeConfig } from './config/types.js'
import { findNode } from './config/validate.js'
import { LocalQuota } from './node/local-quota.js'
import { LoneStore } from './node/lone-store.js'
import { UnixServer } from './server/unix-server.js'
import { ClusterNode } from './cluster/cluster-node.js'
import { createLogger, type Logger } from './util/log.js'
import { DataLock } from './node/data-lock.js'
import { HttpServer } from './http/http-server.js'
import { Metrics } from './http/metrics.js'
import { RlsServer } from './envoy/rls-server.js'

export interface DaemonOptions {
  config: ClusterConfig
  /** Which of the cluster file's nodes this process is. */
  node: string
  /** @default systemClock */
  clock?: Clock
  /** @default JSON lines on stderr at info */
  logger?: Logger
  /**
   * A quorum of seeds attests this incarnation dead (reclaim.ts): what it
   * held is credited to its peers, and it must come back as a new
   * incarnation. The CLI stops the daemon and exits with ExitCodes.RESTART
   * for its supervisor to start it again.
   */
  onReclaimed?: () => void
}

export class Daemon {
  readonly node: NodeConfig
  readonly quota: LocalQuota
  readonly server: UnixServer
  readonly cluster: ClusterNode | null
  /** The metrics and health listener (nodes[].http / --http), if configured. */
  readonly http: HttpServer | null
  /** Envoy's Rate Limit Service over gRPC (nodes[].grpc / --grpc), if configured. */
  readonly rls: RlsServer | null
  private config: ClusterConfig
  private readonly log: Logger
  private state: 'new' | 'running' | 'stopping' | 'stopped' = 'new'

  private readonly lock: DataLock
  private readonly clock: Clock

  private constructor (opts: DaemonOptions, node: NodeConfig, log: Logger, cluster: ClusterNode | null, lock: DataLock) {
    this.lock = lock
    this.config = opts.config
    this.node = node
    this.log = log
    this.cluster = cluster
    const clock = this.clock = opts.clock ?? systemClock
    this.quota = new LocalQuota({
      node: this.node.name,
      seeds: opts.config.nodes.map(n => n.name),
      rules: opts.config.rules,
      limits: opts.config.limits,
      clock,
      cluster: cluster === null
        ? undefined
        : { decider: cluster.core, limiter: cluster.core.limiter, status: () => cluster.status(), urgent: () => cluster.tickSoon(), forward: (k, n, w, here) => cluster.forward(k, n, w, here), elsewhere: k => cluster.core.forwarding.decidesAtSeeds(k) }
    })
    this.server = new UnixServer({
      path: this.node.socket,
      socketMode: this.node.socketMode,
      limits: opts.config.limits,
      service: this.quota
    })
    this.rls = node.grpc === undefined
      ? null
      : new RlsServer({ address: node.grpc, socketMode: node.socketMode, envoy: opts.config.envoy, service: this.quota, limits: opts.config.limits, clock, log: log.child('envoy') })
    if (node.http === undefined) {
      this.http = null
    } else {
      const sources = { limiter: this.quota.limiter, server: this.server, cluster, now: () => clock.mono() }
      const metrics = new Metrics(sources)
      this.quota.timing = metrics
      this.http = new HttpServer({ address: node.http, metrics, sources, status: () => this.quota.status() })
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
      const cluster = opts.config.nodes.length > 1
        ? await ClusterNode.create({
          config: opts.config, node, clock: opts.clock ?? systemClock, log: log.child('cluster'),
          onTokens: () => ref.d?.quota.kick(),
          acquire: (k, n, w, here) => ref.d?.quota.acquire(k, n, Math.min(w, opts.config.limits.maxWaitMs), here),
          onReclaimed: () => opts.onReclaimed?.()
        })
        : null
      const d = ref.d = new Daemon(opts, node, log, cluster, lock)
      await d.run()
      return d
    } catch (err) {
      await lock.release()
      throw err
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
