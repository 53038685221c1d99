/**
 * Members' gossip reaches the seeds alone (member-sums.ts), on real
 * processes: two seeds and two members. The seeds hear both members; a
 * member never hears the other; yet each member knows what the other holds,
 * from the seeds' sums: its shortfall of a day-long key both spent from is
 * 0, where without the sums the other member's tokens would show as missing.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { eventually } from './helpers/proc.js'

const DAY = [{ name: 'day', match: 'day', limit: 90, per: '1d', algorithm: 'fixed-window' }]

interface Status {
  peers: Array<{ name: string, alive: boolean }>
  clusterKeys?: Array<{ key: string, shortfall: number, held: number, outstanding: number, clusterRemaining: number }>
  cluster: { counters: { forwardAllowed: number } }
}

async function status (socketPath: string): Promise<Status> {
  const q = await QuotadClient.connect({ socketPath })
  try { return await q.status() as unknown as Status } finally { await q.close() }
}

test.serial('a member hears only the seeds, and still counts the other member\'s tokens', async t => {
  t.timeout(180_000)
  const c = await makeCluster(['a', 'b'], DAY, { extraNodes: [{ name: 'm1', seed: false }, { name: 'm2', seed: false }] })
  t.teardown(async () => { await c.stopAll() })
  for (const n of ['a', 'b', 'm1', 'm2']) await c.start(n)
  await waitForPeers(c, ['a', 'b'], 3)

  // Each member spends from the day's stock: its tokens come from the seeds by transfer.
  const spent: Record<string, number> = {}
  for (const [m, n] of [['m1', 7], ['m2', 11]] as const) {
    const q = await QuotadClient.connect({ socketPath: c.sockets[m] })
    try {
      for (let i = 0; i < n; i++) t.true((await q.acquire('day', { waitMs: 5000 })).allowed, `${m} acquire ${i}`)
    } finally { await q.close() }
    spent[m] = n
  }

  for (const [me, other] of [['m1', 'm2'], ['m2', 'm1']]) {
    // Once the seeds' sums name the other member's tokens (held, and spent today): the member's shortfall is 0
    // and what it counts as left in the cluster is the stock less all that was spent, wherever the rest is.
    await eventually(`${me}'s shortfall of day to be 0 and the cluster's remaining 90 - 18`, async () => {
      const k = (await status(c.sockets[me])).clusterKeys?.find(k => k.key === 'day')
      return k !== undefined && k.shortfall === 0 && Math.abs(k.clusterRemaining - 72) < 0.5
    })
    const s = await status(c.sockets[me])
    t.false(s.peers.some(p => p.name === other && p.alive), `${me} does not hear ${other}`)
    t.true(s.peers.some(p => p.name === 'a' && p.alive) && s.peers.some(p => p.name === 'b' && p.alive), `${me} hears both seeds`)
    const mine = s.clusterKeys?.find(k => k.key === 'day')
    // Spent here, or admitted at a seed for it.
    t.true(mine !== undefined && mine.outstanding + s.cluster.counters.forwardAllowed >= spent[me], `${me} spent ${spent[me]}`)
  }
  // The seeds hear both members.
  for (const seed of ['a', 'b']) {
    const s = await status(c.sockets[seed])
    t.true(['m1', 'm2'].every(m => s.peers.some(p => p.name === m && p.alive)), `${seed} hears both members`)
  }
})
