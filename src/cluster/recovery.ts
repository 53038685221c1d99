/**
 * Recovery after a crash (journal.ts): the restarted incarnation gets back
 * the books its crashed predecessor had, but spends none of them before
 * every spend the predecessor could have made has returned. Pure.
 *
 * The predecessor's last spend was before this process started (one process
 * per data directory: node/data-lock.ts), at a calendar time of at most
 * `calStart + skew`, where `calStart` is this incarnation's calendar at its
 * start and `skew` (`cluster.maxClockSkewMs`) bounds how far the crashed
 * process's calendar could have run ahead of this one's (the calendar
 * follows the wall clock within bounds: core/calendar.ts). Its books were
 * held and spent tokens alike, and the journal can't tell them apart; so
 * every restored token is deferred to the rule's horizon, the first moment
 * a spend at `calStart + skew` has returned (reclaim-at.ts):
 *
 *   fixed-window    the start of the window after the one holding it
 *   sliding-window  one window later still
 *   sliding-log     calStart + skew + per
 *   token-bucket    calStart + skew + per × burst / limit: an emptied
 *                   bucket has refilled in full
 *
 * The same holds for a share this incarnation materializes for the first
 * time (a glob key at its home, an exact key not in the journal because its
 * books equalled its share): the predecessor may have materialized and spent
 * it. Before the horizon, such a share goes in as a deferred credit too.
 * After it, keys materialize as on any start.
 */
import type { RuleConfig } from '../config/types.js'
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { ext } from './key-ext.js'
import { reclaimAt } from './reclaim-at.js'

/**
 * The first calendar time at which a spend made at or before `calMs + skewMs`
 * (by a process that is gone now) has returned: reclaimAt's table, and for a
 * token bucket (reclaimAt's "empty capacity") the time an emptied bucket
 * takes to refill in full, `per × burst / limit` (a burst above the limit
 * refills over more than one period).
 */
export function horizonAt (rule: Pick<RuleConfig, 'algorithm' | 'perMs' | 'limit' | 'burst'>, calMs: number, skewMs: number): number {
  const r = reclaimAt(rule, calMs, skewMs)
  return r.kind === 'deferred' ? r.at : calMs + skewMs + rule.perMs * Math.max(1, rule.burst / rule.limit)
}

/**
 * Credit `n` tokens of `key` that a process that is gone may have spent
 * (a dead seed's grant taken back): deferred to `horizonAt`, journaled, the
 * key active. A key this node can make no state for (no rule, a full table)
 * counts them stranded instead. Returns whether they were credited.
 */
export function creditAtHorizon (c: ClusterCore, key: string, n: number, nowMs: number): boolean {
  let ks: KeyState
  try {
    ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
  } catch {
    c.ledger.stranded += n
    return false
  }
  ;(ext(ks).deferred ??= []).push([n, horizonAt(ks.rule.config, c.calendar.at(nowMs), c.tuning.maxClockSkewMs)])
  c.journal.record(key, n, false)
  c.active.add(ks)
  return true
}

export class Recovery {
  /** This incarnation's calendar at its start. */
  readonly calStartMs: number
  readonly skewMs: number
  /** Tokens restored from the journal, and shares deferred at materialization (status). */
  restoredTokens = 0
  deferredShares = 0

  constructor (calStartMs: number, skewMs: number) {
    this.calStartMs = calStartMs
    this.skewMs = skewMs
  }

  /** The calendar time from which tokens of `rule` restored or materialized now may be spent. */
  horizon (rule: Pick<RuleConfig, 'algorithm' | 'perMs' | 'limit' | 'burst'>): number {
    return horizonAt(rule, this.calStartMs, this.skewMs)
  }

  /**
   * A key's state was just created with its share in the bucket: before the
   * horizon, move the share to a deferred credit. Returns whether it did.
   */
  materialized (ks: KeyState, calMs: number): boolean {
    if (ks.initial <= 0) return false
    const at = this.horizon(ks.rule.config)
    if (at <= calMs) return false
    const moved = ks.bucket.debit(ks.initial)
    if (moved <= 0) return false
    const x = ext(ks)
    ;(x.deferred ??= []).push([moved, at])
    this.deferredShares += moved
    return true
  }
}
