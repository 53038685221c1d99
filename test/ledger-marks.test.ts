/**
 * The receiver's marks (src/cluster/ledger-marks.ts) when a giver's old
 * incarnation is settled dead: its grants are refused and its marks go, but
 * the marks of the giver's later incarnations stay. A restart that settled
 * an old incarnation late once dropped the live one's mark too, and every
 * grant of that pair was a gap from then on (sim chaos 5 seeds seed 34).
 */
import test from 'ava'
import { AppliedMarks } from '../src/cluster/ledger-marks.js'
import type { Grant } from '../src/cluster/messages.js'
import { CLUSTER_VERSION } from '../src/cluster/messages.js'

const grant = (epoch: string, inc: number, seq: number): Grant => ({ v: CLUSTER_VERSION, t: 'grant', node: 'g', epoch, inc, to: 'r', toEpoch: 'r.1', seq, items: [['api', 1, 0]] })

test('settling a giver\'s old incarnation keeps its newer incarnations\' marks', t => {
  const m = new AppliedMarks()
  t.is(m.apply(grant('g.1', 1, 1), 'g.1').result, 'applied')
  t.is(m.apply(grant('g.3', 3, 1), 'g.3').result, 'applied')
  t.is(m.apply(grant('g.3', 3, 2), 'g.3').result, 'applied')
  m.deadGiver('g', 1, new Set(['g.3']))
  // The settled incarnation's marks went and its grants are refused.
  t.is(m.appliedFrom('g', 'g.1'), 0)
  t.is(m.apply(grant('g.1', 1, 2), 'g.3').result, 'old-epoch')
  // The live one goes on where it was: seq 3 is next, not a gap.
  t.is(m.appliedFrom('g', 'g.3'), 2)
  t.is(m.apply(grant('g.3', 3, 3), 'g.3').result, 'applied')
})

test('sabotage: without the newer epochs named, the live incarnation\'s mark goes and its next grant waits on a gap', t => {
  const m = new AppliedMarks()
  m.apply(grant('g.3', 3, 1), 'g.3')
  m.deadGiver('g', 1)
  t.is(m.appliedFrom('g', 'g.3'), 0)
  t.not(m.apply(grant('g.3', 3, 2), 'g.3').result, 'applied')
})
