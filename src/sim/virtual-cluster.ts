/**
 * A virtual cluster: N ClusterCores (the production state machine) joined by
 * a virtual network with seeded latency, loss and duplication, on virtual
 * time. Messages are delivered in time order from a queue; requests get
 * their replies (or a failure) back through the same network. Partitions are
 * a set of cut (from, to) pairs.
 *
 * Every message is encoded and decoded with msgpack and validated exactly as
 * the daemon does, so the simulator also exercises the wire format.
 */
import { Packr } from 'msgpackr'
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import { ClusterCore, type Outbound } from '../cluster/cluster-core.js'
import { parseMessage, type Grant, type Want } from '../cluster/messages.js'
import type { ClusterTuning } from '../cluster/tuning.js'
import { Rng } from './rng.js'

export interface NetworkModel {
  minLatencyMs: number
  maxLatencyMs: number
  /** Probability a message is lost. */
  loss: number
  /** Probability a message is delivered twice. */
  duplicate: number
}

export const PERFECT: NetworkModel = { minLatencyMs: 1, maxLatencyMs: 3, loss: 0, duplicate: 0 }

interface Event {
  at: number
  seq: number
  run: () => void
}

export interface VirtualClusterOptions {
  nodes: string[]
  rules: RuleConfig[]
  limits: LimitsConfig
  seed: number
  startMs: number
  network?: NetworkModel
  tuning?: Partial<ClusterTuning>
  requestTimeoutMs?: number
}

const packr = new Packr({ useRecords: false })

export class VirtualCluster {
  readonly cores = new Map<string, ClusterCore>()
  readonly rng: Rng
  now: number
  network: NetworkModel
  private readonly queue: Event[] = []
  private seq = 0
  private readonly cut = new Set<string>()
  readonly bytes = new Map<string, number>()
  readonly messages = new Map<string, number>()
  private readonly requestTimeoutMs: number

  constructor (opts: VirtualClusterOptions) {
    this.rng = new Rng(opts.seed)
    this.now = opts.startMs
    this.network = opts.network ?? PERFECT
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 1000
    for (const name of opts.nodes) {
      const core = new ClusterCore({
        node: name,
        epoch: `${name}e${this.rng.int(0, 1e9)}`,
        seeds: opts.nodes,
        rules: opts.rules,
        limits: opts.limits,
        allocate: true,
        tuning: opts.tuning
      })
      core.init(this.now)
      this.cores.set(name, core)
      this.bytes.set(name, 0)
      this.messages.set(name, 0)
    }
  }

  partition (a: string, b: string, oneWay = false): void {
    this.cut.add(`${a}>${b}`)
    if (!oneWay) this.cut.add(`${b}>${a}`)
  }

  heal (): void {
    this.cut.clear()
  }

  private schedule (at: number, run: () => void): void {
    const e = { at, seq: this.seq++, run }
    // Binary insertion keeps the queue ordered by (at, seq): deterministic.
    let lo = 0
    let hi = this.queue.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      const q = this.queue[mid]
      if (q.at < at || (q.at === at && q.seq < e.seq)) lo = mid + 1
      else hi = mid
    }
    this.queue.splice(lo, 0, e)
  }

  /** Send bytes from -> to; returns false if the network dropped it. */
  private transmit (from: string, to: string, body: unknown, deliver: (decoded: unknown) => void): void {
    const bytes = packr.pack(body)
    this.bytes.set(from, (this.bytes.get(from) ?? 0) + bytes.length)
    this.messages.set(from, (this.messages.get(from) ?? 0) + 1)
    if (this.cut.has(`${from}>${to}`) || this.rng.chance(this.network.loss)) return
    const copies = this.rng.chance(this.network.duplicate) ? 2 : 1
    for (let i = 0; i < copies; i++) {
      const at = this.now + this.rng.int(this.network.minLatencyMs, this.network.maxLatencyMs)
      const copy = Uint8Array.from(bytes)
      this.schedule(at, () => deliver(packr.unpack(copy)))
    }
  }

  /** Carry a node's outbound messages over the network. */
  dispatch (from: string, out: Outbound[]): void {
    const core = this.cores.get(from) as ClusterCore
    for (const o of out) {
      if (o.kind === 'gossip') {
        for (const to of this.cores.keys()) {
          if (to === from) continue
          this.transmit(from, to, o.msg, raw => {
            const target = this.cores.get(to)
            if (target === undefined) return
            const m = parseMessage(raw)
            if (m.t === 'gossip') target.onGossip(m, this.now)
          })
        }
      } else {
        this.request(from, core, o.to, o.msg)
      }
    }
  }

  private request (from: string, core: ClusterCore, to: string, msg: Want | Grant): void {
    let answered = false
    this.schedule(this.now + this.requestTimeoutMs, () => {
      if (!answered) core.onRequestFailed(msg, this.now)
      answered = true
    })
    this.transmit(from, to, msg, raw => {
      const target = this.cores.get(to)
      if (target === undefined) return
      const m = parseMessage(raw)
      const reply = m.t === 'want' ? target.onWant(m, this.now) : m.t === 'grant' ? target.onGrant(m, this.now) : undefined
      if (reply === undefined) return
      this.transmit(to, from, reply, r => {
        const back = parseMessage(r)
        if (answered || (back.t !== 'grant' && back.t !== 'ack' && back.t !== 'none')) return
        answered = true
        core.onReply(msg, back, this.now)
      })
    })
  }

  /** Advance virtual time to `t`, running ticks every tickMs and delivering messages. */
  runUntil (t: number, tickMs: number, onTick?: (now: number) => void): void {
    let nextTick = this.now
    while (this.now < t) {
      const nextMsg = this.queue.length > 0 ? this.queue[0].at : Infinity
      if (nextMsg <= nextTick && nextMsg <= t) {
        const e = this.queue.shift() as Event
        this.now = e.at
        e.run()
        continue
      }
      if (nextTick > t) { this.now = t; break }
      this.now = nextTick
      onTick?.(this.now)
      for (const [name, core] of this.cores) this.dispatch(name, core.tick(this.now))
      nextTick += tickMs
    }
  }

  /** Tokens accounted for anywhere: held + outstanding + deferred in every core, and in unacked grants. */
  held (key: string): number {
    let n = 0
    for (const core of this.cores.values()) {
      const ks = core.limiter.existing(key)
      if (ks === undefined) continue
      n += ks.bucket.held
    }
    return n
  }
}
