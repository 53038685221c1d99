/**
 * A member's request decided at a seed (rules with `"decide": "seeds"`,
 * forward.ts), and the seed's answer, as they go on a call session
 * (`/quotad/forward/5.0.0`, transport/calls.ts): msgpack arrays, fields in
 * this order, trailing optional fields left off.
 *
 * - fwd (member -> seed): "decide this acquire of `count` of `key` as your
 *   own", waiting up to `wait` ms for tokens, as the client asked, and,
 *   with `more`, "spend up to `more` more for me in this window" (credit:
 *   forward.ts). Three forms (the key's number: forward-names.ts):
 *   named `[number, key, count, wait, more]` (`count` left off too when
 *   it is 1 and nothing follows); by number `[number, count, wait,
 *   more]`, or the number alone for one token with no wait and no credit
 *   asked; plain `[key, count, wait, more]`.
 * - fans (the answer): the seed's decision, as it would answer its own
 *   client: 2 × `remaining` + the window's parity alone, admitted in the
 *   window the member knows (forward-names.ts; one byte up to 63
 *   remaining, whatever the parity); a boolean, denied with nothing
 *   remaining until the end of the window the member knows (`retryAfterMs`
 *   = `resetMs`), its parity (true: 1); nil, denied with nothing remaining
 *   and no time known (`[0, 0, -1]`, what a seed holding none of the key
 *   says); `[remaining, resetMs]` admitted (a window of parity 1 in the
 *   sign of resetMs: -1 - resetMs), `[remaining, resetMs, retryAfterMs]`
 *   denied, else `[allowed, remaining, resetMs, retryAfterMs, code, credit,
 *   creditMs]`. With `code` (E_NOT_MEMBER,
 *   E_NOT_SEED, E_NOT_RUNNING, E_KEY_UNNAMED, E_NO_RULE, ...) the seed did
 *   not decide. `credit`: tokens the seed spent for the member besides
 *   `count` (`code` is nil then), which the member may admit until
 *   `creditMs` after it sent the fwd: the seed's lease's time left, when
 *   shorter than `resetMs` (left off when not).
 *
 * What either end knows already is not sent (before version 9's calls, a
 * fwd and its fans were 75 bytes on their own stream; 16 to 20 with the
 * call ids of `/quotad/forward/1.0.0`; about 9 + 9 with their frame
 * headers in 2.0.0; 3 + 7 by number in 3.0.0):
 * - the version: the session's protocol id says it (`/quotad/forward/2.0.0`
 *   dropped the `v` each payload had in 1.0.0);
 * - the key, once the seed has read its name (forward-names.ts);
 * - who asks: the seed reads the member's name from the session's peer id
 *   (membership.ts, the name bound to it); the call id pairs the answer;
 * - the rule's name and `limit`: the member routes a key only to seeds that
 *   agree on its rule's hash (forward.ts `route`), so its own rule's are the
 *   seed's.
 */
import type { Decision } from '../core/types.js'
import { bad, DEFAULT_BOUNDS, key, name, num, seq, type MessageBounds } from './message-fields.js'
import { wire } from './wire.js'
import { MAX_NUMBERS } from './forward-names.js'

/** A member's acquire. `node`: the member (at the seed, the name bound to the session's peer id; never sent). */
export interface Fwd {
  node: string
  key: string
  count: number
  /** The client's `waitMs`: the seed may hold the acquire this long for tokens, as for its own client. Absent: 0. */
  wait?: number
  /** Credit asked: at most this many more tokens the seed may spend for the member in this window (forward.ts). Absent: none. */
  more?: number
  /** At the member: its rule's hash when it routed the fwd (never sent): credit under another comes to nothing. */
  ruleHash?: string
  /** The key's number between this member and this seed (forward-names.ts). Absent: the key goes in full. */
  ref?: number
  /** Send the key with its number: the seed has not answered a frame that named it yet. */
  naming?: boolean
  /**
   * Sent on by one of a glob key's two seeds, out of tokens, to the other
   * (forward.ts `partnerFor`): the other decides it here, sends it nowhere
   * else, and counts it in no demand of its own (it is the sender's
   * clients' and members', counted there). On the wire, the key's number as
   * `-1 - number` (a seed's own fwds always have a number but when out of
   * numbers: then it is sent plain, and counted as demand).
   */
  moved?: boolean
}

/** The seed's answer: a decision without the rule's name and limit (the member's own), or a refusal with `code`. */
export interface Fans {
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  /** Why the seed did not decide (E_NOT_SEED, E_NO_RULE, E_NOT_RUNNING, E_NOT_MEMBER); absent when it did. */
  code?: string
  /** Tokens spent for the member besides the acquire's own, for it to admit within this window (forward.ts). Absent: none. */
  credit?: number
  /** How long the credit is good from the decision, when less than `resetMs`: the seed's lease's time left. Absent: `resetMs`. */
  creditMs?: number
  /**
   * An admission sent as the bare `remaining`, or a denial until the
   * window's end as a boolean: its window ends where the last whole
   * admission under this rule said (forward-names.ts), so `resetMs` (and a
   * denial's `retryAfterMs`) is not sent and reads 0 here until the member
   * fills it in.
   */
  known?: boolean
  /** The parity of a plain admission's window, or a bare denial's (forward-names.ts), 1 or absent (0). Sent as encodeFans says. */
  parity?: number
}

/** Longest wait a forwarded acquire may ask of a seed: the largest `limits.maxWaitMs` (the seed's own bound applies too). */
export const MAX_FORWARD_WAIT_MS = 2_147_483_647

/** Most tokens one forwarded acquire may ask for: the socket protocol's own bound on `count`. */
export const MAX_FORWARD_COUNT = 1_000_000_000

export function encodeFwd (f: Fwd): Uint8Array {
  const wait = f.wait !== undefined && f.wait > 0 ? f.wait : 0
  const more = f.more !== undefined && f.more > 0 ? f.more : 0
  const n = f.ref === undefined ? undefined : f.moved === true ? -1 - f.ref : f.ref
  // Named: its number, the key, and the fields after them that are not 1, 0, 0.
  if (n !== undefined && f.naming === true) {
    if (more > 0) return wire.pack([n, f.key, f.count, wait, more])
    if (wait > 0) return wire.pack([n, f.key, f.count, wait])
    return wire.pack(f.count === 1 ? [n, f.key] : [n, f.key, f.count])
  }
  const head = n ?? f.key
  // Bare: the number alone is one token, no wait, no credit asked.
  if (n !== undefined && f.count === 1 && wait === 0 && more === 0) return wire.pack(n)
  if (more > 0) return wire.pack([head, f.count, wait, more])
  return wire.pack(wait > 0 ? [head, f.count, wait] : [head, f.count])
}

/**
 * A fwd's payload, from member `node` (the name bound to the sender; '' when
 * none is). Throws E_BAD_FRAME. A bare one comes with `ref` and an empty
 * `key`: the seed reads the key from its numbers (forward.ts `resolve`).
 */
export function decodeFwd (data: Uint8Array, node: string, b: MessageBounds = DEFAULT_BOUNDS): Fwd {
  const raw = unpacked(data, 'fwd')
  if (typeof raw === 'number') return { node, key: '', count: 1, ...ref(raw) }
  const a = array(raw, 2, 5, 'fwd')
  // Named: [number, key, count?, wait?, more?].
  if (typeof a[0] === 'number' && typeof a[1] === 'string') return { node, ...fields(a.slice(2), true), key: key(a[1], b), ...ref(a[0]), naming: true }
  if (a.length > 4) bad('a fwd by number or key has at most 4 fields')
  const rest = fields(a.slice(1), false)
  if (typeof a[0] === 'number') return { node, key: '', ...rest, ...ref(a[0]) }
  return { node, key: key(a[0], b), ...rest }
}

/** A fwd's `[count, wait, more]` (trailing ones left off; `count` too when `optional`, then 1). */
function fields (a: unknown[], optional: boolean): Pick<Fwd, 'count' | 'wait' | 'more'> {
  const count = optional && a[0] === undefined ? 1 : seq(a[0], 'count')
  if (count < 1 || count > MAX_FORWARD_COUNT) bad(`count must be 1..${MAX_FORWARD_COUNT}`)
  const wait = a[1] === undefined ? 0 : seq(a[1], 'wait')
  if (wait > MAX_FORWARD_WAIT_MS) bad(`wait must be at most ${MAX_FORWARD_WAIT_MS}`)
  const more = a[2] === undefined ? 0 : seq(a[2], 'more')
  if (more > MAX_FORWARD_COUNT) bad(`more must be at most ${MAX_FORWARD_COUNT}`)
  return { count, ...(wait > 0 ? { wait } : {}), ...(more > 0 ? { more } : {}) }
}

/** A key number as sent: `n`, or `-1 - n` for a fwd sent on (`moved`). */
function ref (v: unknown): { ref: number, moved?: true } {
  const moved = typeof v === 'number' && v < 0
  const n = seq(moved ? -1 - v : v, 'key number')
  if (n >= MAX_NUMBERS) bad(`key number must be below ${MAX_NUMBERS}`)
  return moved ? { ref: n, moved: true } : { ref: n }
}

export function encodeFans (f: Fans): Uint8Array {
  // A window of parity 1: the low bit of a bare admission, the sign of a whole one's resetMs (-1 - resetMs), a bare denial's boolean.
  const odd = f.parity === 1
  // A bare admission: 2 × remaining + parity, one byte up to 63 remaining whatever the parity.
  if (f.known === true) return wire.pack(f.allowed ? 2 * f.remaining + (odd ? 1 : 0) : odd)
  if (unknownDenial(f)) return wire.pack(null)
  // Short forms for a plain decision: [remaining, resetMs] admitted, [remaining, resetMs, retryAfterMs] denied.
  if (plainAdmission(f)) return wire.pack([f.remaining, odd ? -1 - f.resetMs : f.resetMs])
  if (f.code === undefined && !f.allowed) return wire.pack([f.remaining, f.resetMs, f.retryAfterMs])
  const a: unknown[] = [f.allowed, f.remaining, f.resetMs, f.retryAfterMs]
  if (f.credit !== undefined && f.credit > 0) {
    a.push(null, f.credit)
    if (f.creditMs !== undefined && f.creditMs < f.resetMs) a.push(f.creditMs)
  }
  else if (f.code !== undefined) a.push(f.code)
  return wire.pack(a)
}

export function decodeFans (data: Uint8Array): Fans {
  const raw = unpacked(data, 'fans')
  if (raw === null || raw === undefined) return { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1 }
  if (typeof raw === 'boolean') return { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, known: true, ...(raw ? { parity: 1 } : {}) }
  if (typeof raw === 'number') {
    const n = Number.isSafeInteger(raw) && raw >= 0 ? raw : NaN
    const odd = n % 2 === 1
    return { allowed: true, remaining: num(Math.floor(n / 2), 'remaining'), resetMs: 0, retryAfterMs: 0, known: true, ...(odd ? { parity: 1 } : {}) }
  }
  const a = array(raw, 2, 7, 'fans')
  if (typeof a[0] === 'number') {
    if (a.length > 3) bad('a short fans has 2 or 3 fields')
    if (a.length === 2) {
      const odd = typeof a[1] === 'number' && a[1] < 0
      return { allowed: true, remaining: num(a[0], 'remaining'), resetMs: num(odd ? -1 - (a[1] as number) : a[1], 'resetMs'), retryAfterMs: 0, ...(odd ? { parity: 1 } : {}) }
    }
    const retryAfterMs = a[2] === -1 ? -1 : num(a[2], 'retryAfterMs')
    return { allowed: false, remaining: num(a[0], 'remaining'), resetMs: num(a[1], 'resetMs'), retryAfterMs }
  }
  if (a.length < 4) bad('fans must be an array of 4 to 7 fields')
  if (typeof a[0] !== 'boolean') bad('allowed must be a boolean')
  const retryAfterMs = a[3] === -1 ? -1 : num(a[3], 'retryAfterMs')
  const credit = a[5] === undefined ? 0 : seq(a[5], 'credit')
  if (credit > MAX_FORWARD_COUNT) bad(`credit must be at most ${MAX_FORWARD_COUNT}`)
  // Credit comes only with a decision that admitted: a refusal (`code`) or a denial carries none.
  if (credit > 0 && (a[4] !== null || a[0] !== true)) bad('credit comes only with an admission and no code')
  const creditMs = a[6] === undefined ? undefined : seq(a[6], 'creditMs')
  if (creditMs !== undefined && credit === 0) bad('creditMs comes only with credit')
  return {
    allowed: a[0], remaining: num(a[1], 'remaining'), resetMs: num(a[2], 'resetMs'), retryAfterMs,
    ...(a[4] === undefined || a[4] === null ? {} : { code: name(a[4], 'code') }),
    ...(credit > 0 ? { credit } : {}),
    ...(creditMs === undefined ? {} : { creditMs })
  }
}

/**
 * A decided admission with no credit and no retry: the answer whose window
 * end a seed tells and a member keeps (forward-names.ts), and the one that
 * goes short.
 */
export function plainAdmission (f: Fans): boolean {
  return decidedNoCredit(f) && f.allowed && f.retryAfterMs === 0
}

/** The seed decided (no `code`) and gave no credit. */
function decidedNoCredit (f: Fans): boolean {
  return f.code === undefined && (f.credit ?? 0) <= 0
}

/**
 * A decided denial in the window the member knows: nothing remaining, and
 * a retry at the window's end, which the member knows (forward.ts `reply`).
 */
export function windowDenial (f: Fans): boolean {
  return decidedNoCredit(f) && !f.allowed && f.remaining === 0 && f.retryAfterMs === f.resetMs && f.resetMs > 0
}

/** A decided denial with nothing remaining and no time known: nil on the wire. */
function unknownDenial (f: Fans): boolean {
  return decidedNoCredit(f) && !f.allowed && f.remaining === 0 && f.resetMs === 0 && f.retryAfterMs === -1
}

/** The seed's answer to its own decision `d`. */
export function answerOf (d: Decision): Fans {
  return { allowed: d.allowed, remaining: d.remaining, resetMs: d.resetMs, retryAfterMs: d.retryAfterMs }
}

/** The decision an answer carries, as the member's client gets it: the rule's `limit` and name are the member's own. */
export function decisionOf (f: Fans, limit: number, rule: string): Decision {
  return { allowed: f.allowed, remaining: f.remaining, limit, resetMs: f.resetMs, retryAfterMs: f.retryAfterMs, rule }
}

function unpacked (data: Uint8Array, what: string): unknown {
  try {
    return wire.unpack(data)
  } catch (err) {
    bad(`${what}: not msgpack (${(err as Error).message})`)
  }
}

function array (raw: unknown, min: number, max: number, what: string): unknown[] {
  if (!Array.isArray(raw) || raw.length < min || raw.length > max) bad(`${what} must be an array of ${min} to ${max} fields`)
  return raw
}
