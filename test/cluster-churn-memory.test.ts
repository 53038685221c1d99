/**
 * Membership state stays bounded: after 1,000 members have joined, taken
 * tokens, and left (SIGTERM), a seed's peer table, transfer ledger and
 * positions (positions.ts) are back to what the seeds alone need, on the
 * simulator's virtual clock.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000

test('1,000 members join, take tokens and leave: the seeds forget them, their books stay conserved', t => {
  const vc = new VirtualCluster({
    nodes: ['a', 'b'], seeds: ['a', 'b'], rules: [rule({ name: 'api', match: 'api', limit: 100, perMs: 1000 })], limits: limits(), seed: 3, startMs: T0,
    tuning: { gossipIntervalMs: 100, forgetAfterMs: 2000 }
  })
  vc.runUntil(T0 + 1000)
  const a = vc.cores.get('a')
  if (a === undefined) return t.fail()
  let admitted = 0
  let peak = 0
  let peakPositions = 0
  let positionsWithMembers = 0
  for (let batch = 0; batch < 20; batch++) {
    const names = Array.from({ length: 50 }, (_, i) => `m${batch * 50 + i}`)
    for (const n of names) vc.start(n)
    // Each member asks for tokens (so grants flow both ways), then stops.
    vc.runUntil(vc.now + 300, 20, () => { for (const n of names) if (vc.acquire(n, 'api', 1)?.allowed === true) admitted++ })
    peak = Math.max(peak, a.peers.size)
    peakPositions = Math.max(peakPositions, a.positions.size)
    for (const n of a.positions.nodes()) if (n !== 'b') positionsWithMembers++
    for (const n of names) vc.stop(n)
    vc.runUntil(vc.now + 700)
  }
  t.true(peak >= 50, `the members were seen (${peak} peers at most)`)
  vc.runUntil(vc.now + 5000)
  t.is(a.peers.size, 1, 'only the other seed is left in the peer table')
  t.true(a.ledger.size <= 3, `ledger entries: ${a.ledger.size}`)
  // Members took tokens from the seed (positions were held with them), and none is kept once they are forgotten:
  // at most one entry per seed account and key is left.
  t.true(positionsWithMembers > 0, 'the seed held positions with members while they ran')
  t.true(peakPositions <= 60, `positions never grew past a batch of members (${peakPositions})`)
  t.deepEqual([...a.positions.nodes()].filter(n => n !== 'b'), [])
  t.true(a.positions.size <= 1, `position entries left: ${a.positions.size}`)
  // They are exact, too: every live account's books agree with what the others' positions say.
  t.deepEqual(vc.positions.check(['api']), [])
  // Members were served. (What they spent returns to them on their schedule and is in their saved state:
  // members that never come back keep it, so later windows have less to give. That is stranded, not lost:
  // the audit below counts it on their disks.)
  t.true(admitted >= 100, `members were served (${admitted})`)
  const acct = vc.audit.account('api')
  t.true(Math.abs(acct.error) < 1e-6, `conservation: ${JSON.stringify(acct)}`)
})
