/**
 * `cluster.voters`: only the first `voters` seeds in name order vote. The
 * others hold and give their shares like any seed, but send no echoes
 * (`heard`), and their own lease, like a member's, needs a quorum of the
 * voters. Run on the simulator, with its lease witness (lease-check.ts,
 * written apart from lease.ts) judging every hard admission.
 */
import test from 'ava'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { Outbound } from '../src/cluster/core-options.js'
import { rule } from './helpers/rules.js'

const NODES = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7']

function spec (over: Partial<SimSpec> = {}): SimSpec {
  return { scenario: scenario('uniform'), nodes: 7, seed: 3, mode: 'hard', rule: rule({ name: 'api', limit: 140, perMs: 1000 }), durationMs: 8000, gossipIntervalMs: 100, tuning: { voters: 3 }, ...over }
}

/** Who published gossip with echoes in it, and how many gossips each node published. */
function watchEchoes (vc: VirtualCluster): { echoed: Set<string>, published: Map<string, number> } {
  const echoed = new Set<string>()
  const published = new Map<string, number>()
  const dispatch = vc.dispatch.bind(vc)
  vc.dispatch = (from: string, out: Outbound[]): void => {
    for (const o of out) {
      if (o.kind !== 'gossip') continue
      published.set(from, (published.get(from) ?? 0) + 1)
      if (o.msg.t === 'gossip' && (o.msg.heard?.length ?? 0) > 0) echoed.add(from)
    }
    dispatch(from, out)
  }
  return { echoed, published }
}

test('only the first voters seeds echo; the others hold leases from their echoes and spend', t => {
  let seen: ReturnType<typeof watchEchoes> | undefined
  const fenced = new Map<string, boolean>()
  const r = runSim(spec({
    sabotage: (vc, start) => {
      seen = watchEchoes(vc)
      vc.at(start + 7000, () => { for (const n of NODES) fenced.set(n, vc.cores.get(n)?.fence.fenced ?? true) })
    }
  }))
  t.deepEqual(r.failures, [])
  t.is(r.overshoot, 0)
  t.deepEqual([...(seen?.echoed ?? [])].sort(), ['n1', 'n2', 'n3'], 'the voters, and only they, echo')
  t.true(NODES.every(n => (seen?.published.get(n) ?? 0) > 50), 'every node gossips')
  t.deepEqual([...fenced].filter(([, f]) => f).map(([n]) => n), [], 'every seed holds a lease, voter or not')
  t.true(r.cluster.utilization > 0.8, `utilization ${r.cluster.utilization}`)
})

test('a quorum of the voters, not of the nodes, decides: the side with most nodes but one voter is fenced', t => {
  // n1, n2 (two of the three voters) with n4 against n3 (one voter) with n5, n6, n7: four nodes of seven.
  const few = ['n1', 'n2', 'n4']
  const many = ['n3', 'n5', 'n6', 'n7']
  const fenced = new Map<string, boolean>()
  const r = runSim(spec({
    sabotage: (vc, start) => {
      vc.at(start + 2000, () => vc.cuts.split(few, many))
      // At 100 ms gossip leaseMs is 1200 and reclaimMs 2000: looked at once every lease that made a quorum across
      // the cut has lapsed, healed before any voter may attest the other side.
      vc.at(start + 3600, () => { for (const n of NODES) fenced.set(n, vc.cores.get(n)?.fence.fenced ?? false) })
      vc.at(start + 3800, () => vc.heal())
    }
  }))
  t.deepEqual(r.failures, [], 'the witness finds no hard admission without a quorum of the voters')
  t.is(r.overshoot, 0)
  t.deepEqual(few.map(n => fenced.get(n)), [false, false, false], 'two voters of three are a quorum: their side keeps its leases')
  t.deepEqual(many.map(n => fenced.get(n)), [true, true, true, true], 'four nodes with one voter are fenced')
})

test('the same cut with every seed voting fences the smaller side instead', t => {
  const few = ['n1', 'n2', 'n4']
  const many = ['n3', 'n5', 'n6', 'n7']
  const fenced = new Map<string, boolean>()
  const r = runSim(spec({
    tuning: {},
    sabotage: (vc, start) => {
      vc.at(start + 2000, () => vc.cuts.split(few, many))
      vc.at(start + 3600, () => { for (const n of NODES) fenced.set(n, vc.cores.get(n)?.fence.fenced ?? false) })
      vc.at(start + 3800, () => vc.heal())
    }
  }))
  t.deepEqual(r.failures, [])
  t.deepEqual(few.map(n => fenced.get(n)), [true, true, true])
  t.deepEqual(many.map(n => fenced.get(n)), [false, false, false, false])
})
