/**
 * Grants in flight to a node that stops cleanly or crashes, and restarts
 * (estate-marks.ts, "own marks"), in the simulator. A clean stop's snapshot
 * saves its applied marks, which are final (a stopped node credits
 * nothing), and its restart gossips them; a journal restart gossips its
 * journal's (a seed's only once no heir can inherit the crashed epoch:
 * `announceOwnOnceSafe`). Each giver counts its unacked grants to the ended
 * epoch at or below the mark as delivered (they are in the restored books)
 * and takes back those above it, at the horizon. Before, a seed's givers
 * stranded them at once and a member's waited out the marks after a stop:
 * `stops` (three graceful stops restarted 0.5 s later, their gossip
 * unheard) lost up to 82 tokens of 1000 for good, `crash-restart` (two
 * seeds and two members killed and restarted) up to 49.
 *
 * What the marks cannot settle: a grant whose giver's incarnation ended
 * too before it heard the receiver's marks. A member saves no unacked
 * grant (lifecycle.ts: "at worst they are stranded"), and a member's
 * journal holds its gives but not the grants, so its next incarnation does
 * not know them. Seeds 1-20 hit it twice since 2026-11-28 (a stopping
 * member handing 10 tokens to a seed that had just stopped, then both
 * restarting; a member's grant of 4 to a seed that had crashed, then the
 * member killed before the seed's restart announced its marks): the test
 * counts such double failures apart, and asserts every other grant
 * settled.
 */
import test from 'ava'
import { runSim } from '../src/sim/run.js'
import { sweep } from './helpers/long.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

const RULE = { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1000ms', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 } as const
// Seeds 1-20 in `npm run test:long`, 1-8 in `npm test` (test/helpers/long.ts).
const SEEDS = Array.from({ length: sweep(8, 20) }, (_, i) => i + 1)

interface Outcome { ok: boolean, failures: string[], lost: number, double: number, back: number, delivered: number, expired: number }

function run (name: string, seed: number): Outcome {
  let vc: VirtualCluster | undefined
  // A grant whose giver and receiver both ended is lost (counted apart below, `double`), not a failure of the run.
  const sc = { ...scenario(name), capacityLoss: 'a grant whose giver and receiver both ended: this test counts it apart' }
  const r = runSim({ scenario: sc, nodes: 10, seedNodes: 3, seed, mode: 'hard', rule: RULE, durationMs: 10_000, gossipIntervalMs: 250, sabotage: v => { vc = v } })
  const v = vc as VirtualCluster
  // Stranded grants whose giver's incarnation ended too (no live node has its epoch): a double failure, apart.
  const live = new Set([...v.cores.values()].map(c => c.epoch))
  let double = 0
  for (const g of v.audit.strandedGrants()) if (!live.has(g.giverEpoch) && !live.has(g.toEpoch)) double += g.tokens
  const o: Outcome = { ok: r.ok && r.overshoot === 0, failures: r.failures, lost: r.stranded - double, double, back: 0, delivered: 0, expired: 0 }
  for (const c of v.cores.values()) {
    o.back += c.reclaim.marks.counters.tokensTakenBack
    o.delivered += c.reclaim.marks.counters.tokensDelivered
    o.expired += c.reclaim.marks.counters.tokensExpired
  }
  return o
}

for (const name of ['stops', 'slow-streams', 'crash-restart', 'churn']) {
  test(`${name}: grants in flight to a node that stops or crashes and restarts are settled by its marks; nothing is lost for good unless its giver ended too`, t => {
    const runs = SEEDS.map(s => run(name, s))
    for (const [i, o] of runs.entries()) {
      t.true(o.ok, `seed ${SEEDS[i]}: ${o.failures.join('; ')}`)
      t.is(o.lost, 0, `seed ${SEEDS[i]}: lost for good`)
      t.is(o.expired, 0, `seed ${SEEDS[i]}: no grant waited out the marks`)
    }
    const back = runs.reduce((a, o) => a + o.back, 0)
    const delivered = runs.reduce((a, o) => a + o.delivered, 0)
    const double = runs.filter(o => o.double > 0).map(o => `${o.double}`)
    t.log(`over ${SEEDS.length} runs: ${back} tokens taken back, ${delivered} delivered; giver and receiver both ended: ${double.length} runs (${double.join(', ')} tokens)`)
    t.true(double.length <= 2, 'double failures stay rare')
    t.true(back + delivered > 0, 'some grant was in flight at a stop')
  })
}
