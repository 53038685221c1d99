/**
 * A carrier (reclaim.ts `echoCounts`): a seed restarted from its journal
 * carries its crashed incarnation's books. One voter that had lost it
 * before the crash attests the crashed incarnation; the other voters heard
 * the restart first, so they never will. The carrier keeps its books (its
 * share), gets its lease from the voters that do not attest, and nothing is
 * created or lost. Before, it dropped its books at the one attestation, and
 * since no quorum ever attested the crashed incarnation, no heir inherited
 * them: the share was lost for good. On the simulator's virtual clock.
 */
import test from 'ava'
import { booksOf } from '../src/cluster/key-ext.js'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'
import { load } from './helpers/sim-load.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const STOCK = 100
const SEEDS = ['a', 'b', 'c', 'd', 'e']

test('a restart that one voter attests the crashed incarnation of keeps its books when the other voters heard it first', t => {
  const vc = new VirtualCluster({
    nodes: [...SEEDS], seeds: [...SEEDS], rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })], limits: limits(), seed: 7, startMs: T0 + 100
  })
  load(vc, 2000, { a: 10, b: 10, c: 10 })
  const reclaimMs = vc.cores.get('a')?.tuning.reclaimMs as number
  // b stops hearing a; a crashes just before b's silence reaches reclaimMs, so only b attests a/1.
  vc.partition('a', 'b')
  load(vc, reclaimMs - 500, { b: 10, c: 10 })
  const crashed = vc.cores.get('a')
  const books = booksOf(crashed?.limiter.existing('api') as never)
  t.true(books > 0, `a holds ${books}`)
  vc.crash('a')
  vc.runUntil(vc.now + 1000)
  t.is(vc.cores.get('b')?.reclaim.attested.get('a'), 1, 'b attests a/1')
  for (const s of ['c', 'd', 'e']) t.false(vc.cores.get(s)?.reclaim.attested.has('a'), `${s} does not`)
  // a restarts from its journal, carrying a/1, and hears b again.
  vc.start('a')
  vc.heal()
  load(vc, 3000, { a: 10, c: 10 })
  const a = vc.cores.get('a')
  t.is(a?.incarnation, 2)
  t.is(a?.recovery !== null, true, 'a recovered its books from the journal')
  t.false(a?.reclaim.droppedCarried, 'the carried books are kept')
  t.true(a?.limiter.allocate, 'and the share with them')
  t.false(a?.fence.fenced, 'a holds a lease (from the voters that do not attest a/1)')
  for (const s of ['c', 'd', 'e']) t.false(vc.cores.get(s)?.reclaim.attested.has('a'), `${s} never attests a/1: it heard a/2 first`)
  for (const s of SEEDS.slice(1)) t.false(vc.cores.get(s)?.reclaim.isSettled('a', 1), `${s} did not settle a/1`)
  const acct = vc.audit.account('api')
  t.true(Math.abs(acct.error) < 1e-6, `nothing created or lost: ${JSON.stringify(acct)}`)
  t.true(acct.stranded < 1e-6, `nothing stranded once a/2's books are back: ${JSON.stringify(acct)}`)
})

/**
 * Chaos seed 8: a seed paused past reclaimMs was attested and inherited, came back as a new incarnation without a
 * share (dropping the attested one's books), took tokens from its peers, and was restarted cleanly. The restart
 * carried both earlier incarnations, and the voters' standing attestation of the first made it drop the second's
 * books too, its own: 129 tokens lost for good. Now an incarnation that settled what it carried saves that only
 * its own books are at risk (`carriedAtRisk`), and the restart keeps them.
 */
test('a clean restart after an inherited incarnation came back keeps the books of the one that came back', t => {
  const seeds = ['a', 'b', 'c']
  const vc = new VirtualCluster({
    nodes: [...seeds], seeds: [...seeds], rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })], limits: limits(), seed: 11, startMs: T0 + 100,
    tuning: { inheritSeeds: true }
  })
  load(vc, 2000, { a: 10, b: 10, c: 10 })
  const reclaimMs = vc.cores.get('a')?.tuning.reclaimMs as number
  vc.pause('c', 2 * reclaimMs)
  load(vc, 2 * reclaimMs + 3000, { a: 10, b: 10 })
  const back = vc.cores.get('c')
  t.true(back !== undefined && back.incarnation === 2 && !back.limiter.allocate, 'c came back as a new incarnation without a share')
  t.true(back?.reclaim.droppedCarried, 'and dropped the attested one\'s books')
  // All the demand at c: its peers give it tokens, its own now.
  load(vc, 3000, { c: 60 })
  const held = booksOf(back?.limiter.existing('api') as never)
  t.true(held > 0, `c holds ${held}`)
  vc.stop('c')
  for (let i = 0; i < 100 && vc.nodes.get('c')?.state !== 'stopped'; i++) vc.runUntil(vc.now + 100)
  vc.start('c')
  load(vc, 3000, { c: 5 })
  const again = vc.cores.get('c')
  t.is(again?.incarnation, 3)
  t.is(again?.carriedAtRisk, 1, 'only the incarnation that came back is at risk')
  t.false(again?.reclaim.droppedCarried, 'its books are kept')
  vc.runUntil(vc.now + 3000)
  const acct = vc.audit.account('api')
  t.true(Math.abs(acct.error) < 1e-6, `nothing created or lost: ${JSON.stringify(acct)}`)
})
