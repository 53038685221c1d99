/**
 * Gathering tokens at scale (rebalance.ts, ClusterView.chooseDonors): a node
 * short of tokens asks, together, the donors whose surpluses cover its
 * deficit, and the largest holder too when they do not. On the simulator's
 * virtual clock, with the daemon's state machine: at 40 nodes a share is 25
 * of 1000 tokens, so a hot node must gather from dozens of peers.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ClusterTuning } from '../src/cluster/tuning.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const NODES = Array.from({ length: 40 }, (_, i) => `n${String(i).padStart(2, '0')}`)

/** 1500 requests per second at n00 for 3 s (1000 per 1 s allowed cluster-wide); admitted per window, and wants sent. */
function hotSpot (tuning: Partial<ClusterTuning>): { perWindow: number[], wantsSent: number, maxRound: number } {
  const vc = new VirtualCluster({
    nodes: NODES,
    rules: [rule({ name: 'api', limit: 1000, perMs: 1000 })],
    limits: limits(),
    seed: 3,
    startMs: T0,
    tuning
  })
  const hot = vc.cores.get('n00')
  if (hot === undefined) throw new Error('no n00')
  let formed = -1
  const perWindow = [0, 0, 0]
  let maxRound = 0
  vc.runUntil(T0 + 8000, 2, now => {
    // Load starts on a window boundary once every node holds its lease (a node starts fenced).
    if (formed < 0 && [...vc.cores.values()].every(c => !c.fence.fenced)) formed = Math.ceil((now + 1) / 1000) * 1000
    const x = hot.limiter.existing('api')?.ext as { wantsOut: number } | null | undefined
    maxRound = Math.max(maxRound, x?.wantsOut ?? 0)
    if (formed < 0 || now < formed || now >= formed + 3000 || now % 2 !== 0) return
    for (let i = 0; i < 3; i++) if (hot.acquire('api', 1, now).allowed) perWindow[Math.floor((now - formed) / 1000)]++
  })
  if (formed < 0) throw new Error('the cluster never formed')
  return { perWindow, wantsSent: hot.counters.wantsSent, maxRound }
}

test('a hot node at 40 nodes asks many donors at once and gathers nearly the whole stock in its first second', t => {
  const r = hotSpot({})
  t.log(`admitted per window ${r.perWindow.join(', ')}; ${r.wantsSent} wants; largest round ${r.maxRound}`)
  t.true(r.maxRound > 1, 'wants went to several donors together')
  t.true(r.maxRound <= 32, 'no more than maxWantFanout at once')
  for (const n of r.perWindow) t.true(n <= 1000, `never over the limit: ${n}`)
  t.true(r.perWindow[0] >= 900, `first second: ${r.perWindow[0]} of 1000`)
  t.true(r.perWindow[1] >= 950, `second: ${r.perWindow[1]} of 1000`)
})

test('one donor at a time (maxWantFanout 1) gathers far less in the first second: the fan-out is what does it', t => {
  const one = hotSpot({ maxWantFanout: 1 })
  const many = hotSpot({})
  t.log(`first second: one donor at a time ${one.perWindow[0]}, fanned out ${many.perWindow[0]}`)
  t.is(one.maxRound, 1)
  t.true(one.perWindow[0] < many.perWindow[0] - 100, `${one.perWindow[0]} vs ${many.perWindow[0]}`)
})
