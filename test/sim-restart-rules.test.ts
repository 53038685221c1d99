/**
 * Restarts go through the real state file in the simulator (virtual-cluster.ts
 * `throughDisk`: the daemon's bytes, the daemon's parser). A rule with `pace`
 * (or `decide`, `credit`, `maxKeys`) must come back with the hash it was saved
 * under, or the restart throws its saved keys away and the window admits
 * more than its limit: 38 on 30 an hour on real processes, 74 after three
 * whole-cluster restarts.
 *
 * The scenario: an hour-long paced window and graceful stops, each restarted
 * from its state file. Today: no overshoot. With the old parser put back (a
 * restored rule without `pace`): overshoot.
 */
import test from 'ava'
import type { RuleConfig } from '../src/config/types.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

const PACED: RuleConfig = {
  name: 'paced', match: 'paced', limit: 30, perMs: 3_600_000, per: '1h', algorithm: 'fixed-window', burst: 30, mode: 'hard', onPartition: 'local-share', maxDebt: 30, pace: true
}

function runs (sabotage?: (vc: VirtualCluster) => void): { failed: number, failures: string[], admitted: number } {
  let failed = 0
  let admitted = 0
  const failures: string[] = []
  for (let seed = 1; seed <= 20; seed++) {
    for (const scenario of ['stops', 'restart-changed']) {
      const spec = { ...propertySpec({ scenario, mode: 'hard', seed }), rule: PACED }
      const r = runSim({ ...spec, ...(sabotage === undefined ? {} : { sabotage }) })
      admitted += r.cluster.admitted
      if (!r.ok) { failed++; failures.push(`${scenario} ${seed}: ${r.failures[0]}`) }
    }
  }
  return { failed, failures, admitted }
}

test('a paced hour-long rule across graceful restarts: no overshoot; the old state-file parser (pace dropped) overshoots', t => {
  const today = runs()
  t.deepEqual(today.failures, [])
  t.true(today.admitted >= 30 * 20, `the runs spent the stock (${today.admitted} admitted)`)
  const old = runs(vc => {
    const start = vc.start.bind(vc)
    vc.start = (name, rules) => {
      const n = vc.nodes.get(name)
      // The old parser of the state file (state-schema.ts before this fix) dropped pace, decide, credit and maxKeys.
      if (n?.disk?.rules !== undefined) n.disk = { ...n.disk, rules: n.disk.rules.map(({ pace: _p, decide: _d, creditMs: _c, maxKeys: _m, ...r }) => r) }
      start(name, rules)
    }
  })
  t.true(old.failed > 0, 'the scenario catches a rule restored without pace')
  t.true(old.failures.some(f => f.includes('overshoot')), old.failures.join('\n'))
})
