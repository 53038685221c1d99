/**
 * A seed's ClusterCore of the two-seed cluster a, b, started at monotonic 0,
 * with leases off: for pure tests that pass (or drop) every message by hand.
 */
import { ClusterCore } from '../../src/cluster/cluster-core.js'
import type { ClusterTuning } from '../../src/cluster/tuning.js'
import type { RuleConfig } from '../../src/config/types.js'
import { limits } from './rules.js'

export const WALL = 1_700_000_000_000

export function handCore (node: 'a' | 'b', rules: RuleConfig[], tuning: Partial<ClusterTuning> = {}): ClusterCore {
  const c = new ClusterCore({
    node,
    epoch: `${node}.1`,
    incarnation: 1,
    clusterHash: 'h',
    seeds: ['a', 'b'],
    listed: new Map([['a', 'id:a'], ['b', 'id:b']]),
    rules,
    limits: limits(),
    allocate: true,
    tuning: { leases: false, ...tuning },
    wallMs: WALL,
    monoMs: 0
  })
  c.init(0)
  return c
}
