/**
 * Chaos 5 seeds, seed 2: two seeds cut off past reclaimMs are inherited (one
 * heir takes both) and come back without a share; later seeds die, restart
 * and inherit each other. Real processes ended with capacity lost for good
 * (35 of a key after the quiet) and, in another run, 31 tokens created. Two
 * seams, each fixed and checked here on the virtual clock:
 *
 * - A heir's clean restart forgot which incarnation each account in its
 *   snapshot is (the journal's `incs`, saved only in checkpoints). It heard
 *   the old attestations of the returned seeds before it heard them, and
 *   settled their new incarnations' accounts with the old: it refused their
 *   honest returns and lost the tokens. The snapshot now keeps `incs`.
 * - A heir of two seeds that had traded tokens restored, from each one's
 *   copy, what it held of the other: entries naming accounts it had already
 *   settled as seeds'. A later settlement of one's next incarnation credited
 *   them (more than the dead held, and over the limit). An account settled
 *   as a seed's is its heir's (Reclaim.restore), when its incarnation is
 *   known to be the settled one's.
 * - On the chaos run's own timing (returned-heirs-chain): a heir read a
 *   recovered journal's copy whose checkpoint named no key (its books were
 *   back at exactly the writer's own share) as the writer's own share plus
 *   the shares it had inherited (estate.ts), and created them: the cluster
 *   admitted 130 per window of 100 for good. And a heir restored the copy's
 *   accounts without their incarnations, so a restart's settlement of an
 *   older incarnation took a newer one's (refused honest returns).
 * - On four seeds (cut-heirs-chain): the first seed, back without a
 *   share, settled the second before the second's heir did, relabelled what
 *   it held of the second's tokens as the heir's and pushed them; the heir,
 *   which only saw the second attested, refused the push as more than its
 *   books said. A heir now holds such a push unapplied while a seed it will
 *   inherit is attested (GrantChecks.waitsForEstate).
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function run (scenario: string, mode: 'hard' | 'soft', seed: number, sabotage?: (vc: VirtualCluster) => void, nodes?: number): { ok: boolean, failures: string[] } {
  const spec: SimSpec = { ...propertySpec({ scenario, mode, seed }), ...(sabotage === undefined ? {} : { sabotage }), ...(nodes === undefined ? {} : { nodes }) }
  return runSim(spec)
}

/** Apply `blind` to every core, and to each started later. */
function everyCore (vc: VirtualCluster, blind: (core: ClusterCore) => void, beforeStart?: (name: string) => void): void {
  const start = vc.start.bind(vc)
  vc.start = (name, rules) => {
    beforeStart?.(name)
    start(name, rules)
    blind(vc.cores.get(name) as ClusterCore)
  }
  for (const core of vc.cores.values()) blind(core)
}

// Seeds that refused honest grants or lost capacity before the fix.
for (const [mode, seed] of [['hard', 3], ['hard', 11], ['soft', 1], ['soft', 7]] as const) {
  test(`returned-heirs-restarts ${mode} seed ${seed}: no honest grant refused, nothing lost or created`, t => {
    const r = run('returned-heirs-restarts', mode, seed)
    t.deepEqual(r.failures, [])
  })
}

test('the scenario catches a heir\'s clean restart that forgets its accounts\' incarnations', t => {
  const r = run('returned-heirs-restarts', 'hard', 3, vc => everyCore(vc, () => {}, name => {
    const disk = vc.nodes.get(name)?.disk
    if (disk !== undefined) delete disk.incs
  }))
  t.true(r.failures.some(f => f.startsWith('refused')), r.failures.join('; '))
})

for (const [mode, seed] of [['hard', 13], ['hard', 18], ['soft', 13], ['soft', 18]] as const) {
  test(`returned-seed-dies ${mode} seed ${seed}: its settlement credits what its new incarnation held, no more`, t => {
    const r = run('returned-seed-dies', mode, seed)
    t.deepEqual(r.failures, [])
  })
}

test('the scenario catches a heir that keeps entries of accounts it settled as seeds\'', t => {
  const blind = (core: ClusterCore): void => { core.reclaim.seedAccountSettled = () => {} }
  const failures = [13, 18].flatMap(seed => run('returned-seed-dies', 'hard', seed, vc => everyCore(vc, blind)).failures)
  t.true(failures.some(f => /capacity|overshoot/.test(f)), failures.join('; '))
})

// Seeds that created tokens (hard 26) or refused honest grants (hard 8, 28, 29) before the fixes.
for (const [mode, seed] of [['hard', 26], ['soft', 26], ['hard', 8], ['hard', 28], ['hard', 29]] as const) {
  test(`returned-heirs-chain ${mode} seed ${seed}: nothing created, no honest grant refused`, t => {
    const r = run('returned-heirs-chain', mode, seed)
    t.deepEqual(r.failures, [])
  })
}

// On four seeds, the seeds whose heir refused a returned seed's push before it settled the dead seed (2 of 200, with
// the hold off: 31 and 58 since 5c1acb8, which moved the attestations; 26 and 66 of 70 before). First seen on three
// seeds with a wall clock stepped back (cut-heirs-chain with wallSteps [-4, 4], hard seeds 3 and 32), whose timing
// the calendar's hold has since changed.
const HELD = [31, 58]
for (const seed of HELD) {
  test(`cut-heirs-chain hard seed ${seed} on 4 seeds: a push relabelled to a heir that has not settled yet is held, not refused`, t => {
    const r = run('cut-heirs-chain', 'hard', seed, undefined, 4)
    t.deepEqual(r.failures, [])
  })
}

test('the scenario catches a heir that judges such a push before its settlement', t => {
  const blind = (core: ClusterCore): void => { core.reclaim.settling = () => false }
  const failures = HELD.flatMap(seed => run('cut-heirs-chain', 'hard', seed, vc => everyCore(vc, blind), 4).failures)
  t.true(failures.some(f => f.startsWith('refused')), failures.join('; '))
})
