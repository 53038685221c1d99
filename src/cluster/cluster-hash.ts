/**
 * The cluster hash: everything besides the rules that decides whether two
 * nodes can safely share tokens. Two nodes that split the stock over
 * different seed sets (one file lists a third seed, say) compute different
 * pre-allocated shares, and tokens moved between them could be created; so
 * could tokens between nodes that pin different peer ids for a seed, or run
 * with different timings. Every gossip carries the hash, and tokens move
 * only between nodes whose hashes are equal (and whose rule hashes are).
 *
 * Covered: the cluster's name; the seeds, sorted, each with its pinned peer
 * id (or none) (they are also the voters, quorum.ts); the gossip interval
 * (the other timings derive from it); the lease settings (leases on or off,
 * leaseMs, reclaimMs, maxClockSkewMs): a node that would wait a shorter
 * reclaim than another's lease assumes could take tokens still being spent;
 * and whether seeds are inherited (heir.ts): a voter that attests seeds and
 * one that does not would disagree on which settlements happen. The voter
 * count (quorum.ts `voterSet`) only when it leaves seeds out: two nodes that
 * count different voters have quorums that need not intersect, and a file
 * whose seeds all vote keeps the hash it had before the count existed.
 */
import { createHash } from 'node:crypto'
import type { ClusterConfig } from '../config/types.js'

export function clusterHash (config: Pick<ClusterConfig, 'cluster' | 'nodes'>): string {
  const seeds = config.nodes.filter(n => n.seed).map(n => [n.name, n.peerId ?? null]).sort((a, b) => String(a[0]) < String(b[0]) ? -1 : 1)
  const c = config.cluster
  const parts: unknown[] = [c.name, seeds, c.gossipIntervalMs, [c.leases, c.leaseMs, c.reclaimMs, c.maxClockSkewMs], c.inheritSeeds]
  if (c.voters < seeds.length) parts.push(['voters', c.voters])
  const canon = JSON.stringify(parts)
  return createHash('sha256').update(canon).digest('hex').slice(0, 16)
}
