/**
 * Spending recorded ahead of use, for a lone node's `hard` rules: the book of
 * reservations. Pure (calendar time passed in); lone-store.ts writes the
 * lines to disk and says when they are durable.
 *
 * A lone node holds a rule's whole stock, and nothing outside it counts what
 * it spent. A state file written at a clean stop covers SIGTERM; a kill -9
 * would forget every spend since. Writing each decision to disk would cost an
 * fsync per request. So, as a sequence allocator reserves ids, the node
 * records spending ahead in batches:
 *
 *   line = [key, n, fromCal, untilCal]: "up to n tokens of key may be spent
 *           between fromCal and untilCal (calendar ms)"
 *
 * and spends a token of a hard rule only from a reservation that is on disk
 * and not expired. A line is written once for about 5% of the rule's stock
 * (`batchOf`), ahead of need (a reservation below half its batch asks for the
 * next), so a busy key rarely waits for a write. After a crash, each line is
 * taken as spent at the latest moment it allows (`untilCal`, or the restart if
 * earlier), so a restart never hands a token back early: a crash costs at
 * most the unspent part of the last batch of each key, never an overshoot.
 *
 * Invariant: for every key of a hard rule, tokens spent since the start <=
 * tokens in durable lines whose window covered the spend.
 */

/** Longest life of a reservation, and the shortest: see `lifeOf`. */
const MAX_LIFE_MS = 60_000
const MIN_LIFE_MS = 1_000
/** A reservation is about this share of the rule's stock. */
const BATCH_SHARE = 0.05
/** A reservation of a sliding log or a token bucket is renewed once less than this share of its life is left. */
const RENEW_SHARE = 0.25

export interface Reservation {
  /** Tokens still unspent in it. */
  n: number
  /** Calendar ms from which, and until which, it may be spent from. */
  from: number
  until: number
}

/** A line to write: [key, n, fromCal, untilCal]. */
export type SpendLine = [key: string, n: number, from: number, until: number]

/** What the book needs to know of a rule. */
export interface AheadRule {
  readonly stock: number
  readonly config: { readonly perMs: number, readonly algorithm: string }
}

/** Tokens a reservation of `rule` holds: about 5% of the stock, at least `count`. */
export function batchOf (rule: AheadRule, count: number): number {
  return Math.max(count, Math.ceil(rule.stock * BATCH_SHARE))
}

/**
 * Until when a reservation made at `nowCal` may be spent from. A calendar
 * window's spends all return at once, after the window (fixed-window) or
 * spread over the next (sliding-window): one made at any time in the window
 * returns no later than one made at its start, so the reservation lasts to
 * the window's last millisecond at no cost. A sliding log or a token bucket
 * returns each spend a time after it: there a tenth of the period, within
 * 1 s and 60 s (longer would make a crash cost more, since its tokens count
 * as spent at the end of its life; shorter would write more lines).
 */
export function lifeEnd (rule: AheadRule, nowCal: number): number {
  if (rule.config.algorithm === 'fixed-window' || rule.config.algorithm === 'sliding-window') return (Math.floor(nowCal / rule.config.perMs) + 1) * rule.config.perMs - 1
  return nowCal + Math.min(MAX_LIFE_MS, Math.max(MIN_LIFE_MS, rule.config.perMs / 10))
}

/** Whether a rule's reservations follow its calendar windows (lifeEnd). */
function windowed (rule: AheadRule): boolean {
  return rule.config.algorithm === 'fixed-window' || rule.config.algorithm === 'sliding-window'
}

/** A key's reservations, and whether a line for it is being written (one at a time per key). */
export interface AheadEntry {
  rs: Reservation[]
  pending: boolean
}

export class SpendAhead {
  /** Per key: durable reservations, oldest first. One lookup per decision (the hot path). */
  private readonly book = new Map<string, AheadEntry>()

  /** The key's entry, if it has reservations or one on its way. */
  entry (key: string): AheadEntry | undefined {
    return this.book.get(key)
  }

  /** Tokens of `key` spendable at `nowCal` from durable reservations that last until `untilCal`. */
  available (key: string, nowCal: number, untilCal: number): number {
    const e = this.book.get(key)
    return e === undefined ? 0 : availableIn(e, nowCal, untilCal)
  }

  /**
   * Spend `count` from `e`'s reservations good at `nowCal` and lasting until
   * `untilCal` (the caller checked they hold it). Returns whether a line
   * should be asked for now (`want`): what is left is under half a batch, or
   * the next window's reservation (a sliding log's or bucket's renewal) is
   * due and none is on its way. One pass; no lookup.
   */
  spend (e: AheadEntry, rule: AheadRule, count: number, nowCal: number, untilCal: number): boolean {
    let left = count
    let avail = 0
    let lastFrom = -Infinity
    let lastUntil = -Infinity
    for (const r of e.rs) {
      if (r.from > lastFrom) lastFrom = r.from
      if (r.until > lastUntil) lastUntil = r.until
      if (r.from > nowCal || r.until < untilCal) continue
      const t = Math.min(r.n, left)
      r.n -= t
      left -= t
      avail += r.n
    }
    if (e.pending) return false
    const end = lifeEnd(rule, nowCal)
    if (avail < count + batchOf(rule, count) / 2) return true
    return windowed(rule) ? lastFrom <= end : lastUntil < nowCal + (end - nowCal) * RENEW_SHARE
  }

  /**
   * The line to write so that `count` tokens of `key` can be spent until
   * `untilCal` (and a batch more): null when one is on its way already, or
   * when the durable ones leave more than half a batch. With enough for
   * now: a calendar window's next reservation (spendable from its start), or
   * a renewal of one near the end of its life, so a busy key never waits.
   */
  want (key: string, rule: AheadRule, count: number, nowCal: number, untilCal: number): SpendLine | null {
    let e = this.book.get(key)
    if (e?.pending === true) return null
    const batch = batchOf(rule, count)
    let line: SpendLine | null = null
    const end = lifeEnd(rule, nowCal)
    const rs = e?.rs ?? []
    if ((e === undefined ? 0 : availableIn(e, nowCal, untilCal)) < count + batch / 2) {
      line = [key, batch, nowCal, Math.max(untilCal, end)]
    } else if (windowed(rule)) {
      // The next window's, once per window: a key used in this one finds it on disk when the next begins.
      const next = end + 1
      if (!rs.some(r => r.from >= next)) line = [key, batch, next, next + rule.config.perMs - 1]
    } else if (!rs.some(r => r.until >= nowCal + (end - nowCal) * RENEW_SHARE)) {
      // A sliding log's or a bucket's: renewed in the last quarter of its life.
      line = [key, batch, nowCal, Math.max(untilCal, end)]
    }
    if (line === null) return null
    if (e === undefined) this.book.set(key, e = { rs: [], pending: true })
    else e.pending = true
    return line
  }

  /** A line is on disk: its tokens may be spent. */
  durable (line: SpendLine): void {
    const e = this.book.get(line[0])
    const r: Reservation = { n: line[1], from: line[2], until: line[3] }
    if (e === undefined) this.book.set(line[0], { rs: [r], pending: false })
    else { e.rs.push(r); e.pending = false }
  }

  /** A line could not be written: nothing reserved, and the next request may try again. */
  failed (line: SpendLine): void {
    const e = this.book.get(line[0])
    if (e === undefined) return
    e.pending = false
    if (e.rs.length === 0) this.book.delete(line[0])
  }

  /** Whether a reservation for `key` is being written. */
  waiting (key: string): boolean {
    return this.book.get(key)?.pending === true
  }

  /** Drop expired and spent reservations of every key (the store's sweep), so idle keys leave no entry. */
  sweep (nowCal: number): void {
    for (const [key, e] of this.book) {
      let w = 0
      for (const r of e.rs) if (r.n > 0 && r.until >= nowCal) e.rs[w++] = r
      e.rs.length = w
      if (w === 0 && !e.pending) this.book.delete(key)
    }
  }

  /** Every live reservation, as lines (a compaction of the log keeps them). */
  lines (nowCal: number): SpendLine[] {
    const out: SpendLine[] = []
    for (const [key, e] of this.book) {
      for (const r of e.rs) if (r.n > 0 && r.until >= nowCal) out.push([key, r.n, Math.max(r.from, nowCal), r.until])
    }
    return out
  }

  get keys (): number {
    return this.book.size
  }
}

/** Tokens of an entry spendable at `nowCal` from reservations lasting until `untilCal`. */
export function availableIn (e: AheadEntry, nowCal: number, untilCal: number): number {
  let n = 0
  for (const r of e.rs) if (r.from <= nowCal && r.until >= untilCal) n += r.n
  return n
}
