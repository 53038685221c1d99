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
 * id (or none); the gossip interval (every cluster timing derives from it).
 */
import { createHash } from 'node:crypto'
import type { ClusterConfig } from '../config/types.js'

export function clusterHash (config: Pick<ClusterConfig, 'cluster' | 'nodes'>): string {
  const seeds = config.nodes.filter(n => n.seed).map(n => [n.name, n.peerId ?? null]).sort((a, b) => String(a[0]) < String(b[0]) ? -1 : 1)
  const canon = JSON.stringify([config.cluster.name, seeds, config.cluster.gossipIntervalMs])
  return createHash('sha256').update(canon).digest('hex').slice(0, 16)
}
