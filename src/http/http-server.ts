/**
 * The optional HTTP listener: `/metrics` (Prometheus text), `/status` (the
 * node's status as JSON, what `quotactl top` reads from another host), `/healthz` (200
 * while the process runs) and `/readyz` (200 once the node serves its socket
 * and agrees with every peer it can reach on every rule and on the cluster;
 * else 503 with the reason). Off unless configured (`nodes[].http`,
 * `--http`, `QUOTAD_HTTP`); it binds where it is told, loopback in the
 * examples. It answers nothing else (404), reads no request bodies, and
 * never blocks the decision path: scrapes read counters (metrics.ts).
 */
import http from 'node:http'
import { ErrorCodes, QuotadError } from '../errors.js'
import { agreement, type Metrics, type MetricSources } from './metrics.js'

export interface HttpOptions {
  /** host:port, e.g. 127.0.0.1:9464 (port 0: any). */
  address: string
  metrics: Metrics
  sources: MetricSources
  /** The node's `status` (what the socket's status op returns), for /status. */
  status: () => Record<string, unknown>
}

/** host:port -> [host, port]; IPv6 hosts in brackets. */
export function parseHostPort (address: string): [string, number] {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(address)
  const port = m === null ? NaN : Number(m[3])
  if (m === null || port > 65_535) throw new QuotadError(ErrorCodes.CONFIG_INVALID, `http address must be HOST:PORT (e.g. 127.0.0.1:9464), got ${JSON.stringify(address)}`)
  return [m[1] ?? m[2], port]
}

export class HttpServer {
  private readonly o: HttpOptions
  private server: http.Server | null = null

  constructor (o: HttpOptions) {
    this.o = o
  }

  /** The bound address (after start). */
  get address (): string {
    const a = this.server?.address()
    if (a === null || a === undefined || typeof a === 'string') return ''
    return a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`
  }

  async start (): Promise<void> {
    const [host, port] = parseHostPort(this.o.address)
    const server = http.createServer((req, res) => { void this.handle(req, res) })
    server.headersTimeout = 5000
    server.requestTimeout = 10_000
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE'
        // Another process holds the port: the file is fine, the machine is not.
        ? new QuotadError(ErrorCodes.HTTP_IN_USE, `cannot listen for HTTP on ${this.o.address}: the port is in use by another process (choose another --http or nodes[].http, or stop that process)`, { errno: err.code })
        : new QuotadError(ErrorCodes.CONFIG_INVALID, `cannot listen for HTTP on ${this.o.address}: ${err.message}`, { errno: err.code })))
      server.listen(port, host, () => resolve())
    })
    this.server = server
  }

  async stop (): Promise<void> {
    const s = this.server
    this.server = null
    if (s === null) return
    s.closeAllConnections()
    await new Promise<void>(resolve => s.close(() => resolve()))
  }

  /** Why the node is not ready, or null. */
  notReady (): string | null {
    const { server, cluster } = this.o.sources
    if (!server.stats().listening) return 'the socket is not serving'
    if (cluster !== null) {
      if (cluster.core.phase !== 'running') return `stopping (${cluster.core.phase})`
      const now = this.o.sources.now()
      const fence = cluster.core.fence
      if (fence.skewed) return `fenced: the clock is ${Math.round(fence.skewOffsetMs)} ms off from a quorum of seeds (more than maxClockSkewMs ${cluster.core.tuning.maxClockSkewMs})`
      const differs = [...cluster.core.peers.all()].filter(p => cluster.core.peers.isAlive(p, now) && !p.sameCluster).map(p => p.name)
      if (differs.length > 0) return `peers with another cluster configuration (seeds, pinned ids or timings): ${differs.join(', ')}`
      const rules = [...agreement(this.o.sources)].filter(([, ok]) => !ok).map(([r]) => r)
      if (rules.length > 0) return `rules not agreed with every reachable peer: ${rules.join(', ')}`
    }
    return null
  }

  private async handle (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = (req.url ?? '/').split('?')[0]
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n')
    if (url === '/healthz') return send(res, 200, 'ok\n')
    if (url === '/readyz') {
      const why = this.notReady()
      return why === null ? send(res, 200, 'ready\n') : send(res, 503, `not ready: ${why}\n`)
    }
    if (url === '/status') {
      // What `quotactl status --json` prints, for `quotactl top` on another host (top.ts).
      return send(res, 200, JSON.stringify(this.o.status()) + '\n', 'application/json')
    }
    if (url === '/metrics') {
      try {
        const body = await this.o.metrics.registry.metrics()
        return send(res, 200, body, this.o.metrics.registry.contentType)
      } catch (err) {
        return send(res, 500, `metrics failed: ${(err as Error).message}\n`)
      }
    }
    return send(res, 404, 'not found: try /metrics, /status, /healthz or /readyz\n')
  }
}

function send (res: http.ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' })
  res.end(body)
}
