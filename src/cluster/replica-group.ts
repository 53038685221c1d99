/**
 * Which seeds keep copies of a seed's journal (replication.ts): its
 * replica group.
 */
import { seedOrder } from '../core/share.js'

/** Most seeds that keep a copy of one seed's journal. */
export const REPLICA_GROUP = 4

/**
 * The seeds that keep copies of `writer`'s journal: the next REPLICA_GROUP
 * seeds after it in name order, wrapping (all the others with five seeds or
 * fewer). A write is durable at a majority of the writer and its group
 * (quorum.ts weights); with the writer dead, a heir must read a set of the
 * group that meets every such majority in a seed other than the writer
 * (with a group of four: three of them), and so sees every durable write.
 */
export function replicaGroup (writer: string, seeds: readonly string[]): string[] {
  const ring = seedOrder(seeds)
  const i = ring.indexOf(writer)
  if (i < 0) return []
  const out: string[] = []
  for (let k = 1; k < ring.length && out.length < REPLICA_GROUP; k++) out.push(ring[(i + k) % ring.length])
  return out
}
