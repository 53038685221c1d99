/**
 * Reading a cluster's books without racing its transfers.
 *
 * The nodes' `held` figures are read one node at a time, so a grant that is
 * debited at one node and not yet credited at another makes a sum too small
 * (or, read in the other order, too large). `settledHeld` sums them only from
 * a snapshot that no transfer can have straddled: it reads every node's
 * status twice and accepts the second reading only if, in both, no node has
 * tokens of the key in transit (debited, not yet acknowledged) and no node's
 * transfer counters or incarnation changed in between. A debit after the
 * first reading changes its node's transfersOut; a credit changes the
 * receiver's transfersIn; a debit before it is still in transit, or was
 * acknowledged, so credited, before the first reading.
 */
import { eventually, PROC_DEADLINE_MS } from './proc.js'
import { QuotadClient } from '@quotad/client'

export interface KeyBooks {
  key: string
  held: number
  transfersIn: number
  transfersOut: number
  inTransitOut: number
  /** Of inTransitOut, grants to receivers not alive (waiting for a restart or a reclaim). */
  inTransitToDead?: number
  stranded: number
}

export interface NodeStatus {
  cluster: { epoch: string, incarnation: number, start: string, allocate: boolean, counters: Record<string, number>, recovery: { restoredTokens: number, deferredShares: number } | null }
  peers: Array<{ name: string, alive: boolean }>
  ruleAgreement: Array<{ name: string, agree: string[], differ: string[], shared: boolean }>
  clusterKeys: KeyBooks[]
}

export async function nodeStatus (socketPath: string): Promise<NodeStatus> {
  const q = await QuotadClient.connect({ socketPath, timeoutMs: 30_000 })
  try {
    return await q.status() as unknown as NodeStatus
  } finally {
    await q.close()
  }
}

export function keyBooks (s: NodeStatus, key: string): KeyBooks {
  return s.clusterKeys.find(k => k.key === key) ?? { key, held: 0, transfersIn: 0, transfersOut: 0, inTransitOut: 0, stranded: 0 }
}

/** What every listed node holds of `key`, from a snapshot taken while none of its tokens moved. */
export async function settledHeld (sockets: Record<string, string>, key: string, ms = PROC_DEADLINE_MS, opts: { toDead?: boolean } = {}): Promise<{ total: number, held: Record<string, number> }> {
  // With toDead, grants to a receiver that is not alive may stay in transit (a node killed while one was on its
  // way to it): they are in neither side's held, and do not move until it restarts or is reclaimed.
  const moving = (b: KeyBooks): number => b.inTransitOut - (opts.toDead === true ? b.inTransitToDead ?? 0 : 0)
  const names = Object.keys(sockets)
  const read = async (): Promise<NodeStatus[]> => {
    const all: NodeStatus[] = []
    for (const n of names) all.push(await nodeStatus(sockets[n]))
    return all
  }
  let last: unknown
  return await eventually(`the books of ${key} to settle on ${names.join(', ')}`, async () => {
    const first = await read()
    const second = await read()
    last = second.map((s, i) => ({ node: names[i], ...keyBooks(s, key) }))
    const still = names.every((_, i) => {
      const a = keyBooks(first[i], key)
      const b = keyBooks(second[i], key)
      return moving(a) === 0 && moving(b) === 0 && a.inTransitOut === b.inTransitOut &&
        a.transfersIn === b.transfersIn && a.transfersOut === b.transfersOut &&
        first[i].cluster.epoch === second[i].cluster.epoch && first[i].cluster.incarnation === second[i].cluster.incarnation
    })
    if (!still) return undefined
    const held = Object.fromEntries(names.map((n, i) => [n, keyBooks(second[i], key).held]))
    return { total: Object.values(held).reduce((a, b) => a + b, 0), held }
  }, ms, () => last)
}
