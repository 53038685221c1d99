/**
 * Grants in flight to a seed that dies for good (estate-marks.ts), in the
 * simulator: the heir gossips the marks of the copy it credited, and each
 * survivor counts its unacked grants to the dead seed at or below its mark
 * as delivered (their credit is in the estate) and takes back those above.
 * Every audit holds over fifty seeds of `seed-crash-forever` (six in
 * `npm test`, below), both
 * outcomes happen, and a survivor that ignored the marks (took everything
 * back) is caught by the token audit as tokens created.
 */
import test from 'ava'
import { ignoringMarks } from './helpers/ignore-marks.js'
import { sweep } from './helpers/long.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

// `npm test` runs six of the fifty (test/helpers/long.ts), seeds 2, 28 and 49 among them: the sweep is thin, and the
// test asks for both outcomes. At 5c1acb8 (a fenced voter attests no one) over seeds 1-60 only 2 and 22 take a grant
// back (2 and 3 tokens) and only 28, 36, 44, 49 and 53 deliver one by the marks (at cb652cb it was seeds 20 and 3).
const SEEDS = sweep([1, 2, 3, 4, 28, 49], Array.from({ length: 50 }, (_, i) => i + 1))

function spec (seed: number, onCluster?: (vc: VirtualCluster) => void): SimSpec {
  return {
    scenario: scenario('seed-crash-forever'),
    nodes: 10,
    seedNodes: 10,
    seed,
    mode: 'hard',
    rule: { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1000ms', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 },
    durationMs: 10_000,
    gossipIntervalMs: 250,
    ...(onCluster === undefined ? {} : { sabotage: onCluster })
  }
}

interface Outcome { ok: boolean, failures: string[], back: number, delivered: number, expired: number }

function outcome (seed: number): Outcome {
  let vc: VirtualCluster | undefined
  const r = runSim(spec(seed, v => { vc = v }))
  let back = 0
  let delivered = 0
  let expired = 0
  for (const core of (vc as VirtualCluster).cores.values()) {
    back += core.reclaim.marks.counters.tokensTakenBack
    delivered += core.reclaim.marks.counters.tokensDelivered
    expired += core.reclaim.marks.counters.tokensExpired
  }
  return { ok: r.ok && r.overshoot === 0, failures: r.failures, back, delivered, expired }
}

/** Each seed's run without sabotage, once: the second test picks its seeds from these, not from runs of its own. */
const clean = new Map<number, Outcome>()
function cleanOutcome (seed: number): Outcome {
  const o = clean.get(seed) ?? outcome(seed)
  clean.set(seed, o)
  return o
}

test.serial('seed-crash-forever: survivors take back the grants above the heir\'s marks and count the rest delivered; every audit holds', t => {
  const runs = SEEDS.map(cleanOutcome)
  for (const [i, o] of runs.entries()) t.true(o.ok, `seed ${SEEDS[i]}: ${o.failures.join('; ')}`)
  const back = runs.reduce((a, o) => a + o.back, 0)
  const delivered = runs.reduce((a, o) => a + o.delivered, 0)
  t.log(`over ${runs.length} runs: ${back} tokens taken back, ${delivered} delivered, ${runs.reduce((a, o) => a + o.expired, 0)} expired`)
  t.true(back > 0, 'some grant in flight was above its mark')
  t.true(delivered > 0, 'some grant in flight was in the dead seed\'s copied books')
})

test.serial('the token audit catches a survivor that takes back grants the dead seed\'s books hold', t => {
  const seeds = SEEDS.filter(s => cleanOutcome(s).delivered > 0)
  t.true(seeds.length > 0)
  for (const o of ignoringMarks(() => seeds.map(outcome))) {
    t.false(o.ok, `ignoring the marks must fail an audit: ${JSON.stringify(o)}`)
    t.true(o.failures.some(f => f.includes('created')), o.failures.join('; '))
  }
})
