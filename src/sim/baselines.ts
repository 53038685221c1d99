/**
 * The two baselines every run is compared with, on the same arrivals:
 *
 * - central: one exact limiter holding the whole stock, deciding every
 *   request with no network (the upper bound: what Redis with a perfect
 *   network would give). It is the production Limiter on one node.
 * - static: the stock split evenly over the nodes once (floor(stock / n),
 *   the first `stock mod n` nodes one more), each node alone, no gossip:
 *   what "divide the limit by the instance count" gives. The nodes are the
 *   ones running from the start, members as well as seeds: an operator who
 *   splits a limit by hand splits it over every instance, and seed or member
 *   is the cluster's notion, not the split's (so in a member-heavy run the
 *   static figure is the same as with every node a seed). A node that joins
 *   later gets nothing (the split was fixed before it came).
 *
 * Each returns, per arrival, whether it was admitted.
 */
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import { Limiter } from '../core/limiter.js'
import type { Arrival, RuleChange } from './types.js'

/** A rule change reaches both baselines when the cluster's last node has it. */
export function central (rule: RuleConfig, limits: LimitsConfig, arrivals: readonly Arrival[], change: RuleChange | null = null): Uint8Array {
  const l = new Limiter({ node: 'central', seeds: ['central'], rules: [rule], limits })
  let pending = change
  const out = new Uint8Array(arrivals.length)
  for (let i = 0; i < arrivals.length; i++) {
    const a = arrivals[i]
    if (pending !== null && a.at >= pending.to) { l.setRules(pending.rules.map(r => ({ ...r, mode: rule.mode })), pending.to); pending = null }
    out[i] = l.acquire(a.key, a.count, a.at).allowed ? 1 : 0
  }
  return out
}

/** The rule scaled to one node's even share of it (limit and burst split alike). */
function slice (rule: RuleConfig, i: number, n: number): RuleConfig | undefined {
  const part = (x: number): number => Math.floor(x / n) + (i < x % n ? 1 : 0)
  const limit = part(rule.limit)
  const burst = part(rule.burst)
  if (limit < 1 || burst < 1) return undefined
  return { ...rule, limit, burst }
}

export function staticSplit (rule: RuleConfig, limits: LimitsConfig, nodes: readonly string[], arrivals: readonly Arrival[], change: RuleChange | null = null): Uint8Array {
  const sorted = [...nodes].sort()
  const limiters = new Map<string, Limiter | null>()
  sorted.forEach((name, i) => {
    const r = slice(rule, i, sorted.length)
    limiters.set(name, r === undefined ? null : new Limiter({ node: name, seeds: [name], rules: [r], limits }))
  })
  let pending = change
  const out = new Uint8Array(arrivals.length)
  for (let i = 0; i < arrivals.length; i++) {
    const a = arrivals[i]
    if (pending !== null && a.at >= pending.to) {
      const next = pending.rules[0]
      sorted.forEach((name, j) => {
        const r = slice({ ...next, mode: rule.mode }, j, sorted.length)
        const l = limiters.get(name)
        if (r !== undefined && l != null) l.setRules([r], pending?.to ?? a.at)
      })
      pending = null
    }
    const l = limiters.get(a.node)
    out[i] = l != null && l.acquire(a.key, a.count, a.at).allowed ? 1 : 0
  }
  return out
}
