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
