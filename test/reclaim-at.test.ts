/**
 * reclaimAt (cluster-protocol.md, "Invariants", I3), judged by the simulator's exact
 * oracle (src/sim/oracle.ts, written from the algorithms' definitions):
 * a dead node spends the whole stock at the last moment it could, with its
 * calendar as far ahead of the crediting node's as δ' allows; the heir then
 * spends the reclaimed stock the moment reclaimAt lets it. The oracle must
 * find no overshoot, and spending any earlier must overshoot (so the bound
 * is tight and the check is not blind).
 */
import test from 'ava'
import type { Algorithm } from '../src/config/types.js'
import { reclaimAt } from '../src/cluster/reclaim-at.js'
import { createBucket } from '../src/core/algorithms/index.js'
import { checkKey } from '../src/sim/oracle.js'
import type { Admission } from '../src/sim/types.js'
import { isQuotadError } from '../src/errors.js'

interface Case {
  perMs: number
  /** δ'. */
  skewMs: number
  /** True time of the move: the dead node's last possible spend. */
  tMove: number
  /** The heir's calendar minus true time. */
  heirOffset: number
  /** The dead node's calendar minus the heir's, within ±δ'. */
  deadAhead: number
  limit: number
}

/** A deterministic stream of cases (no Math.random: a failure must replay). */
function * cases (): Generator<Case> {
  let s = 12345
  const next = (): number => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 2 ** 32 }
  for (const perMs of [250, 1000, 60_000]) {
    for (const skewMs of [0, 50, 120]) {
      for (let i = 0; i < 20; i++) {
        const tMove = 1_800_000_000_000 + Math.floor(next() * 10 * perMs)
        const heirOffset = Math.round((next() * 2 - 1) * 100)
        // The dead node's calendar minus the heir's: anywhere in [-δ', δ'], often at the edge.
        const deadAhead = i % 3 === 0 ? skewMs : Math.round((next() * 2 - 1) * skewMs)
        yield { perMs, skewMs, tMove, heirOffset, deadAhead, limit: 1 + Math.floor(next() * 50) }
      }
    }
  }
}

function admit (at: number, local: number, node: string, count: number): Admission {
  return { at, local, node, key: 'k', count }
}

/** The dead node's whole stock spent at true time tMove (its last possible moment), then the heir's at `heirLocal`. */
function overshoot (algorithm: Algorithm, c: Case, heirLocal: number): number {
  const dead = admit(c.tMove, c.tMove + c.heirOffset + c.deadAhead, 'dead', c.limit)
  const heir = admit(heirLocal - c.heirOffset, heirLocal, 'heir', c.limit)
  const rule = { algorithm, limit: c.limit, perMs: c.perMs, burst: c.limit }
  // As the simulator does: the skew allowed is the largest offset seen.
  const maxSkewMs = Math.max(Math.abs(dead.local - dead.at), Math.abs(heir.local - heir.at))
  return checkKey(rule, [dead, heir], { maxSkewMs }).overshoot
}

for (const algorithm of ['fixed-window', 'sliding-window', 'sliding-log'] as const) {
  test(`${algorithm}: tokens spent at reclaimAt never overshoot the exact limiter; earlier ones can`, t => {
    let tight = 0
    for (const c of cases()) {
      const cal = c.tMove + c.heirOffset
      const r = reclaimAt({ algorithm, perMs: c.perMs }, cal, c.skewMs)
      if (r.kind !== 'deferred') return t.fail(`${algorithm} is deferred`)
      t.true(r.at > cal, 'never spendable at once')
      t.is(overshoot(algorithm, c, r.at), 0, JSON.stringify({ ...c, at: r.at }))
      // At the edge of the skew the bound is tight: one step earlier, the dead node's spend still counts.
      if (c.deadAhead === c.skewMs) {
        // (sliding-log is judged in true time, where the dead node's spend was at the move: δ' is pure margin.)
        const earlier = algorithm === 'fixed-window' ? r.at - 1 : algorithm === 'sliding-window' ? r.at - c.perMs : r.at - c.skewMs - 1
        if (overshoot(algorithm, c, earlier) > 0) tight++
      }
    }
    t.true(tight > 30, `earlier credits overshoot in the edge cases (${tight})`)
  })
}

test('fixed-window: the next window after c + δ\', which may be the window after next', t => {
  t.deepEqual(reclaimAt({ algorithm: 'fixed-window', perMs: 1000 }, 10_200, 500), { kind: 'deferred', at: 11_000 })
  t.deepEqual(reclaimAt({ algorithm: 'fixed-window', perMs: 1000 }, 10_600, 500), { kind: 'deferred', at: 12_000 })
  t.deepEqual(reclaimAt({ algorithm: 'sliding-window', perMs: 1000 }, 10_200, 500), { kind: 'deferred', at: 12_000 })
  t.deepEqual(reclaimAt({ algorithm: 'sliding-log', perMs: 1000 }, 10_200, 500), { kind: 'deferred', at: 11_700 })
})

test('token-bucket: reclaimed capacity arrives empty and refills at its rate; the cluster stays within burst + rate·t', t => {
  for (const c of cases()) {
    const r = reclaimAt({ algorithm: 'token-bucket', perMs: c.perMs }, c.tMove + c.heirOffset, c.skewMs)
    if (r.kind !== 'empty-capacity') return t.fail('token-bucket credits capacity')
    const rule = { algorithm: 'token-bucket' as const, limit: c.limit, perMs: c.perMs, burst: c.limit }
    // The heir's bucket, as the core would hold it: no capacity of this key, then the dead node's whole burst.
    const heirRun = (empty: boolean): number => {
      const b = createBucket('token-bucket', { limit: c.limit, perMs: c.perMs, burst: c.limit, share: 0 }, c.tMove)
      b.credit(c.limit)
      if (empty) b.forceSpend(c.limit, c.tMove)
      // The dead node emptied its full bucket at its last moment; the heir spends every token the moment it has one.
      const list = [admit(c.tMove, c.tMove, 'dead', c.limit)]
      const step = c.perMs / c.limit / 4
      for (let now = c.tMove; now <= c.tMove + 2 * c.perMs; now += step) {
        while (b.trySpend(1, now)) list.push(admit(now, now, 'heir', 1))
      }
      t.true(list.length > c.limit, 'the heir admitted as its bucket refilled')
      return checkKey(rule, list, { maxSkewMs: 0 }).overshoot
    }
    t.is(heirRun(true), 0, JSON.stringify(c))
    // Credited full instead, the heir would spend the burst a second time at once.
    t.true(heirRun(false) > 0)
  }
})

test('bad arguments are refused with E_BAD_ARGUMENT, naming the argument', t => {
  const bad = [
    () => reclaimAt({ algorithm: 'fixed-window', perMs: 0 }, 1, 0),
    () => reclaimAt({ algorithm: 'fixed-window', perMs: 1000 }, Number.NaN, 0),
    () => reclaimAt({ algorithm: 'sliding-log', perMs: 1000 }, 1, -1),
    () => reclaimAt({ algorithm: 'nope' as Algorithm, perMs: 1000 }, 1, 0)
  ]
  const paths = ['rule.perMs', 'calMs', 'skewMs', 'rule.algorithm']
  bad.forEach((f, i) => {
    const err = t.throws(f)
    t.true(isQuotadError(err) && err.code === 'E_BAD_ARGUMENT')
    t.deepEqual((err as { details?: unknown }).details, { path: paths[i] })
  })
})
