/**
 * The virtual network's failure model: per-message latency, loss,
 * duplication and reordering, and a set of cut links (partitions, which may
 * be one-way). Every random choice draws from the run's seeded Rng.
 */
import type { Rng } from './rng.js'

export interface NetworkModel {
  /** Latency floor, ms. */
  minLatencyMs: number
  /** Latency cap, ms. */
  maxLatencyMs: number
  /**
   * Mean latency, ms. When set, latency is the floor plus an exponential tail
   * with this mean above the floor (capped): most messages are fast, a few
   * are slow. Unset: uniform between floor and cap.
   */
  meanLatencyMs?: number
  /** Probability a message is lost. */
  loss: number
  /** Probability a message is delivered twice (the copy with its own latency). */
  duplicate: number
  /** Probability a message is held back by an extra delay (so later ones overtake it). */
  reorder?: number
  /** The extra delay of a reordered message is uniform in [0, reorderMs]. @default 200 */
  reorderMs?: number
  /**
   * Extra latency of direct messages (wants, grants and their replies), ms:
   * a stream that is slow to open while pubsub flows, so a gossip sent after
   * a grant can arrive before it. @default 0
   */
  directExtraMs?: number
}

export const PERFECT: NetworkModel = { minLatencyMs: 1, maxLatencyMs: 3, loss: 0, duplicate: 0 }

/** Latency of one message copy, ms. */
export function sampleLatency (m: NetworkModel, rng: Rng): number {
  let ms: number
  if (m.meanLatencyMs !== undefined) {
    ms = Math.min(m.maxLatencyMs, m.minLatencyMs + rng.exp(Math.max(0, m.meanLatencyMs - m.minLatencyMs)))
  } else {
    ms = m.minLatencyMs + rng.next() * (m.maxLatencyMs - m.minLatencyMs)
  }
  if (m.reorder !== undefined && m.reorder > 0 && rng.chance(m.reorder)) ms += rng.next() * (m.reorderMs ?? 200)
  return ms
}

/** Directed cut links: `a>b` cut means nothing a sends reaches b. */
export class Cuts {
  private readonly cut = new Set<string>()
  /**
   * Links that lose gossip only (direct requests and replies still pass): a
   * pubsub mesh that silently stopped delivering, which libp2p can do while
   * the connection itself is fine.
   */
  private readonly mute = new Set<string>()

  has (from: string, to: string): boolean {
    return this.cut.size > 0 && this.cut.has(`${from}>${to}`)
  }

  hasGossip (from: string, to: string): boolean {
    return this.has(from, to) || (this.mute.size > 0 && this.mute.has(`${from}>${to}`))
  }

  /** Stop gossip from `from` to `to` (until unmuted). */
  muteGossip (from: string, to: string, on: boolean): void {
    if (on) this.mute.add(`${from}>${to}`)
    else this.mute.delete(`${from}>${to}`)
  }

  /** Cut every link from group a to group b (and back unless oneWay). */
  split (a: readonly string[], b: readonly string[], oneWay = false): void {
    for (const x of a) {
      for (const y of b) {
        if (x === y) continue
        this.cut.add(`${x}>${y}`)
        if (!oneWay) this.cut.add(`${y}>${x}`)
      }
    }
  }

  heal (): void {
    this.cut.clear()
  }

  /** Join group a to group b again (both ways): one partition healed while another stays. */
  join (a: readonly string[], b: readonly string[]): void {
    for (const x of a) {
      for (const y of b) {
        this.cut.delete(`${x}>${y}`)
        this.cut.delete(`${y}>${x}`)
      }
    }
  }

  /** Per node, the chance a message to or from it is late (a lossy TCP link's retransmission; 0: none). */
  private readonly lossy = new Map<string, number>()

  setLossy (node: string, p: number): void {
    if (p > 0) this.lossy.set(node, p)
    else this.lossy.delete(node)
  }

  /** The chance a message from -> to is late (the larger of its two ends'). */
  lateChance (from: string, to: string): number {
    return this.lossy.size === 0 ? 0 : Math.max(this.lossy.get(from) ?? 0, this.lossy.get(to) ?? 0)
  }

  get size (): number { return this.cut.size }
}
