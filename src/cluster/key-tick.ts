/**
 * One tick of one active key (ClusterCore.tick): deferred tokens due, burns
 * owed, its rates, debt repaid, reserve and pacing, and rebalancing; and
 * whether it has gone quiet (then it leaves the active set until next used).
 * Pure, like the core: time comes in as arguments.
 */
import type { KeyState } from '../core/limiter.js'
import { homeOf } from '../core/share.js'
import { updateReserve } from './caution.js'
import type { ClusterCore } from './cluster-core.js'
import { applyDeferred, ext, updateRate } from './key-ext.js'
import { repayDebt, updatePacing } from './local-policy.js'
import { rebalance } from './rebalance.js'

/** What a tick knows of the whole node, computed once for all its keys. */
export interface TickFrame {
  nowMs: number
  /** Time since the last tick. */
  dt: number
  /** The calendar at `nowMs`. */
  cal: number
  /** No peer alive (soft mode's policies; debts wait). */
  isolated: boolean
  /** Running, not isolated and not fenced: tokens may move. */
  moving: boolean
}

/** Tick `ks`; true when it has gone quiet (nothing left to do or say for it). */
export function tickKey (c: ClusterCore, ks: KeyState, f: TickFrame): boolean {
  const x = ext(ks)
  if (applyDeferred(ks, x, f.cal)) c.limiter.touched(ks, f.nowMs)
  c.burn(ks, x, f.nowMs)
  updateRate(x, f.dt, c.tuning.rateHalfLifeMs, 2 * c.tuning.tickMs)
  if (x.debt > 0 && !f.isolated) repayDebt(ks, x, f.nowMs)
  ks.bucket.advance(f.nowMs)
  updateReserve(c.caution, ks, f.nowMs)
  const tight = c.seeds.length > 1 && c.view.clusterRemaining(ks, f.nowMs) < c.tuning.lowWater * ks.rule.stock
  updatePacing(ks, x, tight, f.dt, f.cal)
  if (f.moving) rebalance(c, ks, x, f.nowMs)
  if (!quiet(c, ks, f.nowMs)) return false
  x.tight = false // recomputed when the key is next used
  return true
}

/** Nothing to tell or do for a key: no rate, demand, debt, deferred or owed tokens, no want out, its held announced. */
function quiet (c: ClusterCore, ks: KeyState, nowMs: number): boolean {
  const x = ext(ks)
  return x.rate === 0 && x.fastRate === 0 && x.demand === 0 && x.debt === 0 && x.deferred === null && x.burn === 0 &&
    x.wantSentAt + c.tuning.wantTimeoutMs < nowMs &&
    x.sentHeld === ks.bucket.held && x.sentOwed === 0 && !owesHome(c, ks)
}

/** A glob key holding tokens away from its home stays active until it has gone back. */
export function owesHome (c: ClusterCore, ks: KeyState): boolean {
  return ks.rule.glob && ks.bucket.held >= 1 && homeOf(ks.key, c.seeds, c.heir.homes) !== c.node
}
