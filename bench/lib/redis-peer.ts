/**
 * The peer: what users would otherwise pick. A local `redis-server` child
 * process on a Unix socket in a temp dir, and rate-limiter-flexible's
 * RateLimiterRedis over ioredis connected to that socket.
 *
 * The server is started with persistence off (`--save '' --appendonly no`)
 * and TCP off (`--port 0`), and stopped by pid. If `redis-server` is not on
 * PATH it is installed from Debian's packages (apt-get install, with one
 * apt-get update and retry if the install fails).
 *
 * A `PeerConfig` is one way an app could wire the peer; the bench measures
 * several and uses the fastest, so the comparison is fair to the peer.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'

function which (cmd: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' })
  const p = r.stdout?.trim()
  return r.status === 0 && p !== undefined && p !== '' ? p : null
}

function apt (args: string[]): boolean {
  process.stdout.write(`# apt-get ${args.join(' ')}\n`)
  const r = spawnSync('apt-get', args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  })
  return r.status === 0
}

/** The path of redis-server, installing the Debian package if needed. */
export function ensureRedisServer (): string {
  let bin = which('redis-server')
  if (bin !== null) return bin
  process.stdout.write('redis-server is not on PATH; installing the Debian package\n')
  if (!apt(['install', '-y', 'redis-server'])) {
    if (!apt(['update']) || !apt(['install', '-y', 'redis-server'])) {
      throw new Error('could not install redis-server with apt-get; install it by hand and run again')
    }
  }
  bin = which('redis-server')
  if (bin === null) throw new Error('apt-get installed redis-server but it is not on PATH')
  return bin
}

export function redisVersion (bin: string): string {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  const m = /v=([0-9.]+)/.exec(r.stdout ?? '')
  return m !== null ? m[1] : (r.stdout ?? '').trim()
}

export class RedisServer {
  readonly socketPath: string
  readonly pid: number
  readonly version: string
  private readonly child: ChildProcess
  private exited = false

  private constructor (child: ChildProcess, socketPath: string, version: string) {
    this.child = child
    this.pid = child.pid as number
    this.socketPath = socketPath
    this.version = version
    child.once('exit', () => { this.exited = true })
  }

  /** Start redis-server in `dir` and wait until it answers PING. */
  static async start (bin: string, dir: string): Promise<RedisServer> {
    const socketPath = path.join(dir, 'redis.sock')
    const child = spawn(bin, [
      '--port', '0',
      '--unixsocket', socketPath,
      '--unixsocketperm', '700',
      '--save', '',
      '--appendonly', 'no',
      '--dir', dir,
      '--daemonize', 'no'
    ], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr?.on('data', (b: Buffer) => { stderr = (stderr + b.toString()).slice(-4000) })
    if (child.pid === undefined) throw new Error(`could not start ${bin}`)
    const server = new RedisServer(child, socketPath, redisVersion(bin))
    const deadline = Date.now() + 10_000
    while (true) {
      if (server.exited) throw new Error(`redis-server exited at start:\n${stderr}`)
      const c = new Redis({ path: socketPath, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      c.on('error', () => {})
      try {
        await c.connect()
        if (await c.ping() === 'PONG') { c.disconnect(); return server }
      } catch {
        // not up yet
      }
      c.disconnect()
      if (Date.now() > deadline) {
        await server.stop()
        throw new Error(`redis-server did not accept on ${socketPath} within 10 s:\n${stderr}`)
      }
      await sleep(50)
    }
  }

  /** SIGTERM by pid; SIGKILL if it is still there after 5 s. */
  async stop (): Promise<void> {
    if (this.exited) return
    const exited = once(this.child, 'exit')
    process.kill(this.pid, 'SIGTERM')
    const timer = setTimeout(() => { if (!this.exited) process.kill(this.pid, 'SIGKILL') }, 5000)
    await exited
    clearTimeout(timer)
  }
}

export interface PeerConfig {
  name: string
  /** ioredis connections; worker w uses connection w % connections. */
  connections: number
  enableAutoPipelining: boolean
}

export const PEER_CONFIGS: readonly PeerConfig[] = [
  { name: '1 conn', connections: 1, enableAutoPipelining: false },
  { name: '1 conn + autopipelining', connections: 1, enableAutoPipelining: true },
  { name: '4 conns', connections: 4, enableAutoPipelining: false },
  { name: '4 conns + autopipelining', connections: 4, enableAutoPipelining: true }
]

export function describePeer (c: PeerConfig): string {
  return `RateLimiterRedis over ioredis, ${c.connections} connection${c.connections === 1 ? '' : 's'} on the Unix socket, ` +
    `enableAutoPipelining ${String(c.enableAutoPipelining)}`
}

/** Limiter parameters mirroring a quotad rule: `points` per `durationSec`, fixed window. */
export interface PeerRule {
  keyPrefix: string
  points: number
  durationSec: number
}

/** An app's view of the peer: consume(key) on one of its connections. */
export class Peer {
  readonly config: PeerConfig
  private readonly clients: Redis[]
  /** limiters[rule][connection] */
  private readonly limiters: RateLimiterRedis[][]

  private constructor (config: PeerConfig, clients: Redis[], rules: readonly PeerRule[]) {
    this.config = config
    this.clients = clients
    this.limiters = rules.map(r => clients.map(storeClient => new RateLimiterRedis({
      storeClient,
      points: r.points,
      duration: r.durationSec,
      keyPrefix: r.keyPrefix
    })))
  }

  static async connect (socketPath: string, config: PeerConfig, rules: readonly PeerRule[]): Promise<Peer> {
    const clients: Redis[] = []
    for (let i = 0; i < config.connections; i++) {
      const c = new Redis({ path: socketPath, enableAutoPipelining: config.enableAutoPipelining, lazyConnect: true })
      await c.connect()
      clients.push(c)
    }
    return new Peer(config, clients, rules)
  }

  /** Consume 1 point of `key` under rule `rule` on worker `w`'s connection. Resolves 1 if denied, 0 if allowed. */
  consume (rule: number, key: string, w: number): Promise<number> {
    const lim = this.limiters[rule][w % this.clients.length]
    return lim.consume(key, 1).then(allowed, deniedOrThrow)
  }

  /** Flush the peer's keys so a run starts from nothing. */
  async flush (): Promise<void> {
    await this.clients[0].flushall()
  }

  async close (): Promise<void> {
    await Promise.all(this.clients.map(c => c.quit().catch(() => c.disconnect())))
  }
}

function allowed (): number { return 0 }

function deniedOrThrow (err: unknown): number {
  // rate-limiter-flexible rejects with a RateLimiterRes when the key is over its limit.
  if (err instanceof RateLimiterRes) return 1
  throw err
}
