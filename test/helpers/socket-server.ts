/**
 * Socket-test helpers shared by the server tests: a fake QuotaService, a raw
 * protocol client that can send any bytes, and a server in a temp dir that
 * the test tears down.
 */
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { UnixServer, type UnixServerOptions } from '../../src/server/unix-server.js'
import { FrameDecoder, decodeReply, encodeMessage, type Reply } from '@quotad/client/wire'
import { DEFAULT_LIMITS, type LimitsConfig } from '../../src/config/types.js'
import type { AcquireResult, Decision, QuotaService } from '../../src/core/types.js'
import { ErrorCodes, QuotadError } from '../../src/errors.js'

/**
 * Keys: any key has `limit` tokens. `wait:*` keys with waitMs > 0 always
 * queue, and resolve allowed after waitMs. `throw:quotad` / `throw:plain` throw.
 */
export class FakeService implements QuotaService {
  readonly limit = 10
  readonly used = new Map<string, number>()
  readonly cancelled: string[] = []
  readonly timers = new Set<NodeJS.Timeout>()

  acquire (key: string, count: number, waitMs: number): AcquireResult {
    if (key === 'throw:quotad') throw new QuotadError(ErrorCodes.NO_RULE, `no rule matches ${key}`)
    if (key === 'throw:plain') throw new TypeError('kaboom')
    if (key.startsWith('wait:') && waitMs > 0) {
      let timer: NodeJS.Timeout | undefined
      let settle!: (d: Decision) => void
      const promise = new Promise<Decision>(resolve => { settle = resolve })
      timer = setTimeout(() => {
        this.timers.delete(timer!)
        this.spend(key, count)
        settle(this.decision(key, true))
      }, waitMs)
      this.timers.add(timer)
      return {
        waiting: true,
        promise,
        cancel: () => {
          if (timer === undefined) return
          clearTimeout(timer)
          this.timers.delete(timer)
          timer = undefined
          this.cancelled.push(key)
        }
      }
    }
    const used = this.used.get(key) ?? 0
    if (used + count > this.limit) return this.decision(key, false)
    this.spend(key, count)
    return this.decision(key, true)
  }

  peek (key: string, count: number): Decision {
    return this.decision(key, (this.used.get(key) ?? 0) + count <= this.limit)
  }

  status (): Record<string, unknown> {
    return { keys: this.used.size, node: 'fake' }
  }

  private spend (key: string, count: number): void {
    this.used.set(key, (this.used.get(key) ?? 0) + count)
  }

  private decision (key: string, allowed: boolean): Decision {
    const remaining = this.limit - (this.used.get(key) ?? 0)
    return { allowed, remaining, limit: this.limit, resetMs: 1000, retryAfterMs: allowed ? 0 : 500, rule: 'fake' }
  }
}

/** A raw protocol client: send any bytes, read replies in arrival order. */
export class Raw {
  readonly replies: Reply[] = []
  private wake: (() => void) | null = null
  readonly closed: Promise<void>
  private constructor (readonly socket: net.Socket) {
    const decoder = new FrameDecoder({
      onFrame: (b, s, e) => { this.replies.push(decodeReply(b, s, e)); this.wake?.() },
      onFrameTooLarge: () => { throw new Error('reply too large') }
    }, 64 * 1024 * 1024)
    socket.on('data', c => decoder.push(c))
    socket.on('error', () => {})
    this.closed = new Promise(resolve => socket.once('close', () => { this.wake?.(); resolve() }))
  }

  static open (p: string): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const s = net.connect(p)
      s.once('connect', () => resolve(new Raw(s)))
      s.once('error', reject)
    })
  }

  send (...msgs: unknown[]): void {
    this.socket.write(Buffer.concat(msgs.map(m => Buffer.isBuffer(m) ? m : encodeMessage(m))))
  }

  /** Wait until `n` replies arrived in total (or the socket closed). */
  async waitFor (n: number, ms = 5000): Promise<Reply[]> {
    const deadline = Date.now() + ms
    while (this.replies.length < n && !this.socket.destroyed && Date.now() < deadline) {
      await new Promise<void>(resolve => {
        this.wake = resolve
        setTimeout(resolve, 50)
      })
    }
    return this.replies
  }

  async request (msg: Record<string, unknown>): Promise<Reply> {
    const n = this.replies.length
    this.send(msg)
    await this.waitFor(n + 1)
    return this.replies[n]
  }

  destroy (): void {
    this.socket.destroy()
  }
}

export function frameOf (body: Buffer): Buffer {
  const h = Buffer.alloc(4)
  h.writeUInt32BE(body.length)
  return Buffer.concat([h, body])
}

export type Teardown = { teardown: (fn: () => unknown) => void }

export function tmpDir (t: Teardown): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qd-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

export function tmpSocket (t: Teardown): string {
  return path.join(tmpDir(t), 'q.sock')
}

export async function startServer (t: Teardown, opts: Omit<Partial<UnixServerOptions>, 'limits'> & { limits?: Partial<LimitsConfig> } = {}): Promise<{ server: UnixServer, service: FakeService, path: string }> {
  const service = opts.service as FakeService | undefined ?? new FakeService()
  const p = opts.path ?? tmpSocket(t)
  const server = new UnixServer({ ...opts, path: p, service, limits: { ...DEFAULT_LIMITS, ...opts.limits } })
  await server.start()
  t.teardown(async () => {
    await server.stop()
    for (const timer of service.timers) clearTimeout(timer)
  })
  return { server, service, path: p }
}

export async function until (cond: () => boolean, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!cond() && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 10))
  return cond()
}

export function errCode (r: Reply): string | undefined {
  return r.ok ? undefined : r.error.code
}
