/**
 * Key numbers for forwarded acquires (protocol version 13, forward.ts). A
 * member names a key to a seed once, in a `fwd` that carries the key and a
 * small number the member chose for it, and after the seed answered that
 * frame sends the number alone: a one-token acquire of a key the seed knows
 * is then a bare msgpack integer, about 3 bytes framed instead of ~10
 * (forward-messages.ts). Pure: no clock, no I/O.
 *
 * Safety: a seed that read a number as the wrong key would decide one key's
 * acquire from another key's tokens, and the member would admit by it. So:
 * - A seed binds a number only from a frame of that member's peer id
 *   (noise proves it) that names it (`Named.bind`), in the order the
 *   session delivers them, before anything of that frame is decided. Only
 *   the member rebinds its numbers.
 * - A member sends a number bare only after an answer to a frame that named
 *   it to that seed came back decided (`KeyNumbers.confirm`): the seed had
 *   read the name by then. A later frame of the same session is read after
 *   it; a frame on a later session can only follow it, since a member's
 *   session to a seed ends (and every call on it fails, admitting nothing)
 *   before the next opens (calls.ts).
 * - A member never gives a number to a second key: past `MAX_NUMBERS` keys
 *   with one seed, it sends further keys in full. So the order frames go
 *   or arrive in never matters. A member that restarts numbers its keys
 *   afresh, and so sends a number bare only after the seed answered the
 *   frame that named it anew; a frame of the old process that the seed
 *   reads later answers nobody.
 * - A seed that does not know a number (it restarted, or dropped its table
 *   at `MAX_BOUND`) decides nothing and answers E_KEY_UNNAMED; the member
 *   forgets the confirmation and sends the acquire again, naming the key.
 *
 * Window ends (a `known` answer, forward-messages.ts): fixed windows are
 * calendar-aligned, so every key of a rule has the same window ends at a
 * seed. An admission in the same window as the last whole admission the
 * seed sent this member under this rule goes as the bare `remaining`, and
 * a denial there that says "retry at the window's end" as a bare boolean;
 * the member reads `resetMs` from the window end it took from that answer
 * (`setWindow`, per seed and rule hash). Both carry the window's parity
 * (the seed flips it at each window it tells), so a bare answer read
 * before the whole one of its window (the simulator reorders calls; a
 * session does not), or after a missed one, is known for what it is: the
 * member then gives the rule's `per`, the longest `resetMs` can be. A
 * member that may have missed an answer (a call timed out, or its session
 * ended: `forgetSeed`) names every key to that seed again, and a frame
 * that names a key clears what the seed told under its rule (`bind`). Only
 * `resetMs` (and a denial's `retryAfterMs`, the same) rides on this, which
 * is advice to the client: `allowed` and `remaining` are always the
 * seed's, and an answer with credit is always whole. (Per key number until
 * 2026-11-28: a member that used a key two or three times a window got a
 * whole answer for a quarter of its admissions, and now one per seed and
 * rule per window.)
 */
import type { CompiledRule } from '../core/rules.js'
import type { Fans } from './forward-messages.js'

/** Numbers one member gives keys it forwards to one seed; later keys go in full, never under a number used before. */
export const MAX_NUMBERS = 16_384

/** Numbers a seed holds for all its members together; past it the table is dropped (members name again). */
export const MAX_BOUND = 1 << 17

/** A seed's answer to a bare number it holds no name for. */
export const UNNAMED = 'E_KEY_UNNAMED'

/** At a member: per seed, the number of each key forwarded to it, and whether the seed has read its name. */
export class KeyNumbers {
  private readonly bySeed = new Map<string, Map<string, { n: number, confirmed: boolean }>>()
  /** Per seed and rule hash: the window end its last whole admission said (this node's monotonic clock), and its parity. */
  private readonly windows = new Map<string, Map<string, { endMs: number, parity: number }>>()

  /**
   * The number `key` goes under to `seed`, and whether the frame must name it
   * (the seed has not confirmed it yet); null: out of numbers, send the key.
   */
  ref (seed: string, key: string): { n: number, naming: boolean } | null {
    let s = this.bySeed.get(seed)
    if (s === undefined) {
      s = new Map()
      this.bySeed.set(seed, s)
    }
    let e = s.get(key)
    if (e === undefined) {
      if (s.size >= MAX_NUMBERS) return null
      e = { n: s.size, confirmed: false }
      s.set(key, e)
    }
    return { n: e.n, naming: !e.confirmed }
  }

  /** A frame that named `key` as `n` was answered, decided, by `seed`: later frames may send `n` bare. */
  confirm (seed: string, key: string, n: number): void {
    const e = this.bySeed.get(seed)?.get(key)
    if (e !== undefined && e.n === n) e.confirmed = true
  }

  /** `seed` answered E_KEY_UNNAMED to `key`'s number: name it again. */
  forget (seed: string, key: string): void {
    const e = this.bySeed.get(seed)?.get(key)
    if (e !== undefined) e.confirmed = false
  }

  /** A forward to `seed` went unanswered (an answer may be lost): name every key again, forget every window end. */
  forgetSeed (seed: string): void {
    for (const e of this.bySeed.get(seed)?.values() ?? []) e.confirmed = false
    this.windows.delete(seed)
  }

  /** `seed`'s whole admission under the rule of hash `rule` said its window, of parity `parity`, ends at `endMs` (this node's monotonic clock). */
  setWindow (seed: string, rule: string, endMs: number, parity: number): void {
    let w = this.windows.get(seed)
    if (w === undefined) this.windows.set(seed, w = new Map())
    w.set(rule, { endMs, parity })
  }

  /** Where the window of parity `parity` of rule `rule` at `seed` ends, as its last whole admission said; NaN when not known. */
  windowEnd (seed: string, rule: string, parity: number): number {
    const e = this.windows.get(seed)?.get(rule)
    return e !== undefined && e.parity === parity ? e.endMs : NaN
  }

  /**
   * `reply` from `seed` under `rule`, its `resetMs` (and a denial's
   * `retryAfterMs`: retry at the window's end) filled in when it was sent as
   * in the window this node knows (`known`): that window's end, as the last
   * whole admission of its parity said. `guessed`: not known (that answer
   * was missed, or not read yet), so at most the rule's `per`.
   */
  filled (reply: Fans, seed: string, rule: CompiledRule | undefined, nowMs: number): { reply: Fans, guessed: boolean } {
    if (reply.known !== true) return { reply, guessed: false }
    const end = rule === undefined ? NaN : this.windowEnd(seed, rule.hash, reply.parity ?? 0)
    const guessed = Number.isNaN(end)
    const resetMs = guessed ? rule?.config.perMs ?? 0 : Math.max(0, Math.ceil(end - nowMs))
    return { reply: { ...reply, resetMs, ...(reply.allowed ? {} : { retryAfterMs: resetMs }) }, guessed }
  }
}

/** At a seed: per member peer id, the key each number names, and per rule hash the window end last told. */
export class Named {
  private readonly byPeer = new Map<string, Map<number, string>>()
  private readonly told = new Map<string, Map<string, { toldMs: number, parity: number }>>()
  private bound = 0

  /**
   * The member at peer id `from` names `key`, of the rule of hash `rule`, as
   * `n` (a frame that carried both). Nothing is told under that rule until
   * the next whole admission: a member names its keys again when it may
   * have missed an answer (KeyNumbers.forgetSeed), and then knows no window.
   */
  bind (from: string, n: number, key: string, rule: string): void {
    if (this.bound >= MAX_BOUND) this.clear()
    let m = this.byPeer.get(from)
    if (m === undefined) { m = new Map(); this.byPeer.set(from, m) }
    if (!m.has(n)) this.bound++
    m.set(n, key)
    // The parity goes on flipping: an answer of the old window read late is never taken for the next one's.
    const e = this.told.get(from)?.get(rule)
    if (e !== undefined) e.toldMs = NaN
  }

  /** The key `from`'s number `n` names, or undefined: not named here (answer E_KEY_UNNAMED). */
  keyOf (from: string, n: number): string | undefined {
    return this.byPeer.get(from)?.get(n)
  }

  /**
   * Sending `from` an admission for number `n`, under the rule of hash
   * `rule`, whose window ends at `endMs` (this node's monotonic clock):
   * `same` when the whole admission told before under that rule ended
   * there too (within `slackMs`, less than half a window, so never the next
   * window's), so this one may go without it; else it goes whole, is what
   * was told now, and the window's `parity` flips. Null for a number not
   * named here.
   */
  tell (from: string, n: number, rule: string, endMs: number, slackMs: number): { same: boolean, parity: number } | null {
    if (this.byPeer.get(from)?.get(n) === undefined) return null
    let t = this.told.get(from)
    if (t === undefined) this.told.set(from, t = new Map())
    let e = t.get(rule)
    if (e === undefined) t.set(rule, e = { toldMs: NaN, parity: 0 })
    if (Math.abs(endMs - e.toldMs) <= slackMs) return { same: true, parity: e.parity }
    e.toldMs = endMs
    e.parity ^= 1
    return { same: false, parity: e.parity }
  }

  /** Whether a denial for number `n` whose window ends at `endMs` is in the window last told under `rule` (its parity), telling nothing; else null. */
  knownWindow (from: string, n: number, rule: string, endMs: number, slackMs: number): { same: true, parity: number } | null {
    if (this.byPeer.get(from)?.get(n) === undefined) return null
    const e = this.told.get(from)?.get(rule)
    return e !== undefined && Math.abs(endMs - e.toldMs) <= slackMs ? { same: true, parity: e.parity } : null
  }

  /** Numbers held, over all members. */
  get size (): number { return this.bound }

  private clear (): void {
    this.byPeer.clear()
    this.told.clear()
    this.bound = 0
  }
}
