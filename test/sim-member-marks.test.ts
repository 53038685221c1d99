/**
 * Grants in flight to a member that crashes and restarts from its journal
 * (estate-marks.ts, "a member's own marks"), in the simulator: the restart
 * gossips its crashed epoch's marks, and each giver counts its unacked
 * grants to that epoch at or below the mark as delivered (the credit is in
 * the recovered books) and takes back those above it, at the horizon.
 * Before, they were stranded for good: a kill -9 while tokens moved to a
 * member shrank the limit until the whole cluster restarted.
 *
 * Over twelve seeds of `member-crash-receiving` (six in `npm test`,
 * test/helpers/long.ts) every audit holds, both
 * outcomes happen, nothing is left stranded, and a giver that ignores the
 * marks (takes everything back) is caught by the token audit as tokens
 * created.
 */
import test from 'ava'
import { ignoringMarks } from './helpers/ignore-marks.js'
import { sweep } from './helpers/long.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

const SEEDS = Array.from({ length: sweep(6, 12) }, (_, i) => i + 1)

function spec (seed: number, onCluster: (vc: VirtualCluster) => void, capacityLoss?: string): SimSpec {
  return {
    scenario: { ...scenario('member-crash-receiving'), ...(capacityLoss === undefined ? {} : { capacityLoss }) },
    nodes: 10,
    seed,
    mode: 'hard',
    rule: { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1000ms', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 },
    durationMs: 10_000,
    gossipIntervalMs: 250,
    sabotage: onCluster
  }
}

interface Outcome { ok: boolean, failures: string[], back: number, delivered: number, expired: number, strandedInLedger: number, stranded: number }

function outcome (seed: number): Outcome {
  let vc: VirtualCluster | undefined
  const r = runSim(spec(seed, v => { vc = v }))
  const o: Outcome = { ok: r.ok && r.overshoot === 0, failures: r.failures, back: 0, delivered: 0, expired: 0, strandedInLedger: 0, stranded: r.stranded }
  for (const core of (vc as VirtualCluster).cores.values()) {
    o.back += core.reclaim.marks.counters.tokensTakenBack
    o.delivered += core.reclaim.marks.counters.tokensDelivered
    o.expired += core.reclaim.marks.counters.tokensExpired
    o.strandedInLedger += core.ledger.stranded
  }
  return o
}

/** Each seed's run without sabotage, once: the later tests pick their seeds from these, not from runs of their own. */
const clean = new Map<number, Outcome>()
function cleanOutcome (seed: number): Outcome {
  const o = clean.get(seed) ?? outcome(seed)
  clean.set(seed, o)
  return o
}

test.serial('member-crash-receiving: givers settle their grants in flight to a restarted member by its journal\'s marks; nothing is stranded, every audit holds', t => {
  const runs = SEEDS.map(cleanOutcome)
  for (const [i, o] of runs.entries()) {
    t.true(o.ok, `seed ${SEEDS[i]}: ${o.failures.join('; ')}`)
    // No grant waited out its marks, none was counted lost, and the audit sees no token out of reach at the end.
    t.is(o.expired, 0, `seed ${SEEDS[i]}`)
    t.is(o.strandedInLedger, 0, `seed ${SEEDS[i]}`)
    t.is(o.stranded, 0, `seed ${SEEDS[i]}`)
  }
  const back = runs.reduce((a, o) => a + o.back, 0)
  const delivered = runs.reduce((a, o) => a + o.delivered, 0)
  t.log(`over ${runs.length} runs: ${back} tokens taken back, ${delivered} delivered`)
  t.true(runs.every(o => o.back + o.delivered > 0), 'every run killed a member with a grant on its way')
  t.true(back > 0, 'some grant in flight was above its mark')
  t.true(delivered > 0, 'some grant in flight was in the recovered books')
})

test.serial('the token audit catches a giver that takes back grants the restarted member\'s books hold', t => {
  const seeds = SEEDS.filter(s => cleanOutcome(s).delivered > 0).slice(0, 4)
  t.true(seeds.length > 0)
  for (const o of ignoringMarks(() => seeds.map(outcome))) {
    t.false(o.ok, `ignoring the marks must fail an audit: ${JSON.stringify(o)}`)
    t.true(o.failures.some(f => f.includes('created')), o.failures.join('; '))
  }
})

test.serial('a journal an older build wrote (no marks in its checkpoint) announces nothing: its givers take nothing back, and nothing is created', t => {
  // The member's journal as a build without member marks wrote it: the checkpoint has no `marks`, no batch a mark.
  const oldBuild = (text: string): string => text.split('\n').map((line, i) => {
    if (line === '') return line
    if (i === 0) { const { marks: _m, ...cp } = JSON.parse(line) as Record<string, unknown>; return JSON.stringify(cp) }
    return JSON.stringify((JSON.parse(line) as unknown[]).filter(e => !(Array.isArray(e) && e[0] === 'mark')))
  }).join('\n')
  const seeds = SEEDS.filter(s => cleanOutcome(s).delivered > 0).slice(0, 4)
  t.true(seeds.length > 0)
  for (const s of seeds) {
    let vc: VirtualCluster | undefined
    const r = runSim(spec(s, v => {
      vc = v
      const start = v.start.bind(v)
      v.start = (name, rules) => {
        const n = v.nodes.get(name)
        if (n !== undefined && !v.seeds.includes(name) && n.journal !== '') n.journal = oldBuild(n.journal)
        start(name, rules)
      }
    }, 'an older build\'s journal announces no marks, so its givers take nothing back: the loss this test shows'))
    t.true(r.ok && r.overshoot === 0, `seed ${s}: ${r.failures.join('; ')}`)
    let back = 0
    for (const core of (vc as VirtualCluster).cores.values()) back += core.reclaim.marks.counters.tokensTakenBack + core.reclaim.marks.counters.tokensDelivered
    t.is(back, 0, `seed ${s}: no grant was settled without marks`)
  }
})
