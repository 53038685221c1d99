/**
 * The cluster transport with libp2p in a worker thread (issue 13: decisions
 * stay fast while the node works for the cluster). The daemon's default.
 *
 * Why: every gossip a node receives costs libp2p work before quotad sees
 * its bytes (pnet and noise decryption, yamux, protobuf, an Ed25519
 * signature check, gossipsub's books): ~100-200 µs a message here. At 200
 * nodes that is ~800 messages a second, and on the event loop that also
 * answers the socket a decision waited behind it: with that gossip the p99
 * of a c=1 acquire was 2-9x a lone daemon's (bench/latency.ts). In a worker
 * thread it runs beside the loop; the loop gets the gossips' bytes,
 * already checked, in port messages of what came in 10 ms (each port
 * message wakes the loop: at 800 gossips a second one each was the p99 of
 * an acquire at 1.2-1.4x a lone daemon's, batched 1.0-1.14x).
 *
 * Same interface and behaviour as libp2p-transport.ts, which the worker
 * (thread-worker.ts) runs unchanged. What differs: `stats()` and
 * `connectedPeers()` are as of the worker's last report (every 200 ms, and
 * at stop), since they must answer synchronously; and an inbound request
 * crosses the port twice more (tens of µs).
 */
import { Worker } from 'node:worker_threads'
import { ErrorCodes, QuotadError, type ErrorCode } from '../../errors.js'
import { emitTransportEvent } from './events.js'
import type { Transport, TransportOptions } from './types.js'

interface Failure { code: string, message: string }

function rebuild (f: Failure): QuotadError {
  return new QuotadError(f.code as ErrorCode, f.message)
}

const WORKER = new URL('./thread-worker.js', import.meta.url)

/**
 * A transport thread started before its options are known (`warmTransportThread`), loading libp2p; the next
 * `createTransport` takes it. Null when none waits (none was warmed, it was taken, or it ended).
 */
let warm: Worker | null = null
/** A transport was made in this process. */
let made = false

/**
 * Start the transport thread now, before the daemon knows its options: the thread spends most of a node's start
 * loading libp2p's modules (~0.8 s of a member's ~1.6 s from process start to socket on an idle 2-core machine,
 * bench/member-flood.ts), and warmed it does that beside the main thread loading the daemon and validating the
 * cluster file, instead of after. It does nothing else until `createTransport` sends it the options. Unused, it
 * holds the process open for nothing (unref) and an error in it only means the next createTransport starts
 * a thread of its own.
 */
export function warmTransportThread (): void {
  // Too late once a transport was made: a thread warmed now would only load libp2p again for nothing.
  if (warm !== null || made) return
  const w = new Worker(WORKER, { workerData: null })
  w.unref()
  const gone = (): void => { if (warm === w) warm = null }
  w.once('error', gone)
  w.once('exit', gone)
  warm = w
}

export async function createTransport (opts: TransportOptions): Promise<Transport> {
  const { onEvent, ...data } = opts
  const w = warm
  warm = null
  made = true
  let worker: Worker
  if (w === null) {
    worker = new Worker(WORKER, { workerData: data })
  } else {
    worker = w
    worker.ref()
    worker.postMessage({ t: 'options', opts: data })
  }
  const t = new ThreadTransport(worker, onEvent)
  await t.created
  return t
}

export class ThreadTransport implements Transport {
  onGossip: Transport['onGossip'] = () => {}
  onRequest: Transport['onRequest'] = () => { throw new Error('no request handler') }
  onCall: Transport['onCall'] = () => { throw new Error('no call handler') }
  onPeer: Transport['onPeer'] = () => {}
  peerId = ''
  listenAddrs: string[] = []
  readonly created: Promise<void>

  private readonly worker: Worker
  private readonly onEvent: TransportOptions['onEvent']
  private nextId = 0
  private readonly calls = new Map<number, { resolve: (v: unknown) => void, reject: (e: Error) => void }>()
  private lastStats: Record<string, number> = {}
  /** Connected peer id -> its remote address, as of the worker's last report or peer event. */
  private peers = new Map<string, string>()
  /** Handler failures on this side of the port (the worker counts its own). */
  private handlerErrors = 0
  private state: 'new' | 'started' | 'stopped' = 'new'
  private exited: Error | null = null

  constructor (worker: Worker, onEvent: TransportOptions['onEvent']) {
    this.worker = worker
    this.onEvent = onEvent
    this.created = new Promise((resolve, reject) => {
      worker.on('message', (m: Record<string, unknown>) => {
        if (m.t === 'created') {
          if (m.error !== undefined) { reject(rebuild(m.error as Failure)); void worker.terminate() } else { this.peerId = m.peerId as string; resolve() }
          return
        }
        this.onMessage(m)
      })
      worker.once('error', err => { this.gone(err); reject(err) })
      worker.once('exit', code => { this.gone(new Error(`transport thread exited with code ${code}`)); reject(this.exited) })
    })
  }

  private gone (err: Error): void {
    if (this.exited === null && this.state === 'started') emitTransportEvent(this.onEvent, 'thread-exited', { error: err.message })
    this.exited ??= err
    for (const c of this.calls.values()) c.reject(new QuotadError(ErrorCodes.SHUTTING_DOWN, err.message))
    this.calls.clear()
  }

  private onMessage (m: Record<string, unknown>): void {
    switch (m.t) {
      case 'gossips': for (const [from, data] of m.batch as Array<[string, Uint8Array]>) this.handle(() => { this.onGossip(from, data) }); break
      case 'peer':
        // Before the handler: a seed admits members only from peers connected here (cluster/membership.ts).
        if (m.connected === true) this.peers.set(m.peerId as string, (m.host as string | undefined) ?? '')
        else this.peers.delete(m.peerId as string)
        this.handle(() => { this.onPeer(m.peerId as string, m.connected as boolean) })
        break
      case 'event': emitTransportEvent(this.onEvent, m.name as string, m.fields as Record<string, unknown>); break
      case 'stats': this.lastStats = m.stats as Record<string, number>; this.peers = new Map(m.peers as Array<[string, string]>); break
      case 'req': void this.serve(m.id as number, m.from as string, m.data as Uint8Array, this.onRequest); break
      case 'creq': void this.serve(m.id as number, m.from as string, m.data as Uint8Array, this.onCall); break
      case 'done': case 'fail': {
        const c = this.calls.get(m.id as number)
        this.calls.delete(m.id as number)
        if (m.t === 'done') c?.resolve(m.value)
        else c?.reject(rebuild(m.error as Failure))
      }
    }
  }

  private handle (fn: () => void): void {
    try { fn() } catch { this.handlerErrors++ }
  }

  private async serve (id: number, from: string, data: Uint8Array, handler: Transport['onRequest']): Promise<void> {
    try {
      const reply = await handler(from, data)
      this.worker.postMessage({ t: 'reply', id, data: reply })
    } catch (err) {
      // The worker counts it as a handler error and resets the stream, as in-thread.
      this.worker.postMessage({ t: 'replyFail', id, message: (err as Error)?.message ?? String(err) })
    }
  }

  private async ask<T> (msg: Record<string, unknown>): Promise<T> {
    if (this.exited !== null) throw new QuotadError(ErrorCodes.SHUTTING_DOWN, this.exited.message)
    const id = ++this.nextId
    return await new Promise<T>((resolve, reject) => {
      this.calls.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.worker.postMessage({ ...msg, id })
    })
  }

  async start (): Promise<void> {
    if (this.state !== 'new') throw new QuotadError(ErrorCodes.INTERNAL, `transport cannot start: it is ${this.state}`)
    this.state = 'started'
    try {
      this.listenAddrs = await this.ask<string[]>({ t: 'start' })
    } catch (err) {
      this.state = 'stopped'
      await this.worker.terminate()
      throw err
    }
  }

  async stop (): Promise<void> {
    if (this.state === 'stopped') return
    this.state = 'stopped'
    try {
      this.lastStats = await this.ask<Record<string, number>>({ t: 'stop' })
    } catch {
      // already gone: nothing to stop
    }
    this.peers = new Map()
    await this.worker.terminate()
  }

  async publish (data: Uint8Array, topic?: string): Promise<number> {
    this.assertStarted()
    return await this.ask<number>({ t: 'publish', data, ...(topic === undefined ? {} : { topic }) })
  }

  async request (peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    this.assertStarted()
    return await this.ask<Uint8Array>({ t: 'request', peerId, data, timeoutMs })
  }

  async call (peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    this.assertStarted()
    return await this.ask<Uint8Array>({ t: 'call', peerId, data, timeoutMs })
  }

  async dial (addr: string): Promise<void> {
    this.assertStarted()
    await this.ask<undefined>({ t: 'dial', addr })
  }

  connectedPeers (): string[] {
    return [...this.peers.keys()]
  }

  hostOf (peerId: string): string | undefined {
    return this.peers.get(peerId)
  }

  stats (): Record<string, number> {
    const s: Record<string, number> = { ...this.lastStats, peers: this.state === 'started' ? this.peers.size : 0 }
    if (this.handlerErrors > 0) s.handlerErrors = (s.handlerErrors ?? 0) + this.handlerErrors
    return s
  }

  private assertStarted (): void {
    if (this.state !== 'started') {
      throw new QuotadError(ErrorCodes.SHUTTING_DOWN, `transport is ${this.state === 'new' ? 'not started' : 'stopped'}`)
    }
  }
}
