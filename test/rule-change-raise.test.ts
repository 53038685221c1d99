/**
 * A limit lowered below what the window has used, then raised again, in the
 * simulator's virtual cluster (the pure cores, deterministic): the cluster
 * must admit at most the raise's difference (hard-mode.test.ts runs the same
 * story on real processes).
 *
 * After the lowering, a node can owe a burn larger than the raise gives back
 * to it (carryOver pays the old burn first out of the raise; the rest stays
 * owed). Its peers learn the carried burn only from its next gossip line.
 * Until then the line they have was said under the lowered version, and
 * caution used to read such a line as owing nothing once they were at the
 * raised version themselves: they spent the tokens the debtor still owed.
 */
import test from 'ava'
import { DEFAULT_LIMITS, type RuleConfig } from '../src/config/types.js'
import { ext } from '../src/cluster/key-ext.js'
import { simLease } from '../src/sim/run.js'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'

const DAY = 86_400_000
const GOSSIP_MS = 100
const NODES = ['a', 'b', 'c']

const day = (limit: number): RuleConfig[] => [{ name: 'api', match: 'api', limit, per: '1d', perMs: DAY, burst: limit, algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', maxDebt: 10 }]

interface Run { vc: VirtualCluster, step: (ms: number) => void, take: (node: string, max: number) => number, drain: (nodes: string[], rounds: number) => number }

function cluster (): Run {
  const vc = new VirtualCluster({
    nodes: NODES, rules: day(90), limits: DEFAULT_LIMITS, seed: 7, startMs: 1_700_000_001_000,
    tuning: { gossipIntervalMs: GOSSIP_MS, aliveTimeoutMs: 1000, tickMs: 50, ...simLease(GOSSIP_MS) }
  })
  let t = vc.now
  const step = (ms: number): void => { t += ms; vc.runUntil(t) }
  const take = (node: string, max: number): number => {
    let got = 0
    while (got < max) {
      const d = vc.acquire(node, 'api', 1)
      if (d === undefined || !d.allowed) break
      got++
    }
    return got
  }
  const drain = (nodes: string[], rounds: number): number => {
    let n = 0
    for (let i = 0; i < rounds; i++) { for (const x of nodes) n += take(x, 1000); step(100) }
    return n
  }
  return { vc, step, take, drain }
}

/** Limit 90: a uses 45 (tokens move to it), then every node reloads a limit of 30. Returns the node that still owes a burn. */
function lowered (r: Run): string {
  r.step(3000)
  let used = 0
  for (let i = 0; i < 200 && used < 45; i++) { used += r.take('a', 45 - used); r.step(50) }
  if (used !== 45) throw new Error(`used ${used}`)
  r.step(2000)
  for (const n of NODES) r.vc.reload(n, day(30))
  r.step(3000)
  if (r.drain(NODES, 20) !== 0) throw new Error('admitted after the lowering')
  const debtors = NODES.filter(n => ext(r.vc.cores.get(n)?.limiter.existing('api') as never).burn > 10)
  if (debtors.length !== 1) throw new Error(`expected one node owing more than the raise gives it: ${debtors.join(',')}`)
  return debtors[0]
}

test('lowered to 30 after 45 used, raised to 60 on every node at once: at most 15 more', t => {
  const r = cluster()
  lowered(r)
  for (const n of NODES) r.vc.reload(n, day(60))
  // At once: before any gossip from the raised nodes.
  const raised = r.drain(NODES, 60)
  t.true(raised <= 15, `45 + ${raised} > 60`)
  t.true(raised >= 5, `the raised limit is usable (${raised})`)
})

test('lowered to 30 after 45 used, raised to 60 with the debtor last: at most 15 more', t => {
  const r = cluster()
  const debtor = lowered(r)
  const others = NODES.filter(n => n !== debtor)
  for (const n of others) r.vc.reload(n, day(60))
  // The others spend while the debtor still has the lowered rule (its last line was said under it).
  let raised = r.drain(others, 3)
  r.vc.reload(debtor, day(60))
  raised += r.drain(NODES, 60)
  t.true(raised <= 15, `45 + ${raised} > 60`)
  t.true(raised >= 5, `the raised limit is usable (${raised})`)
})
