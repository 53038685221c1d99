/**
 * A member settled while a grant to it was in flight, and the grant's giver
 * then killed (kill -9) and restarted from its journal (chaos 3+2 seed 10:
 * every key overshot from 32 s on, 1,384 to 1,824 tokens over a run). The
 * settlement credits the giver with the grant; two ways its restart counted
 * the same tokens again:
 *
 * - the journal still named the grant (`sent`), and the restart took it
 *   back once the member's new incarnation said it never applied it;
 * - the restart, not yet having heard the member's new incarnation, settled
 *   the old one again, and with it the new one's account in its journal.
 *
 * Now a settlement goes to disk as a checkpoint (whose `sent` no longer
 * names the grant), a settled account's grants are never taken back, and
 * the journal names each account's incarnation. On the virtual clock.
 */
import test from 'ava'
import { BooksJournal, replayJournal } from '../src/cluster/journal.js'
import { EstateReturns } from '../src/cluster/estate-returns.js'
import { Reclaim } from '../src/cluster/reclaim.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'

const SCENARIO = 'paused-member-giver-crash'

// Seeds that overshot or created tokens before (hard), and that refused a member's honest push to the restarted
// giver (soft: its echoes of the old process were taken for the new one's).
for (const [mode, seed] of [['hard', 5], ['hard', 11], ['hard', 23], ['soft', 8]] as const) {
  test(`${SCENARIO} ${mode} seed ${seed}: nothing created, nothing over the limit, no honest grant refused`, t => {
    const r = runSim(propertySpec({ scenario: SCENARIO, mode, seed }))
    t.true(r.ok, r.failures.join('; '))
    t.is(r.overshoot, 0)
  })
}

test.serial('the scenario catches a settled account\'s grants taken back by the giver\'s restart', t => {
  const proto = EstateReturns.prototype as unknown as { receiverSettled: (to: string, toEpoch: string) => void }
  const real = proto.receiverSettled
  const incOf = BooksJournal.prototype.incOf
  const settle = Reclaim.prototype.settle
  proto.receiverSettled = () => {}
  BooksJournal.prototype.incOf = () => undefined
  // And the settlement written as a batch, as before (a checkpoint due anyway stays due).
  Reclaim.prototype.settle = function (this: Reclaim, node: string, inc: number, nowMs: number) {
    const j = (this as unknown as { c: { journal: BooksJournal } }).c.journal
    const due = j.checkpointNeeded
    settle.call(this, node, inc, nowMs)
    j.checkpointNeeded = due
  }
  try {
    const r = runSim(propertySpec({ scenario: SCENARIO, mode: 'hard', seed: 5 }))
    t.false(r.ok)
    t.true(r.failures.some(f => /credited \d+ more than the dead accounts held|overshoot/.test(f)), r.failures.join('; '))
  } finally {
    proto.receiverSettled = real
    BooksJournal.prototype.incOf = incOf
    Reclaim.prototype.settle = settle
  }
})

test.serial('the scenario catches a restart that settles a newer incarnation\'s account with the old one', t => {
  const incOf = BooksJournal.prototype.incOf
  BooksJournal.prototype.incOf = () => undefined
  try {
    // Seed 168: the timing the bug needs (seed 23 had it until 5c1acb8 moved the attestations; seeds 120, 168, 181 of
    // 1-300 have it now).
    const r = runSim(propertySpec({ scenario: SCENARIO, mode: 'hard', seed: 168 }))
    t.false(r.ok)
    // The member's new incarnation gives back what it holds of the giver's tokens; the giver credited them already.
    t.true(r.failures.some(f => /refused .* honest grant|positions:/.test(f)), r.failures.join('; '))
  } finally {
    BooksJournal.prototype.incOf = incOf
  }
})

test('the journal names each peer account\'s incarnation once per checkpoint, and a replay reads it back', t => {
  const j = new BooksJournal()
  const cp = { v: 1 as const, node: 'a', cluster: 'c', inc: 1, epoch: 'e1', carries: [], allocate: true, rules: [], keys: [] }
  let text = `${j.take(() => cp)?.checkpoint as string}\n`
  j.record('k', -3, true, ['m', 'm1', 1])
  j.record('k', 2, false, ['m', 'm2', 2])
  const first = j.take(() => cp)?.batch as string
  t.regex(first, /\["inc",\["m","m1"\],1\]/)
  t.regex(first, /\["inc",\["m","m2"\],2\]/)
  j.record('k', -1, true, ['m', 'm2', 2])
  const second = j.take(() => cp)?.batch as string
  t.notRegex(second, /"inc"/, 'named once')
  text += `${first}\n${second}\n`
  const r = replayJournal(text, 'j', 'a', 'c')
  t.is(r.incs.get('m\u0000m1'), 1)
  t.is(r.incs.get('m\u0000m2'), 2)
  // A checkpoint keeps the incarnations of the accounts it names, and forgets the rest.
  t.deepEqual(j.checkpointIncs([['m', 'm2', 'k', -1]]), [['m', 'm2', 2]])
  t.is(j.incOf('m', 'm1'), undefined)
  const back = replayJournal(`${JSON.stringify({ ...cp, peers: [['m', 'm2', 'k', -1]], incs: [['m', 'm2', 2]] })}\n`, 'j', 'a', 'c')
  t.is(back.incs.get('m\u0000m2'), 2)
  const bad = t.throws(() => replayJournal(`${JSON.stringify({ ...cp, incs: [['m', 'm2', 'x']] })}\n`, 'j', 'a', 'c'))
  t.regex(bad.message, /incs: must be a list of \[node, epoch, inc\]/)
})
