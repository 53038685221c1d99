/**
 * The membership view: who this node has heard from, when, and what they
 * last said about their keys and rules. Filled only from validated gossip.
 *
 * A peer is alive while its last gossip is younger than `aliveTimeoutMs`.
 * A peer's key figures are kept until it gossips a newer value; they are
 * what rebalancing uses to find donors and what `status` shows as the
 * cluster-wide remaining.
 */
import type { Gossip } from './messages.js'

export interface PeerKey {
  held: number
  outstanding: number
  rate: number
}

export interface Peer {
  name: string
  epoch: string
  lastHeard: number
  /** The peer's clock at its last gossip, minus ours then (for status; skew estimate incl. delay). */
  clockOffsetMs: number
  rules: Record<string, string>
  keys: Map<string, PeerKey>
  /** What it said it has applied from our current epoch. */
  appliedFromMe: number
  /** It announced it is stopping: it must be sent no more tokens. */
  leaving: boolean
}

export class Peers {
  private readonly byName = new Map<string, Peer>()
  private readonly aliveTimeoutMs: number

  constructor (aliveTimeoutMs: number) {
    this.aliveTimeoutMs = aliveTimeoutMs
  }

  /**
   * Record a gossip. Says whether the peer is new, and its previous epoch
   * when it restarted (its epoch changed), so the caller can strand grants
   * to the old one.
   */
  observe (g: Gossip, myNode: string, myEpoch: string, nowMs: number): { isNew: boolean, restartedFrom?: string } {
    let p = this.byName.get(g.node)
    let restartedFrom: string | undefined
    const isNew = p === undefined
    if (p === undefined) {
      p = { name: g.node, epoch: g.epoch, lastHeard: nowMs, clockOffsetMs: 0, rules: {}, keys: new Map(), appliedFromMe: 0, leaving: false }
      this.byName.set(g.node, p)
    } else if (p.epoch !== g.epoch) {
      restartedFrom = p.epoch
      p.epoch = g.epoch
      p.keys = new Map()
      p.appliedFromMe = 0
    }
    p.lastHeard = nowMs
    p.leaving = g.leaving === true
    p.clockOffsetMs = g.now - nowMs
    p.rules = g.rules
    // Zero entries are kept: "holds nothing" is information. A key a peer never
    // gossiped is assumed to be at its pre-allocated share instead.
    for (const [k, held, outstanding, rate] of g.keys) p.keys.set(k, { held, outstanding, rate })
    for (const [node, epoch, applied] of g.acks) {
      if (node === myNode && epoch === myEpoch) p.appliedFromMe = applied
    }
    return restartedFrom === undefined ? { isNew } : { isNew, restartedFrom }
  }

  get (name: string): Peer | undefined {
    return this.byName.get(name)
  }

  isAlive (p: Peer, nowMs: number): boolean {
    return nowMs - p.lastHeard <= this.aliveTimeoutMs
  }

  all (): IterableIterator<Peer> {
    return this.byName.values()
  }

  alive (nowMs: number): Peer[] {
    const out: Peer[] = []
    for (const p of this.byName.values()) if (this.isAlive(p, nowMs)) out.push(p)
    return out
  }
}
