/**
 * Which of a seed's gossips its members get a copy of (protocol version 11).
 * Pure: time comes in as an argument.
 *
 * Why: where every member forwards its acquires to the seeds (`decide:
 * "seeds"`) and needs no lease, a seed's members' copy says nothing but
 * that the seed lives, under the same rules, four times a second. At 200
 * nodes of which 5 seeds (keys100) those copies were 19 of a node's 59
 * kbit/s: each member received 20 a second, ~120 bytes each.
 *
 * So a copy that says nothing new to the members (`plain`, and the same as
 * the last one published but for its seq and time) is not published, until
 * `quietGossipMs` has passed since the last one: the copies go at the pace
 * of a quiet member's gossip, and members read the seed alive for as long
 * as they read a quiet member (peers.ts `isAlive`, `Peer.quiet`).
 *
 * Invariants:
 * - A copy that carries anything a member acts on is published at once:
 *   key lines, acks, echoes (`heard`), a sync mark, the member list, a
 *   refusal, `leaving`, member sums, estate marks; and any change of the
 *   rest (rules, cluster hash, pending, carries, fence, attestations).
 *   Skipped, a copy would have said again what the last one said.
 * - A copy after skipped ones names the last one published (`prev`), so a
 *   member waits on no seq it was never sent (heard.ts `track`): its run of
 *   the seed's messages, on which rule changes and carried debts settle,
 *   holds as if it had heard every gossip.
 * - Every copy at the quiet pace says `prev`; one at the usual pace says it
 *   only after a skip. A member reads the seed alive for the quiet time on
 *   the word of the seed's last copy, as it reads a member's `nolease`; so
 *   a copy is skipped only after one that said `prev` (members heard that
 *   they may wait).
 * - For `aliveTimeoutMs` after a member came into the seed's view (new,
 *   restarted, or back from a cut), every copy is published: it should
 *   hear the seed soon, to route its acquires (forward.ts).
 */
import { wire } from './wire.js'
import type { Gossip } from './messages.js'

/**
 * The fields a copy may have and still say nothing new, when they are as in
 * the last one published: the rest (sync, members, heard, leaving, ...) each
 * carry something a member acts on. `keys` and `acks` must also be empty.
 */
export const PLAIN_FIELDS: ReadonlySet<string> = new Set(['v', 't', 'node', 'epoch', 'inc', 'seq', 'now', 'pending', 'carries', 'cfg', 'rules', 'keys', 'acks', 'fenced', 'alloc', 'attest', 'estates'])

/** Whether copy `g` carries nothing a member acts on but what a copy just like it said before. */
export function plain (g: Gossip): boolean {
  if (g.keys.length > 0 || g.acks.length > 0) return false
  for (const [f, v] of Object.entries(g)) if (v !== undefined && !PLAIN_FIELDS.has(f)) return false
  return true
}

export class MemberCopies {
  /** The seq of the last copy published (0: none yet). */
  private lastSeq = 0
  private lastAt = -Infinity
  /** The last copy published if plain, less its seq and time (and fields set undefined), packed: a plain copy that matches it says nothing new. */
  private lastSaid: Uint8Array | null = null
  /** The last copy published said `prev`: members read this seed alive for the quiet time since (else skip none yet). */
  private lastQuiet = false
  private loudUntil = -Infinity

  /** A member came into view (new, restarted, back): publish every copy until `untilMs`. */
  memberReturned (untilMs: number): void {
    this.loudUntil = Math.max(this.loudUntil, untilMs)
  }

  /** Whether a member came into view lately: its copies go whole (gossip-repeat.ts). */
  loud (nowMs: number): boolean {
    return nowMs < this.loudUntil
  }

  /** The copy to publish of the members' copy `copy` at `nowMs` (with `prev` when due), or undefined: skip it. */
  next (copy: Gossip, nowMs: number, quietMs: number): Gossip | undefined {
    const isPlain = plain(copy)
    // Only a plain copy can match the next (plain) one.
    const said = isPlain ? packedLess(copy, SEQ_NOW) : null
    const quiet = isPlain && nowMs >= this.loudUntil
    if (quiet && this.lastQuiet && nowMs - this.lastAt < quietMs && said !== null && this.lastSaid !== null && equal(said, this.lastSaid)) return undefined
    const skipped = this.lastSeq > 0 && this.lastSeq < copy.seq - 1
    const out = quiet || skipped ? { ...copy, prev: Math.min(this.lastSeq, copy.seq - 1) } : copy
    this.lastSeq = copy.seq
    this.lastAt = nowMs
    this.lastSaid = said
    this.lastQuiet = out.prev !== undefined
    return out
  }
}

const SEQ_NOW: ReadonlySet<string> = new Set(['seq', 'now'])

/** `g`'s fields but those in `omit` (and those set undefined), packed; a copy, since the codec may reuse its buffer. */
export function packedLess (g: Gossip, omit: ReadonlySet<string>): Uint8Array {
  return Uint8Array.from(wire.pack(Object.fromEntries(Object.entries(g).filter(([f, v]) => v !== undefined && !omit.has(f)))))
}

export function equal (a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0
}
