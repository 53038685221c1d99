/**
 * Repeated gossips as `hb`s (protocol version 14). Pure: no clock, no I/O.
 *
 * Why: a quiet member's gossip (`nolease`, once a second) and a seed's
 * members' copy say, nearly every time, what the last one said: who the
 * sender is, its epoch, cluster hash, rule hashes and flags, with a new
 * seq and time. Deflated, that is about 100 to 120 bytes; every seed
 * receives each member's, and every member each seed's copy. keys100 at 50
 * nodes of which 5 seeds: 11.5 of a node's 38.6 kbit/s received.
 *
 * So the sender (`RepeatSender`, one per stream: a node's own gossip, a
 * seed's members' copy) gives such a gossip a version, `hv`, and sends the
 * next ones that would say the same as an `hb` of a few tens of bytes:
 * `[node, epoch, inc, seq, now, hv, prev]`. A receiver (`RepeatReader`)
 * keeps the last whole gossip with an `hv` from each sender, and reads an
 * `hb` as that gossip with the hb's seq, time and `prev`; one it cannot
 * place (it holds no such gossip: it started, or missed the whole one) it
 * drops, as a lost message. A gossip with news in between (key lines, a
 * full sync's mark) goes as it is and changes nothing of this.
 *
 * Measured in the simulator (keys100, 50 nodes, `decide: "seeds"`, seed
 * 1, kbit/s per node sent + received): 3 seeds 48.8 -> 47.2, 5 seeds 63.1
 * -> 60.5. Sending a new version whole once saved a little more (46.7,
 * 59.9), but a receiver that lost that whole gossip read none of
 * the next: `lossy` at 10 nodes of which 5 seeds (seeds 1-10) fell from
 * 78.0 to 74.7% utilization; with a new version whole twice, 77.4%.
 *
 * Invariants:
 * - An `hb` stands only for a gossip whose every field but seq, now, prev
 *   and hv is as in the whole gossip of that `hv` the sender sent: nothing
 *   it carries differs, so a receiver that reads it so reads what the
 *   sender sent (REPEATABLE: only fields that say the sender's state, none
 *   that carries news: key lines, acks, echoes, marks, member lists...).
 * - At most FULL_EVERY − 1 `hb`s follow a whole gossip, a new version goes
 *   whole twice, and none goes as an `hb` while the caller says a peer may
 *   not hold it (`whole`: a seed or member new in view, back or
 *   restarted); so a receiver that holds none hears a whole one within
 *   FULL_EVERY repeatable gossips of the sender.
 * - A receiver matches epoch, incarnation and `hv`: never another
 *   incarnation's gossip, nor an older version's.
 */
import type { Gossip, Hb } from './messages.js'
import { equal, packedLess, PLAIN_FIELDS } from './member-copies.js'

/** Whole gossips at least every this many of a stream's repeatable gossips. */
export const FULL_EVERY = 3

/** Senders a receiver keeps a whole gossip of; past it the table is dropped (each is whole again within FULL_EVERY). */
export const MAX_SENDERS = 16_384

/** The hb's own fields. */
const HB_OWN: ReadonlySet<string> = new Set(['seq', 'now', 'prev', 'hv'])

/** The fields a repeatable gossip may have: a plain members' copy's (member-copies.ts), a quiet member's flag, and the hb's own. */
const REPEATABLE: ReadonlySet<string> = new Set([...PLAIN_FIELDS, 'nolease', ...HB_OWN])

/** What an `hb` may stand for of `g`, packed (less the hb's own fields); null when `g` carries news. */
function repeatable (g: Gossip): Uint8Array | null {
  // A gossip that carries earlier epochs' books (a restart's first ones: rare) goes whole, as it did before hbs.
  if (g.keys.length > 0 || g.acks.length > 0 || g.carries.length > 0) return null
  for (const [f, v] of Object.entries(g)) if (v !== undefined && !REPEATABLE.has(f)) return null
  return packedLess(g, HB_OWN)
}

/** One stream's side of it: whole gossips and the `hb`s that repeat them. */
export class RepeatSender {
  private said: Uint8Array | null = null
  private hv = 0
  private since = 0
  /** `hb`s sent (status). */
  repeats = 0

  /** What to publish for `g`: an `hb`, or `g` itself (with its `hv` when repeatable). `whole`: a receiver may not hold the last one. */
  next (g: Gossip, whole: boolean): Gossip | Hb {
    const part = repeatable(g)
    // A gossip with news goes as it is, and leaves the repeat as it was: receivers still hold the last whole one.
    if (part === null) return g
    if (this.said !== null && equal(part, this.said)) {
      if (!whole && this.since >= 0 && this.since < FULL_EVERY - 1) {
        this.since++
        this.repeats++
        return { v: g.v, t: 'hb', node: g.node, epoch: g.epoch, inc: g.inc, seq: g.seq, now: g.now, hv: this.hv, ...(g.prev === undefined ? {} : { prev: g.prev }) }
      }
    } else {
      this.said = part
      this.hv++
      // A new version goes whole twice: one lost whole gossip does not leave its receivers unable to read the hbs.
      this.since = -1
      return { ...g, hv: this.hv }
    }
    this.since = this.since < 0 ? this.since + 1 : 0
    return { ...g, hv: this.hv }
  }
}

/** A receiver's side: the last whole gossip with an `hv` of each sender. */
export class RepeatReader {
  private readonly last = new Map<string, Gossip>()
  /** `hb`s read as a gossip, and dropped (no such gossip held). */
  readonly counters = { read: 0, dropped: 0 }

  /** A whole gossip arrived (validated): keep it if it may be repeated (one with news leaves the last kept). */
  whole (g: Gossip): void {
    if (g.hv === undefined) return
    if (!this.last.has(g.node) && this.last.size >= MAX_SENDERS) this.last.clear()
    this.last.set(g.node, g)
  }

  /** The gossip `h` stands for, or null (dropped). */
  expand (h: Hb): Gossip | null {
    const g = this.last.get(h.node)
    if (g === undefined || g.epoch !== h.epoch || g.inc !== h.inc || g.hv !== h.hv) {
      this.counters.dropped++
      return null
    }
    this.counters.read++
    const { prev: _, ...rest } = g
    return { ...rest, seq: h.seq, now: h.now, ...(h.prev === undefined ? {} : { prev: h.prev }) }
  }
}
