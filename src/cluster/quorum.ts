/**
 * The voters and their quorum (cluster-protocol.md, "Leases and fencing"). Voters are the first
 * `cluster.voters` seeds (default 15) in seed order (share.ts `voterSet`:
 * sorted by name, the order every node agrees on). Each weighs 1; with an
 * even number of voters the first weighs 1.5, so two voters still have a
 * quorum (the first alone) and four have one in any two that include the
 * first. A quorum is any set of voters weighing
 * more than half the total.
 *
 * Invariant: any two quorums intersect, and if one of them excludes voter
 * v, the intersection holds a voter other than v (both weigh more than half,
 * so together more than the whole). Witness voters (design §6) are not
 * implemented yet: every voter is a seed.
 */
import { seedOrder } from '../core/share.js'

export class Quorum {
  /** The voters, in seed order. */
  readonly voters: readonly string[]
  readonly total: number
  private readonly weights: ReadonlyMap<string, number>

  constructor (seeds: readonly string[]) {
    this.voters = seedOrder(seeds)
    const even = this.voters.length % 2 === 0
    this.weights = new Map(this.voters.map((v, i) => [v, even && i === 0 ? 1.5 : 1]))
    this.total = this.voters.length + (even && this.voters.length > 0 ? 0.5 : 0)
  }

  isVoter (name: string): boolean {
    return this.weights.has(name)
  }

  weight (name: string): number {
    return this.weights.get(name) ?? 0
  }

  /** Whether these names (duplicates and non-voters ignored) weigh more than half of all voters. */
  isQuorum (names: Iterable<string>): boolean {
    let w = 0
    const seen = new Set<string>()
    for (const n of names) {
      if (seen.has(n)) continue
      seen.add(n)
      w += this.weight(n)
    }
    return w * 2 > this.total
  }
}
