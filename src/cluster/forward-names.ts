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
 * Window ends (a `known` answer, forward-messages.ts): an admission in the
 * same window as the last whole admission the seed sent this member for
 * this number goes as the bare `remaining`, and the member reads `resetMs`
 * from the window end it took from that answer (`window`). Both carry the
 * window's parity (the seed flips it at each window it tells), so a bare
 * answer read before the whole one of its window (the simulator reorders
 * calls; a session does not), or after a missed one, is known for what it
 * is: the member then gives the rule's `per`, the longest `resetMs` can be.
 * A member that may have missed an answer (a call timed out, or its
 * session ended: `forgetSeed`) names every key to that seed again, which
 * clears what the seed told (`bind`). Only `resetMs` rides on this, which
 * is advice to the client: `allowed` and `remaining` are always the
 * seed's, and an answer with credit is always whole.
 */

/** Numbers one member gives keys it forwards to one seed; later keys go in full, never under a number used before. */
export const MAX_NUMBERS = 16_384

/** Numbers a seed holds for all its members together; past it the table is dropped (members name again). */
export const MAX_BOUND = 1 << 17

/** A seed's answer to a bare number it holds no name for. */
export const UNNAMED = 'E_KEY_UNNAMED'

/** At a member: per seed, the number of each key forwarded to it, and whether the seed has read its name. */
export class KeyNumbers {
  private readonly bySeed = new Map<string, Map<string, { n: number, confirmed: boolean, endMs: number, parity: number }>>()

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
      e = { n: s.size, confirmed: false, endMs: NaN, parity: 0 }
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
    if (e !== undefined) { e.confirmed = false; e.endMs = NaN }
  }

  /** A forward to `seed` went unanswered (an answer may be lost): name every key again, forget every window end. */
  forgetSeed (seed: string): void {
    for (const e of this.bySeed.get(seed)?.values() ?? []) { e.confirmed = false; e.endMs = NaN }
  }

  /** `seed`'s whole admission for `key` said its window, of parity `parity`, ends at `endMs` (this node's monotonic clock). */
  setWindow (seed: string, key: string, endMs: number, parity: number): void {
    const e = this.bySeed.get(seed)?.get(key)
    if (e !== undefined) { e.endMs = endMs; e.parity = parity }
  }

  /** Where `key`'s window of parity `parity` at `seed` ends, as its last whole admission said; NaN when not known. */
  windowEnd (seed: string, key: string, parity: number): number {
    const e = this.bySeed.get(seed)?.get(key)
    return e !== undefined && e.parity === parity ? e.endMs : NaN
  }
}

/** At a seed: per member peer id, the key each number names, and the window end last told with it. */
export class Named {
  private readonly byPeer = new Map<string, Map<number, { key: string, toldMs: number, parity: number }>>()
  private bound = 0

  /** The member at peer id `from` names `key` as `n` (a frame that carried both); nothing told yet. */
  bind (from: string, n: number, key: string): void {
    if (this.bound >= MAX_BOUND) this.clear()
    let m = this.byPeer.get(from)
    if (m === undefined) { m = new Map(); this.byPeer.set(from, m) }
    if (!m.has(n)) this.bound++
    m.set(n, { key, toldMs: NaN, parity: 0 })
  }

  /** The key `from`'s number `n` names, or undefined: not named here (answer E_KEY_UNNAMED). */
  keyOf (from: string, n: number): string | undefined {
    return this.byPeer.get(from)?.get(n)?.key
  }

  /**
   * Sending `from` an admission for number `n` whose window ends at `endMs`
   * (this node's monotonic clock): `same` when the whole admission told
   * before ended there too (within `slackMs`, less than half a window, so
   * never the next window's), so this one may go without it; else it goes
   * whole, is what was told now, and its window's `parity` flips. Null for
   * a number not named here.
   */
  tell (from: string, n: number, endMs: number, slackMs: number): { same: boolean, parity: number } | null {
    const e = this.byPeer.get(from)?.get(n)
    if (e === undefined) return null
    if (Math.abs(endMs - e.toldMs) <= slackMs) return { same: true, parity: e.parity }
    e.toldMs = endMs
    e.parity ^= 1
    return { same: false, parity: e.parity }
  }

  /** Numbers held, over all members. */
  get size (): number { return this.bound }

  private clear (): void {
    this.byPeer.clear()
    this.bound = 0
  }
}
