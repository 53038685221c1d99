/**
 * Seeds a and b and member m1 on real processes, each seeing the others,
 * with a client of m1's; and a node's status counters. For the tests of a
 * member's forwards (forward-procs, overflow-procs).
 */
import type { ExecutionContext } from 'ava'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers, type TestCluster } from './cluster-procs.js'

interface Status { cluster?: { counters?: Record<string, number> } }

/** A node's cluster counters (its core's, and its forwarding's: forward.ts). */
export async function counters (socketPath: string): Promise<Record<string, number>> {
  const q = await QuotadClient.connect({ socketPath })
  try { return (await q.status() as unknown as Status).cluster?.counters ?? {} } finally { await q.close() }
}

/** Seeds a and b and member m1 up, each seeing the others; a client of m1's (closed at teardown). */
export async function memberCluster (t: ExecutionContext, rules: unknown[]): Promise<{ c: TestCluster, m: QuotadClient }> {
  const c = await makeCluster(['a', 'b'], rules, { extraNodes: [{ name: 'm1', seed: false }] })
  t.teardown(async () => { await c.stopAll() })
  for (const n of ['a', 'b', 'm1']) await c.start(n)
  await waitForPeers(c, ['a', 'b'], 2)
  await waitForPeers(c, ['m1'], 2)
  const m = await QuotadClient.connect({ socketPath: c.sockets.m1 })
  t.teardown(async () => { await m.close() })
  return { c, m }
}

/**
 * Past the limit: `key` is asked `n` times at the member and at each seed, after `got` of its `limit` were
 * admitted. Together they admit at most the limit (hard mode), and once it is reached nothing more anywhere. A
 * member may be told no while a token is still on its way (hard mode denies what it cannot see): that token may
 * be admitted here, never one more (every acquire past the limit is denied: the caller's counters show it).
 */
export async function noneLeft (t: ExecutionContext, c: TestCluster, m: QuotadClient, key: string, got: number, limit: number, n = 5): Promise<void> {
  let total = got
  const ask = async (q: QuotadClient, who: string): Promise<void> => {
    for (let i = 0; i < n; i++) {
      if (!(await q.acquire(key)).allowed) continue
      total++
      t.true(total <= limit, `${who} admitted the ${total}th of ${limit}`)
    }
  }
  await ask(m, 'the member, past the limit')
  for (const s of ['a', 'b']) {
    const q = await QuotadClient.connect({ socketPath: c.sockets[s] })
    try { await ask(q, `seed ${s}, past the limit`) } finally { await q.close() }
  }
  t.true(total <= limit, `${total} admitted of ${limit}`)
}
