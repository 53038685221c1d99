/**
 * The composition root: the one place that builds a quotad node's components
 * and starts and stops them in order. CLI entry points stay thin and call
 * this; tests call it directly to run real nodes in-process.
 *
 * Start order: data dir -> decision service -> Unix socket.
 * Stop order is the reverse: the socket stops taking work first (in-flight
 * waiters are answered), then the service's timers stop.
 */
import { mkdir } from 'node:fs/promises'
import { systemClock, type Clock } from './clock.js'
import type { ClusterConfig, NodeConfig } from './config/types.js'
import { findNode } from './config/validate.js'
import { LocalQuota } from './node/local-quota.js'
import { UnixServer } from './server/unix-server.js'
import { createLogger, type Logger } from './util/log.js'

export interface DaemonOptions {
  config: ClusterConfig
  /** Which of the cluster file's nodes this process is. */
  node: string
  /** @default systemClock */
  clock?: Clock
  /** @default JSON lines on stderr at info */
  logger?: Logger
}

export class Daemon {
  readonly node: NodeConfig
  readonly quota: LocalQuota
  readonly server: UnixServer
  private config: ClusterConfig
  private readonly log: Logger
  private state: 'new' | 'running' | 'stopping' | 'stopped' = 'new'

  private constructor (opts: DaemonOptions) {
    this.config = opts.config
    this.node = findNode(opts.config, opts.node)
    this.log = opts.logger ?? createLogger({ base: { node: this.node.name } })
    const clock = opts.clock ?? systemClock
    this.quota = new LocalQuota({
      node: this.node.name,
      seeds: opts.config.nodes.map(n => n.name),
      rules: opts.config.rules,
      limits: opts.config.limits,
      clock
    })
    this.server = new UnixServer({
      path: this.node.socket,
      socketMode: this.node.socketMode,
      limits: opts.config.limits,
      service: this.quota
    })
  }

  /** Build and start a node. Rejects (with a QuotadError code) if it cannot serve. */
  static async start (opts: DaemonOptions): Promise<Daemon> {
    const d = new Daemon(opts)
    await d.run()
    return d
  }

  private async run (): Promise<void> {
    await mkdir(this.node.dataDir, { recursive: true, mode: 0o700 })
    this.quota.start()
    try {
      await this.server.start()
    } catch (err) {
      this.quota.stop()
      throw err
    }
    this.state = 'running'
    this.log.info('serving', {
      socket: this.node.socket,
      socketMode: '0' + this.node.socketMode.toString(8),
      rules: this.config.rules.map(r => r.name),
      seeds: this.config.nodes.length
    })
  }

  /**
   * Apply a new cluster file's rules (SIGHUP). The caller has validated it;
   * a file that fails validation never reaches here, so the old rules stay.
   */
  reload (next: ClusterConfig): void {
    const mine = findNode(next, this.node.name)
    if (mine.socket !== this.node.socket || mine.listen !== this.node.listen || mine.dataDir !== this.node.dataDir) {
      this.log.warn('reload applies rules and limits of rules only; socket, listen and dataDir changes need a restart')
    }
    const before = new Map(this.quota.limiter.rules.map(r => [r.name, r.hash]))
    this.quota.setRules(next.rules)
    const after = this.quota.limiter.rules
    this.config = { ...this.config, rules: next.rules }
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
    await this.server.stop()
    this.quota.stop()
    this.state = 'stopped'
    this.log.info('stopped')
  }
}
