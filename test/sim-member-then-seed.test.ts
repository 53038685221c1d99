/**
 * A member dies, then the seed that lent it tokens (issue 11 §4, on the
 * simulator's virtual clock). The survivors settle the member first: each
 * credits what the member held of its own tokens. What it held of the
 * seed's tokens is in the seed's books as lent (its copy's `peers`); when
 * the seed's heir inherits it after that, the member is gone already, so
 * the heir credits those tokens at once instead of waiting for the member
 * to give them back (heir.ts). Nothing is created, and what stays lost is
 * less than what the member held of the seed's tokens.
 */
import test from 'ava'
import { booksOf } from '../src/cluster/key-ext.js'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'
import { load } from './helpers/sim-load.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const STOCK = 90

test('a member killed, then the seed it borrowed from: the heir credits what the member held of the seed\'s tokens', t => {
  let checked = 0
  for (let seed = 1; seed <= 8 && checked < 3; seed++) {
    const vc = new VirtualCluster({
      nodes: ['a', 'b', 'c', 'm'], seeds: ['a', 'b', 'c'], rules: [rule({ name: 'api', limit: STOCK, perMs: 1000 })], limits: limits(), seed, startMs: T0 + 100
    })
    load(vc, 3000, { a: 5, m: 120 })
    const c = vc.cores.get('c')
    const m = vc.cores.get('m')
    if (c === undefined || m === undefined) throw new Error('no core')
    // What m holds of c's tokens, as c's positions say (negative: m holds them).
    const fromC = -c.positions.of('m', m.epoch, 'api')
    if (fromC < 5) continue
    checked++
    vc.crash('m')
    load(vc, 300, { a: 5, b: 5 })
    vc.crash('c')
    const reclaimMs = vc.cores.get('a')?.tuning.reclaimMs as number
    load(vc, reclaimMs + 5000, { a: 5, b: 5 })
    const a = vc.cores.get('a')
    t.is(a?.heir.counters.inherited, 1, `seed ${seed}: a inherited c`)
    t.true(a?.reclaim.isSettled('m', 1), `seed ${seed}: a settled m`)
    const acct = vc.audit.account('api')
    t.true(Math.abs(acct.error) < 1e-6, `seed ${seed}: nothing created or lost unaccounted: ${JSON.stringify(acct)}`)
    t.true(acct.stranded < fromC, `seed ${seed}: m held ${fromC} of c's tokens; lost for good ${acct.stranded}`)
    let live = 0
    for (const n of ['a', 'b']) {
      const ks = vc.cores.get(n)?.limiter.existing('api')
      live += ks === undefined ? STOCK / 3 : booksOf(ks)
    }
    t.log(`seed ${seed}: m held ${fromC} of c's tokens; a and b hold ${live} of ${STOCK}, lost ${acct.stranded}`)
  }
  t.is(checked, 3, 'three runs where m held some of c\'s tokens')
})
