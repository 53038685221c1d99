/**
 * Members' gossip to the seeds alone, and the seeds' sums of it
 * (member-sums.ts), in the simulator: the dispatch the daemon's topics
 * mirror, and what a member then knows of the members it does not hear.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { gossipAudience, MemberSums } from '../src/cluster/member-sums.js'
import { CLUSTER_VERSION, parseMessage } from '../src/cluster/messages.js'
import { homeOf } from '../src/core/share.js'
import { keyShortfall } from '../src/cluster/shortfall.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { ErrorCodes } from '../src/errors.js'

const RULE = { name: 'api', match: 'api', limit: 200, perMs: 1000, per: '1s', algorithm: 'fixed-window' as const, mode: 'hard' as const, onPartition: 'local-share' as const, burst: 200, maxDebt: 20 }

function spec (seedNodes: number | undefined, sabotage?: SimSpec['sabotage']): SimSpec {
  return { scenario: scenario('zipf'), nodes: 8, ...(seedNodes === undefined ? {} : { seedNodes }), seed: 3, mode: 'hard', rule: RULE, durationMs: 3000, gossipIntervalMs: 100, ...(sabotage === undefined ? {} : { sabotage }) }
}

test('who hears a gossip: a seed, everyone; any other node, the seeds alone', t => {
  t.is(gossipAudience('a', ['a', 'b']), 'all')
  t.is(gossipAudience('m1', ['a', 'b']), 'seeds')
})

test('in a run with 2 seeds of 8, members hear only seeds, seeds hear everyone, and no check fails', t => {
  const heard = new Map<string, Set<string>>()
  // A seed's gossip names only seed givers in its ack marks; a member giver gets its marks directly.
  const ackedInGossip = new Set<string>()
  let acksToMembers = 0
  const r = runSim(spec(2, (vc, start) => {
    vc.at(start + 1, () => {
      for (const [name, core] of vc.cores) {
        const orig = core.onGossip.bind(core)
        core.onGossip = (m, from, nowMs) => {
          let s = heard.get(name)
          if (s === undefined) heard.set(name, s = new Set())
          s.add(m.node)
          // An hb repeats a gossip with no acks (gossip-repeat.ts).
          if (m.t === 'gossip') for (const [giver] of m.acks) ackedInGossip.add(giver)
          return orig(m, from, nowMs)
        }
        const onAck = core.onAck.bind(core)
        core.onAck = (a, from, nowMs) => { if (!vc.seeds.includes(name)) acksToMembers++; return onAck(a, from, nowMs) }
      }
    })
  }))
  t.true(r.ok, r.failures.join('; '))
  t.is(r.overshoot, 0)
  t.deepEqual([...ackedInGossip].filter(g => g !== 'n1' && g !== 'n2'), [])
  t.true(acksToMembers > 0, 'members that returned tokens got their marks directly')
  for (const m of ['n3', 'n4', 'n5', 'n6', 'n7', 'n8']) t.deepEqual([...heard.get(m) ?? []].sort(), ['n1', 'n2'], `${m} heard`)
  for (const s of ['n1', 'n2']) t.is(heard.get(s)?.size, 7, `${s} hears every other node`)
})

/**
 * Sampled mid-run under a skewed load: what a member counts as left in the
 * cluster, against the truth (every node's held), and how much of that the
 * other members hold (what the member would miss without the sums).
 */
function sample (vc: VirtualCluster, member: string): { counted: number, truth: number, othersHeld: number, shortfall: number } {
  const mono = vc.mono(member)
  const core = vc.cores.get(member) as ClusterCore
  const ks = core.limiter.existing('api')
  if (ks === undefined) throw new Error(`${member} has no state for api`)
  let truth = 0
  let othersHeld = 0
  for (const [n, c] of vc.cores) {
    const k = c.limiter.existing('api')
    if (k === undefined) continue
    k.bucket.advance(vc.mono(n))
    truth += k.bucket.held
    if (n !== member && !c.seeds.includes(n)) othersHeld += k.bucket.held
  }
  return { counted: core.view.clusterRemaining(ks, mono), truth, othersHeld, shortfall: keyShortfall(core, ks, mono) }
}

test('a member counts the members it does not hear from the seeds\' sums: its cluster-wide remaining follows the truth', t => {
  const rows: Array<ReturnType<typeof sample>> = []
  const r = runSim(spec(2, (vc, start) => {
    // Every 250 ms from 0.5 s on, at the member with the most demand under zipf and at a quiet one.
    for (let at = 500; at < 3000; at += 250) vc.at(start + at, () => { for (const m of ['n3', 'n8']) if (vc.cores.get(m)?.limiter.existing('api') !== undefined) rows.push(sample(vc, m)) })
  }))
  t.true(r.ok, r.failures.join('; '))
  t.true(rows.length >= 10, `${rows.length} samples`)
  // The other members do hold tokens a member needs to count (otherwise this test would show nothing).
  t.true(rows.some(s => s.othersHeld >= 10), JSON.stringify(rows.map(s => s.othersHeld)))
  // Gossip and the sums are a gossip interval or two old: the median error is small against what others hold.
  const err = rows.map(s => Math.abs(s.counted - s.truth)).sort((a, b) => a - b)
  const held = rows.map(s => s.othersHeld).sort((a, b) => a - b)
  t.log(`median |counted - truth| ${err[Math.floor(err.length / 2)]}, median held by the other members ${held[Math.floor(held.length / 2)]}, ${rows.length} samples`)
  t.true(err[Math.floor(err.length / 2)] < held[Math.floor(held.length / 2)] / 2,
    `median |counted - truth| ${err[Math.floor(err.length / 2)]} against median held by the other members ${held[Math.floor(held.length / 2)]}`)
})

test('with every node a seed, no gossip carries member sums (the all-seed shape is unchanged)', t => {
  let sums = 0
  const r = runSim(spec(undefined, (vc, start) => {
    vc.at(start + 1, () => {
      for (const core of vc.cores.values()) {
        const orig = core.onGossip.bind(core)
        core.onGossip = (m, from, nowMs) => { sums += m.t === 'gossip' ? m.msums?.length ?? 0 : 0; return orig(m, from, nowMs) }
      }
    })
  }))
  t.true(r.ok, r.failures.join('; '))
  t.is(sums, 0)
})

test('a seed\'s msums are bounded and checked: a bad line is a bad message', t => {
  const base = { v: CLUSTER_VERSION, t: 'gossip', node: 'a', epoch: 'e1', inc: 1, seq: 1, now: 0, pending: [], carries: [], cfg: 'x', rules: {}, keys: [], acks: [] }
  const ok = parseMessage({ ...base, msums: [['api', 3, 1.5, 4, 1.5]] })
  t.deepEqual(ok.t === 'gossip' ? ok.msums : undefined, [['api', 3, 1.5, 4, 1.5]])
  // Custody, and a sum of it, may be negative (shortfall.ts peerCustody): a seed's copy saying so is read, not refused.
  const owing = parseMessage({ ...base, msums: [['api', 0, 0, -3, 0]] })
  t.deepEqual(owing.t === 'gossip' ? owing.msums : undefined, [['api', 0, 0, -3, 0]])
  for (const msums of [[['api', -1, 0, 0, 0]], [['api', 1, 0, 0]], [[7, 1, 1, 1, 1]], 'api', [['api', 1, Infinity, 1, 1]], [['api', 1, 1, -Infinity, 1]], [['api', 1, 1, 1, -1]]]) {
    t.throws(() => parseMessage({ ...base, msums }), { code: ErrorCodes.BAD_FRAME }, JSON.stringify(msums))
  }
  t.throws(() => parseMessage({ ...base, msums: Array.from({ length: 4097 }, (_, i) => [`k${i}`, 1, 1, 1, 1]) }), { code: ErrorCodes.BAD_FRAME })
})

test('a member keeps sums only from the key\'s aggregator, and never an older line over a newer one', t => {
  let ran = false
  const r = runSim(spec(2, (vc, start) => {
    vc.at(start + 2000, () => {
      const core = vc.cores.get('n5') as ClusterCore
      const ks = core.limiter.existing('api')
      // Both seeds are up: the aggregator is the key's home.
      const home = homeOf('api', core.seeds)
      const seed = home === undefined ? undefined : core.peers.get(home)
      const other = core.peers.get(home === 'n1' ? 'n2' : 'n1')
      if (ks === undefined || seed === undefined || other === undefined) throw new Error('no state')
      ran = true
      const sums = core.msums as MemberSums
      const x = ks.ext as { msum: { held: number, seq: number } | null }
      sums.onSums(seed, 1_000_000, [['api', 42, 0, 42, 0]], 0)
      t.is(x.msum?.held, 42)
      sums.onSums(seed, 999_999, [['api', 7, 0, 7, 0]], 0)
      t.is(x.msum?.held, 42, 'an older message of the same seed epoch is ignored')
      // The other seed's line (say, the zero line of a seed that has just stopped summing the key) is not taken.
      sums.onSums(other, 2_000_000, [['api', 0, 0, 0, 0]], 0)
      t.is(x.msum?.held, 42)
      // Nor a name that is not a seed.
      sums.onSums({ ...seed, name: 'n6' }, 2_000_000, [['api', 5, 0, 5, 0]], 0)
      t.is(x.msum?.held, 42)
    })
  }))
  t.true(r.ok, r.failures.join('; '))
  t.true(ran)
})
