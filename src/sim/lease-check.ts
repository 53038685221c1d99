/**
 * The leases, judged from outside the nodes. The simulator sees every
 * gossip a node publishes (with its true send time) and every copy a node
 * receives, so it can say, without asking the node, whether the node held
 * a lease at a moment: a quorum of voters (the first `voters` seeds in name
 * order; with an even count the first weighs 1.5) had each sent it, in a
 * gossip it received, an echo `[node, inc, seq]` of one of its own gossips sent no
 * more than leaseMs before that moment. A voter counts itself. Or it is a
 * seed's first start (it allocates and carries no earlier epoch), within
 * leaseMs of its start: that incarnation starts with a lease.
 *
 * Written apart from src/cluster/lease.ts and quorum.ts on purpose: the
 * check is that no `hard` admission happens at a time the node had no
 * lease, so a node that ignores its fence is caught even where nothing
 * overshoots.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Gossip } from '../cluster/messages.js'

/** Floating-point slack: monotonic clocks are true time plus an offset. */
const SLACK_MS = 1e-3

export class LeaseWitness {
  readonly leaseMs: number
  private readonly voters: string[]
  private readonly weights: Map<string, number>
  private readonly total: number
  /** `node/inc/seq` -> true send time. */
  private readonly sends = new Map<string, number>()
  /** Receiving incarnation -> voter -> newest send time of its own gossip a received echo named. */
  private readonly echoes = new WeakMap<ClusterCore, Map<string, number>>()
  /** A seed's first start -> its true start time. */
  private readonly firstStarts = new WeakMap<ClusterCore, number>()

  /** The seeds: a seed's first start holds a start lease, voter or not. */
  private readonly seeds: ReadonlySet<string>

  /** `voters`: how many seeds vote, the first in name order (the cluster's `voters`). */
  constructor (seeds: readonly string[], leaseMs: number, voters = Infinity) {
    this.seeds = new Set(seeds)
    this.voters = [...this.seeds].sort().slice(0, Math.max(1, voters))
    this.leaseMs = leaseMs
    const even = this.voters.length % 2 === 0
    this.weights = new Map(this.voters.map((v, i) => [v, even && i === 0 ? 1.5 : 1]))
    this.total = [...this.weights.values()].reduce((a, b) => a + b, 0)
  }

  /** `core` started at true time `at`. */
  started (core: ClusterCore, at: number): void {
    if (this.seeds.has(core.node) && core.limiter.allocate && core.carries.length === 0) this.firstStarts.set(core, at)
  }

  /** `core` published gossip `g` at true time `at`. */
  published (core: ClusterCore, g: { seq: number }, at: number): void {
    this.sends.set(`${core.node}/${core.incarnation}/${g.seq}`, at)
  }

  /** `to` received a copy of voter gossip `g`. */
  received (to: ClusterCore, g: Gossip): void {
    if (g.heard === undefined || !this.weights.has(g.node)) return
    for (const [node, inc, seq] of g.heard) {
      if (node !== to.node || inc !== to.incarnation) continue
      const sent = this.sends.get(`${node}/${inc}/${seq}`)
      if (sent === undefined) continue
      let m = this.echoes.get(to)
      if (m === undefined) this.echoes.set(to, m = new Map())
      if (sent > (m.get(g.node) ?? -Infinity)) m.set(g.node, sent)
    }
  }

  /** Whether `core` held a lease at true time `at`. */
  holds (core: ClusterCore, at: number): boolean {
    const start = this.firstStarts.get(core)
    if (start !== undefined && at <= start + this.leaseMs + SLACK_MS) return true
    const m = this.echoes.get(core)
    let w = 0
    for (const v of this.voters) {
      const sent = v === core.node ? Infinity : m?.get(v)
      if (sent !== undefined && sent >= at - this.leaseMs - SLACK_MS) w += this.weights.get(v) as number
    }
    return 2 * w > this.total
  }

  /** Whether these nodes, by name, weigh a quorum of voters. */
  isQuorum (names: readonly string[]): boolean {
    let w = 0
    for (const n of new Set(names)) w += this.weights.get(n) ?? 0
    return 2 * w > this.total
  }
}
