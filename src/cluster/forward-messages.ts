/**
 * A member's request decided at a seed (rules with `"decide": "seeds"`,
 * forward.ts), and the seed's answer.
 *
 * - fwd (request, member -> seed): "decide this acquire of `count` of `key`
 *   as your own" (waiting up to `wait` ms for tokens, as the client asked).
 *   `id` is the member's, echoed in the answer.
 * - fans (its answer): the seed's decision, as it would answer its own
 *   client. `allowed` false with `code` set: the seed did not decide (not a
 *   seed, not running, no rule for the key).
 *
 * Both go as msgpack arrays (request-codec.ts LAYOUT), fields in this order.
 */
import type { Decision } from '../core/types.js'
import { bad, key, name, num, seq, type MessageBounds } from './message-fields.js'

export interface Fwd {
  v: number
  t: 'fwd'
  node: string
  epoch: string
  inc: number
  id: number
  key: string
  count: number
  /** The client's `waitMs`: the seed may hold the acquire this long for tokens, as for its own client. Absent: 0. */
  wait?: number
}

/** The seed's decision, with the fields of an `acquire` reply (the client package's Decision). */
export interface Fans extends Decision {
  v: number
  t: 'fans'
  node: string
  epoch: string
  inc: number
  id: number
  /** Why the seed did not decide (E_NOT_SEED, E_NO_RULE, E_NOT_RUNNING); absent when it did. */
  code?: string
}

/** The decision an answer carries, as the member's client gets it. */
export function decisionOf (f: Fans): Decision {
  return { allowed: f.allowed, remaining: f.remaining, limit: f.limit, resetMs: f.resetMs, retryAfterMs: f.retryAfterMs, rule: f.rule }
}

/** Longest wait a forwarded acquire may ask of a seed: the largest `limits.maxWaitMs` (the seed's own bound applies too). */
export const MAX_FORWARD_WAIT_MS = 2_147_483_647

/** Most tokens one forwarded acquire may ask for: the socket protocol's own bound on `count`. */
export const MAX_FORWARD_COUNT = 1_000_000_000

export function parseFwd (m: Record<string, unknown>, b: MessageBounds, v: number, node: string, epoch: string): Fwd {
  const count = seq(m.count, 'count')
  if (count < 1 || count > MAX_FORWARD_COUNT) bad(`count must be 1..${MAX_FORWARD_COUNT}`)
  const wait = m.wait === undefined ? 0 : seq(m.wait, 'wait')
  if (wait > MAX_FORWARD_WAIT_MS) bad(`wait must be at most ${MAX_FORWARD_WAIT_MS}`)
  return { v, t: 'fwd', node, epoch, inc: seq(m.inc, 'inc'), id: seq(m.id, 'id'), key: key(m.key, b), count, ...(wait > 0 ? { wait } : {}) }
}

export function parseFans (m: Record<string, unknown>, v: number, node: string, epoch: string): Fans {
  if (typeof m.allowed !== 'boolean') bad('allowed must be a boolean')
  const retryAfterMs = m.retryAfterMs === -1 ? -1 : num(m.retryAfterMs, 'retryAfterMs')
  const rule = m.rule === '' ? '' : name(m.rule, 'rule')
  const code = m.code === undefined ? undefined : name(m.code, 'code')
  return {
    v, t: 'fans', node, epoch, inc: seq(m.inc, 'inc'), id: seq(m.id, 'id'), allowed: m.allowed, remaining: num(m.remaining, 'remaining'),
    limit: num(m.limit, 'limit'), resetMs: num(m.resetMs, 'resetMs'), retryAfterMs, rule, ...(code === undefined ? {} : { code })
  }
}
