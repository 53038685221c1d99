/**
 * An insider flood of made-up member names in the simulator (issue 46;
 * scenario `member-flood`): an insider with the swarm key speaks for 300
 * names from 4 peer ids every second while three real members join. Each
 * peer id holds one slot at a seed; the real members are admitted and
 * served; once the flood stops, the made-up names fall silent and their
 * slots are freed (through the dead-member settlement where the cluster
 * took their gossip, by the lease where it never did). Every check of the
 * run (oracle, conservation, positions) still holds.
 */
import test from 'ava'
import { propertyRule } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import { idOf, type VirtualCluster } from '../src/sim/virtual-cluster.js'

for (const seed of [1, 2]) {
  test(`member-flood (seed ${seed}): real members join during the flood, the flood's slots are bounded and freed`, t => {
    let vc: VirtualCluster | undefined
    let mostFake = 0
    const joinedDuring = new Map<string, string[]>()
    const sc = scenario('member-flood')
    const r = runSim({
      scenario: sc, nodes: 4, seedNodes: 2, seed, mode: 'hard', rule: propertyRule(seed, false), durationMs: 3000, gossipIntervalMs: 100,
      sabotage: (v, startMs) => {
        vc = v
        // Every 100 ms: how many slots the flood holds at each seed, and which members were admitted while it held any.
        const poll = (): void => {
          for (const s of v.seeds) {
            const names = v.cores.get(s)?.membership.members().map(([n]) => n) ?? []
            const fake = names.filter(n => n.startsWith('x')).length
            mostFake = Math.max(mostFake, fake)
            if (fake > 0) joinedDuring.set(s, names.filter(n => n.startsWith('j')))
          }
          v.at(v.now + 100, poll)
        }
        v.at(startMs + 100, poll)
      }
    })
    t.true(r.ok, `${r.failures.join('; ')}\n  replay: ${r.replay}`)
    t.is(r.overshoot, 0)
    const cluster = vc as VirtualCluster
    t.true(mostFake > 0 && mostFake <= 4, `the flood held at most one slot per peer id at a seed (most: ${mostFake})`)
    for (const s of cluster.seeds) t.deepEqual(joinedDuring.get(s)?.sort(), ['j1', 'j2', 'j3'], `${s} admitted the members while the flood held slots`)
    const seeds = cluster.seeds.map(s => cluster.cores.get(s))
    for (const c of seeds) {
      if (c === undefined) { t.fail('a seed is down'); continue }
      const names = c.membership.members().map(([n]) => n)
      t.deepEqual(names.filter(n => n.startsWith('x')), [], `${c.node}: every made-up name's slot was freed`)
      t.deepEqual(names.filter(n => n.startsWith('j')).sort(), ['j1', 'j2', 'j3'], `${c.node}: the three members hold theirs`)
      t.true(c.membership.admission.perPeer > 0, 'names past one per peer id were refused')
      t.true(c.membership.admission.freed + c.reclaim.counters.settlements > 0)
    }
    const joiners = ['j1', 'j2', 'j3'].map(j => cluster.cores.get(j))
    t.true(joiners.every(c => c !== undefined), 'every member is up')
    for (const j of ['j1', 'j2', 'j3']) for (const s of cluster.seeds) t.is(cluster.cores.get(s)?.membership.idOf(j), idOf(j), `${s} binds ${j} to its peer id`)
    t.true(joiners.some(c => (c?.counters.tokensIn ?? 0) > 0), 'members were given tokens')
  })
}
