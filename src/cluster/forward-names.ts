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
 */

/** Numbers one member gives keys it forwards to one seed; later keys go in full, never under a number used before. */
export const MAX_NUMBERS = 16_384

/** Numbers a seed holds for all its members together; past it the table is dropped (members name again). */
export const MAX_BOUND = 1 << 17

/** A seed's answer to a bare number it holds no name for. */
export const UNNAMED = 'E_KEY_UNNAMED'

/** At a member: per seed, the number of each key forwarded to it, and whether the seed has read its name. */
export class KeyNumbers {
  private readonly bySeed = new Map<string, Map<string, { n: number, confirmed: boolean }>>()

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

  /** Seeds this member has numbers with (for status and tests). */
  get seeds (): number { return this.bySeed.size }
}

/** At a seed: per member peer id, the key each number names. */
export class Named {
  private readonly byPeer = new Map<string, Map<number, string>>()
  private bound = 0

  /** The member at peer id `from` names `key` as `n` (a frame that carried both). */
  bind (from: string, n: number, key: string): void {
    if (this.bound >= MAX_BOUND) this.clear()
    let m = this.byPeer.get(from)
    if (m === undefined) { m = new Map(); this.byPeer.set(from, m) }
    if (!m.has(n)) this.bound++
    m.set(n, key)
  }

  /** The key `from`'s number `n` names, or undefined: not named here (answer E_KEY_UNNAMED). */
  keyOf (from: string, n: number): string | undefined {
    return this.byPeer.get(from)?.get(n)
  }

  /** Numbers held, over all members. */
  get size (): number { return this.bound }

  private clear (): void {
    this.byPeer.clear()
    this.bound = 0
  }
}
