/**
 * The simulator's shared vocabulary. Times are absolute milliseconds of true
 * (virtual) time unless a field says `local` (the admitting node's clock,
 * which differs from true time by that node's skew).
 */

/** One request a load process makes: `count` tokens of `key` at node `node`. */
export interface Arrival {
  at: number
  node: string
  key: string
  count: number
}

/** One admitted request, as the invariant checker sees it. */
export interface Admission {
  /** True time. */
  at: number
  /** The admitting node's clock at that moment (true time + its skew). */
  local: number
  node: string
  key: string
  count: number
}

/** The hot spot moved to `node` at `at` (moving-hot-spot loads; for the follow-time figure). */
export interface HotMove {
  at: number
  node: string
}

/**
 * A rule change in a run: the nodes applied `rules` between true times
 * `from` (the first node) and `to` (the last).
 */
export interface RuleChange {
  from: number
  to: number
  rules: import('../config/types.js').RuleConfig[]
}

/** The rule facts the oracle needs (a compiled rule's algorithm and numbers). */
export interface OracleRule {
  algorithm: 'fixed-window' | 'sliding-window' | 'sliding-log' | 'token-bucket'
  limit: number
  perMs: number
  /** Token bucket capacity (the other algorithms ignore it). */
  burst: number
  /**
   * Limit changes, in true time: from `to` on, `limit` and `burst` hold;
   * while the nodes are changing over (`from` to `to`), the larger of the
   * old and new values (nodes not yet changed still enforce the old rule).
   */
  changes?: Array<{ from: number, to: number, limit: number, burst: number }>
}
