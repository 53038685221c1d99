/**
 * Incoming gossip, applied in bounded slices (issue 13: decisions stay fast
 * while the node works for the cluster).
 *
 * The transport hands over each gossip inside libp2p's own callback, which
 * already ran the message's signature check and decoding; several messages
 * that came in one TCP read are handed over in one macrotask. Decoding and
 * applying them there too (msgpack, validation, the core's intake) made
 * that macrotask longer, and a socket read that arrived meanwhile waited
 * for all of it. Here the callback only queues the bytes; they are applied
 * on `setImmediate`, at most `sliceMs` of them at a time, so the event loop
 * polls the sockets between slices. Order is kept, and nothing is applied
 * twice. A gossip is a periodic restatement: if the queue ever holds
 * `maxQueued` (the loop fell far behind), the oldest is dropped and counted,
 * as a lost message would be.
 */
import { performance } from 'node:perf_hooks'

export interface GossipInboxOptions {
  /** Apply one gossip (decode, validate, hand to the core). Must not throw. */
  apply: (from: string, data: Uint8Array) => void
  /** Most time one slice may take before yielding to the event loop. @default 1 */
  sliceMs?: number
  /** Most messages waiting; beyond, the oldest is dropped. @default 4096 */
  maxQueued?: number
}

export class GossipInbox {
  private readonly apply: GossipInboxOptions['apply']
  private readonly sliceMs: number
  private readonly maxQueued: number
  private from: string[] = []
  private data: Uint8Array[] = []
  private head = 0
  private scheduled = false
  private closed = false
  /** Messages dropped because the queue was full. */
  dropped = 0
  /** Slices run, and the largest number of messages waiting at once (status). */
  slices = 0
  maxDepth = 0

  constructor (o: GossipInboxOptions) {
    this.apply = o.apply
    this.sliceMs = o.sliceMs ?? 1
    this.maxQueued = o.maxQueued ?? 4096
  }

  get depth (): number { return this.from.length - this.head }

  /** For status: waiting now, most ever waiting, slices run, dropped. */
  stats (): Record<string, number> {
    return { waiting: this.depth, maxWaiting: this.maxDepth, slices: this.slices, dropped: this.dropped }
  }

  push (from: string, data: Uint8Array): void {
    if (this.closed) return
    if (this.depth >= this.maxQueued) { this.head++; this.dropped++ }
    this.from.push(from)
    this.data.push(data)
    if (this.depth > this.maxDepth) this.maxDepth = this.depth
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => this.drain())
    }
  }

  /** Drop what waits and take no more (the node is stopping). */
  close (): void {
    this.closed = true
    this.from = []
    this.data = []
    this.head = 0
  }

  private drain (): void {
    this.scheduled = false
    if (this.closed) return
    this.slices++
    const end = performance.now() + this.sliceMs
    // At least one per slice, so a slow message can't stall the queue.
    do {
      const i = this.head++
      const from = this.from[i]
      const data = this.data[i]
      this.apply(from, data)
    } while (this.head < this.from.length && performance.now() < end)
    if (this.head >= this.from.length) {
      this.from = []
      this.data = []
      this.head = 0
      return
    }
    // Compact now and then, so a queue that never empties does not grow.
    if (this.head > 1024) {
      this.from = this.from.slice(this.head)
      this.data = this.data.slice(this.head)
      this.head = 0
    }
    this.scheduled = true
    setImmediate(() => this.drain())
  }
}
