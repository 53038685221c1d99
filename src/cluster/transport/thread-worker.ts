/**
 * The worker-thread side of thread-transport.ts: it runs the libp2p
 * transport (libp2p-transport.ts, unchanged) and relays its calls, handlers,
 * events and counters over the thread's port. Everything libp2p does per
 * message (pnet and noise decryption, yamux, gossipsub's protobuf decoding
 * and signature checks, heartbeats) runs here, off the daemon's event loop.
 *
 * Messages in: `options` (first and only then, to a thread warmed before its options were known), start, stop, publish, request, call, dial (each with an `id`, answered
 * by `done` or `fail`), and `reply` / `replyFail` to a relayed inbound request.
 * Messages out: `created`, `gossips` (a batch of [from, data]), `peer`, `event`, `req` (`creq` for a
 * call), `stats`, and the
 * answers. Errors cross as { code, message } (QuotadError's), rebuilt there.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { createTransport } from './libp2p-transport.js'
import { niceThisThread } from './thread-nice.js'
import type { TransportOptions } from './types.js'

/** How often the counters and the connected peers are sent over (the main side's `stats()` is synchronous). */
const STATS_EVERY_MS = 200
/** Gossip received within this long goes over as one port message (a gossip interval is 250 ms). */
const GOSSIP_BATCH_MS = 10

interface Failure { code: string, message: string }

function failure (err: unknown): Failure {
  const e = err as { code?: unknown, message?: unknown }
  return { code: typeof e?.code === 'string' ? e.code : 'E_INTERNAL', message: typeof e?.message === 'string' ? e.message : String(err) }
}

/** Event fields as the port can carry them (an unclonable value becomes its string). */
function cloneable (fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(fields)) {
    out[k] = v === null || ['string', 'number', 'boolean', 'undefined'].includes(typeof v) || Array.isArray(v) ? v : v instanceof Error ? v.message : String(v)
  }
  return out
}

async function main (): Promise<void> {
  const port = parentPort
  if (port === null) throw new Error('thread-worker.js runs only as a worker thread')
  // Warmed (thread-transport.ts warmTransportThread): libp2p loaded while the daemon found its options, sent now.
  const given = (workerData as Omit<TransportOptions, 'onEvent'> | null) ?? await new Promise<Omit<TransportOptions, 'onEvent'>>(resolve => {
    port.once('message', (m: { t: string, opts: Omit<TransportOptions, 'onEvent'> }) => { resolve(m.opts) })
  })
  const { threadNice, ...opts } = given
  // Before libp2p starts, so the threads it may start inherit the value too.
  // Said only when asked for (cluster.transportNice above 0): what was set, or why nothing was.
  if ((threadNice ?? 0) > 0) port.postMessage({ t: 'event', name: 'thread-nice', fields: cloneable(niceThisThread(threadNice ?? 0)) })
  let t
  try {
    t = await createTransport({ ...opts, onEvent: (name, fields) => port.postMessage({ t: 'event', name, fields: cloneable(fields) }) })
  } catch (err) {
    port.postMessage({ t: 'created', error: failure(err) })
    return
  }
  const tr = t
  let nextReq = 0
  const waiting = new Map<number, { resolve: (b: Uint8Array) => void, reject: (e: Error) => void }>()
  // Gossip goes over in batches, at most one port message per GOSSIP_BATCH_MS: each port message wakes the
  // event loop that answers the socket, and at 200 nodes a seed hears hundreds of gossips a second.
  let batch: Array<[string, Uint8Array]> = []
  let flush: NodeJS.Timeout | null = null
  tr.onGossip = (from, data) => {
    batch.push([from, data])
    flush ??= setTimeout(() => {
      flush = null
      const b = batch
      batch = []
      port.postMessage({ t: 'gossips', batch: b })
    }, GOSSIP_BATCH_MS)
  }
  tr.onPeer = (peerId, connected) => port.postMessage({ t: 'peer', peerId, connected, host: connected ? tr.hostOf(peerId) : undefined })
  tr.onRequest = async (from, data) => await new Promise<Uint8Array>((resolve, reject) => {
    const id = ++nextReq
    waiting.set(id, { resolve, reject })
    port.postMessage({ t: 'req', id, from, data })
  })
  tr.onCall = async (from, data) => await new Promise<Uint8Array>((resolve, reject) => {
    const id = ++nextReq
    waiting.set(id, { resolve, reject })
    port.postMessage({ t: 'creq', id, from, data })
  })
  const sendStats = (): void => port.postMessage({ t: 'stats', stats: tr.stats(), peers: tr.connectedPeers().map(id => [id, tr.hostOf(id) ?? '']) })
  const timer = setInterval(sendStats, STATS_EVERY_MS)
  const answer = (id: number, run: () => Promise<unknown>): void => {
    run().then(value => port.postMessage({ t: 'done', id, value }), err => port.postMessage({ t: 'fail', id, error: failure(err) }))
  }
  port.on('message', (m: { t: string, id: number, data?: Uint8Array, topic?: string, peerId?: string, timeoutMs?: number, addr?: string, message?: string }) => {
    switch (m.t) {
      case 'start': answer(m.id, async () => { await tr.start(); return tr.listenAddrs }); break
      case 'stop': answer(m.id, async () => { clearInterval(timer); await tr.stop(); return tr.stats() }); break
      case 'publish': answer(m.id, async () => await tr.publish(m.data as Uint8Array, m.topic)); break
      case 'request': answer(m.id, async () => await tr.request(m.peerId as string, m.data as Uint8Array, m.timeoutMs as number)); break
      case 'call': answer(m.id, async () => await tr.call(m.peerId as string, m.data as Uint8Array, m.timeoutMs as number)); break
      case 'dial': answer(m.id, async () => { await tr.dial(m.addr as string) }); break
      case 'reply': waiting.get(m.id)?.resolve(m.data as Uint8Array); waiting.delete(m.id); break
      case 'replyFail': waiting.get(m.id)?.reject(new Error(m.message)); waiting.delete(m.id); break
    }
  })
  port.postMessage({ t: 'created', peerId: tr.peerId })
}

main().catch(err => { parentPort?.postMessage({ t: 'created', error: failure(err) }) })
