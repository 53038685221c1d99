/**
 * Grants in flight from a seed that dies for good (estate-returns.ts), on
 * the simulator's virtual clock. b and m2 get busy and ask the seed c; c's
 * replies to them are cut (as replies that arrive after the asker's timeout,
 * or that wait for c's journal copies under load, never arrive), so each
 * want is asked again and c gives again: c's books drain into its ledger.
 * Then c is killed. On real processes at a load average of 14 this lost 160
 * of a 300-token stock (c's status: 11 held as it died, the rest in its
 * unacked grants). Now the survivors report their final applied marks of
 * c's grants, and c's heir a takes back those in its copy that were never
 * applied: what stays lost is at most what is left of c's reservation, and
 * the token audit (which knows which grants were applied) balances.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'
import { load } from './helpers/sim-load.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const STOCK = 300

test('a seed dies with its books in grants never applied: its heir takes them back as the receivers report', t => {
  for (let seed = 1; seed <= 4; seed++) {
    const vc = new VirtualCluster({
      nodes: ['a', 'b', 'c'], seeds: ['a', 'b', 'c'], rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })], limits: limits(), seed, startMs: T0 + 100,
      tuning: { gossipIntervalMs: 100, leaseMs: 2000, reclaimMs: 3000, inheritSeeds: true },
      network: { minLatencyMs: 1, maxLatencyMs: 20, loss: 0, duplicate: 0 }
    })
    load(vc, 2000, { a: 10, b: 10, c: 10 })
    vc.start('m2')
    load(vc, 3000, { a: 10, b: 10, c: 10, m2: 10 })
    vc.cuts.split(['c'], ['b', 'm2'], true)
    load(vc, 600, { a: 10, b: 300, c: 10, m2: 300 })
    const c = vc.cores.get('c')
    if (c === undefined) throw new Error('no c')
    const inFlight = c.ledger.inTransitOf('api')
    t.true(inFlight >= 30, `seed ${seed}: c has ${inFlight} in grants b and m2 never got`)
    vc.crash('c')
    vc.heal()
    load(vc, 15_000, { a: 50, b: 50, m2: 50 })
    const a = vc.cores.get('a')
    t.is(a?.heir.counters.inherited, 1, `seed ${seed}: a inherited c`)
    const returned = a?.reclaim.returns.counters.tokensReturned ?? 0
    const acct = vc.audit.account('api')
    t.true(Math.abs(acct.error) < 1e-6, `seed ${seed}: nothing created or lost unaccounted: ${JSON.stringify(acct)}`)
    // What stays lost: at most what is left of c's last reservation (a twentieth of the stock: replication.ts).
    t.true(acct.stranded <= 0.05 * STOCK, `seed ${seed}: c had ${inFlight} in flight, a took back ${returned}; lost ${acct.stranded}`)
    t.true(returned >= inFlight - 0.05 * STOCK, `seed ${seed}: a took back ${returned} of ${inFlight}`)
    t.log(`seed ${seed}: c had ${inFlight} in grants never applied; a took back ${returned}; lost for good ${acct.stranded}`)
  }
})
