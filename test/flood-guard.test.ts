/**
 * The transport's flood guard (src/cluster/transport/flood-guard.ts) on its
 * own, with time passed in: an honest origin's pace never goes over; a
 * flooder's own peer id is penalised, a relay of its flood only ignored; a
 * listed node is never penalised; the penalty ends; memory stays bounded.
 */
import test from 'ava'
import { FloodGuard } from '../src/cluster/transport/flood-guard.js'

function guard (exempt: string[] = [], maxOrigins = 100): FloodGuard {
  return new FloodGuard({ perSecond: 32, burst: 128, penaltyMs: 30_000, maxOrigins, exempt: id => exempt.includes(id) })
}

test('an honest pace (two gossips every 250 ms, for an hour) and 16 s of it at once are accepted', t => {
  const g = guard()
  for (let ms = 0; ms < 3_600_000; ms += 250) {
    t.is(g.judge('seed', 'seed', ms), 'accept')
    t.is(g.judge('seed', 'seed', ms), 'accept')
  }
  // 16 s of gossip held back, then delivered at once (relayed, then direct).
  const late = 3_600_000 + 16_000
  for (let i = 0; i < 128; i++) t.is(g.judge('member', i % 2 === 0 ? 'seed' : 'member', late), 'accept')
  t.deepEqual(g.counters, { gossipOverBudget: 0, floodPenalties: 0, floodRefusals: 0 })
})

test('a flood signed by its sender: past the burst each message is rejected and the sender penalised once, until the penalty ends', t => {
  const g = guard()
  const penalised: string[] = []
  const verdicts = Array.from({ length: 1000 }, (_, i) => g.judge('rogue', 'rogue', i / 10, id => penalised.push(id)))
  t.true(verdicts.slice(0, 128).every(v => v === 'accept')) // the burst
  t.is(verdicts.filter(v => v === 'accept').length, 131) // and 100 ms of the average, as it drains
  t.is(verdicts.filter(v => v === 'reject').length, 869) // never only ignored: it sent them itself
  t.deepEqual(penalised, ['rogue'])
  t.deepEqual(g.counters, { gossipOverBudget: 869, floodPenalties: 1, floodRefusals: 0 })
  t.true(g.penalised('rogue', 29_000))
  t.true(g.refuses('rogue', 29_000))
  t.false(g.refuses('seed', 29_000))
  t.is(g.counters.floodRefusals, 1)
  t.is(g.penalisedNow(29_000), 1)
  t.false(g.penalised('seed', 29_000))
  // Penalty over: its budget refilled meanwhile; flooding on is penalised again.
  t.false(g.penalised('rogue', 30_200))
  t.is(g.judge('rogue', 'rogue', 30_200), 'accept')
  for (let i = 0; i < 200; i++) g.judge('rogue', 'rogue', 30_200)
  t.is(g.counters.floodPenalties, 2)
})

test('a flood relayed by an honest peer is ignored, never held against the relay; a listed node is never penalised', t => {
  const g = guard(['seed-b'])
  const penalised: string[] = []
  for (let i = 0; i < 500; i++) t.not(g.judge('rogue', 'seed-b', 0, id => penalised.push(id)), 'reject')
  t.is(g.judge('rogue', 'seed-b', 0), 'ignore')
  for (let i = 0; i < 500; i++) t.not(g.judge('seed-b', 'seed-b', 0, id => penalised.push(id)), 'reject')
  t.deepEqual(penalised, [])
  t.false(g.penalised('seed-b', 0))
  t.is(g.counters.floodPenalties, 0)
  t.true(g.counters.gossipOverBudget > 0)
})

test('budgets of at most maxOrigins origins are kept: minted keys evict the least recently heard, which only refills them', t => {
  const g = guard([], 10)
  for (let i = 0; i < 128; i++) g.judge('old', 'old', 0)
  t.is(g.judge('old', 'old', 0), 'reject')
  for (let i = 0; i < 10; i++) t.is(g.judge(`minted${i}`, 'rogue', 0), 'accept')
  // 'old' was evicted: it starts over with a full budget (its penalty, a separate map, stays).
  t.is(g.judge('old', 'relay', 0), 'accept')
  t.true(g.penalised('old', 0))
})
