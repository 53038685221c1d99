/**
 * The reservations of a replicating seed's journal (replication.ts): per
 * key, ceilings written ahead of its gives, so that a grant waits for its
 * journal copies only when its gives outrun the ceiling, not at every
 * give. A heir credits the copied books less what is left of the copied
 * reservation, so it never credits a token given under it; what a dead
 * seed had reserved and not given is lost, never doubled.
 *
 * Apart from replication.ts, which carries the journal text to the replicas
 * and says when a position is durable at a quorum: this file only says
 * which position a grant must wait for, per key and generation, and what
 * the journal records about it (`gave` and `ceil` notes). Every reservation
 * of a generation is dropped at its checkpoint, which carries what is left
 * of each (journalCheckpoint) to start the next.
 */
import type { BooksJournal } from './journal.js'
import type { ReplPos } from './replication.js'

/** A new reservation's headroom, as a fraction of the key's stock (`gave`). */
export const RESERVE_FRACTION = 0.05
/**
 * ... and at most this fraction of the key's books after the give (what a
 * heir loses is what is left of it). A tenth, not a quarter: on real
 * processes under load a seed died with 145 of 300 in its books while
 * giving, and its heir lost 37 of them, more than the 90% bar's margin
 * (crash-joined.long.test.ts). The simulator's cost: seed-crash-receiving at
 * N=10 92.3 -> 90.9%, lossy 87.0 -> 86.1%, slow-streams at N=3 76.4 -> 74.4%.
 */
export const BOOKS_FRACTION = 0.1

/**
 * A reservation unused for this many gossip intervals is given back (its
 * ceiling lowered to what is given): a seed that gave once and then only
 * received would otherwise keep it, and lose it to its heir, for as long as
 * it lives. The next give after the release waits one quorum round trip.
 */
export const RELEASE_AFTER_INTERVALS = 4

export class Reservations {
  /** Per key, in this generation: tokens given, and the reservations written (ascending; `at` null until placed). */
  private readonly given = new Map<string, number>()
  private readonly ceilings = new Map<string, Array<{ r: number, at: ReplPos | null }>>()
  /** Per key that gave lately: when it last gave (monotonic ms), for `release`. */
  private readonly lastGive = new Map<string, number>()
  /** Keys with a reservation in the journal's pending batch, not yet placed. */
  private readonly unplaced = new Set<string>()

  /** A checkpoint at `head` starts a new generation: what is left of each reservation starts the new generation's. */
  restart (head: ReplPos): void {
    const left = this.reserved()
    this.given.clear()
    this.ceilings.clear()
    this.unplaced.clear()
    for (const [k, n] of left) this.ceilings.set(k, [{ r: n, at: { ...head } }])
  }

  /** A batch ending at `head` was written: the reservations it carries are placed there. */
  place (head: ReplPos): void {
    for (const k of this.unplaced) for (const e of this.ceilings.get(k) ?? []) e.at ??= { ...head }
    this.unplaced.clear()
  }

  /**
   * A give of `n` (> 0) of `key`, recorded in `journal` with it. Its grant
   * may leave once a reservation that covers it is durable at a quorum of
   * seeds. A reservation has headroom (a twentieth of the stock, or twice
   * this give), and the next is written when half of it is used: a give
   * then waits only if it outruns the headroom within a round trip.
   */
  gave (journal: BooksJournal, key: string, n: number, stock: number, books: number, nowMs: number): void {
    const c = (this.given.get(key) ?? 0) + n
    this.given.set(key, c)
    this.lastGive.set(key, nowMs)
    journal.note('gave', key, n)
    let list = this.ceilings.get(key)
    if (list === undefined) this.ceilings.set(key, list = [])
    // Reservations below what is given are spent: keep the one that covers, and the ones after it.
    while (list.length > 1 && list[0].r < c) list.shift()
    const top = list.length > 0 ? list[list.length - 1].r : 0
    // A heir loses what is left of the reservation: never more than BOOKS_FRACTION of what this seed still holds.
    const headroom = Math.ceil(Math.min(Math.max(2 * n, RESERVE_FRACTION * stock), BOOKS_FRACTION * Math.max(0, books)))
    if (top - c >= headroom / 2) return
    const r = c + headroom
    list.push({ r, at: null })
    journal.note('ceil', key, r)
    this.unplaced.add(key)
  }

  /**
   * Give back the reservations of keys that gave nothing for `idleMs`: each
   * one's ceiling comes down to what is given, in the journal's next batch.
   * Returns how many were given back. Safe: a give after it needs a new
   * ceiling above it, and `coverPos` (replication.ts) makes its grant wait
   * until that one is at a quorum (the ceilings kept are only those written
   * after the lowering).
   */
  release (journal: BooksJournal, nowMs: number, idleMs: number): number {
    let released = 0
    for (const [key, at] of this.lastGive) {
      if (nowMs - at < idleMs) continue
      this.lastGive.delete(key)
      const list = this.ceilings.get(key)
      const c = this.given.get(key) ?? 0
      if (list === undefined || list.length === 0 || list[list.length - 1].r <= c) continue
      this.ceilings.set(key, [{ r: c, at: null }])
      journal.note('ceil', key, c)
      this.unplaced.add(key)
      released++
    }
    return released
  }

  /** Tokens of `key` given in this generation. */
  givenOf (key: string): number {
    return this.given.get(key) ?? 0
  }

  /** What is left of each reservation (for the checkpoint). */
  reserved (): Array<[string, number]> {
    const out: Array<[string, number]> = []
    for (const [k, list] of this.ceilings) {
      const left = (list.length > 0 ? list[list.length - 1].r : 0) - (this.given.get(k) ?? 0)
      if (left > 0) out.push([k, left])
    }
    return out
  }

  /**
   * Where the first reservation covering `key`'s gives so far was written:
   * undefined if it gave nothing in this generation, null if that
   * reservation is not placed yet (or none covers them).
   */
  coverOf (key: string): ReplPos | null | undefined {
    const c = this.given.get(key) ?? 0
    if (c === 0) return undefined
    const e = this.ceilings.get(key)?.find(x => x.r >= c)
    return e === undefined ? null : e.at
  }
}
