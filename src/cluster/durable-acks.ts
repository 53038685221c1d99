/**
 * A replicating seed acks a grant only once the journal write holding its
 * credit is at a quorum of its copies (replication.ts). Why: its giver drops
 * the grant at the ack, so should the seed then die for good, the credit
 * lives only in its books; its heir credits what the copy it reads holds
 * (estate.ts), and a credit acked before any copy had it was lost (the
 * "credits not yet copied" of cluster-protocol.md, "Failure cases": 77 of 300
 * tokens once in `crash-joined`, on a busy machine where the copies lagged).
 * With the ack after the copy, each grant to the seed is either in the copy
 * its heir reads (credited there, and its giver drops it at the ack or by
 * the copy's marks) or still unacked at its giver, which takes it back when
 * the copy's marks say the books lack it (estate-marks.ts). Nothing falls
 * between.
 *
 * Per giver pair, the credits applied here whose write is not yet at a
 * quorum, oldest first: the pair's mark before each (what may be acked
 * while it waits) and where it was written (null until the journal's next
 * write takes it). Positions grow, and durability with them, so the front
 * of each list is the first to become durable. Pure; the replication feeds
 * it its writes and its durability.
 *
 * A node that does not replicate (a member, a lone seed, leases off) acks
 * what it applied once its own journal has it (node-effects.ts): it keeps
 * no entries here.
 */
import type { ReplPos } from './replication.js'

interface Waiting { before: number, at: ReplPos | null }

export class DurableAcks {
  /** `${giver}/${giverEpoch}` -> the credits waiting for a quorum, oldest first. */
  private readonly waiting = new Map<string, Waiting[]>()

  /** A grant of `giver`/`giverEpoch` was credited here; `before` is the pair's applied mark before it. */
  applied (giver: string, giverEpoch: string, before: number): void {
    const id = `${giver}/${giverEpoch}`
    const list = this.waiting.get(id)
    if (list === undefined) { this.waiting.set(id, [{ before, at: null }]); return }
    // One not yet written covers this one too: they go to disk, and to the copies, in the same write.
    if (list[list.length - 1].at === null) return
    list.push({ before, at: null })
  }

  /** The journal's write ending at `head` was taken: it holds every credit not yet placed. */
  place (head: ReplPos): void {
    for (const list of this.waiting.values()) {
      const last = list[list.length - 1]
      if (last.at === null) last.at = { ...head }
    }
  }

  /** Drop the credits whose writes are durable now. */
  advance (isDurable: (pos: ReplPos) => boolean): void {
    for (const [id, list] of this.waiting) {
      let i = 0
      while (i < list.length && list[i].at !== null && isDurable(list[i].at as ReplPos)) i++
      if (i === list.length) this.waiting.delete(id)
      else if (i > 0) list.splice(0, i)
    }
  }

  /** What may be acked of the pair whose applied mark is `applied`: up to the first credit still waiting. */
  ackable (giver: string, giverEpoch: string, applied: number): number {
    const list = this.waiting.get(`${giver}/${giverEpoch}`)
    return list === undefined ? applied : Math.min(applied, list[0].before)
  }

  /** Nothing waits. */
  get idle (): boolean {
    return this.waiting.size === 0
  }

  /** Credits waiting, over every pair (status). */
  get size (): number {
    let n = 0
    for (const list of this.waiting.values()) n += list.length
    return n
  }

  /** Replication stopped (the share was inherited): nothing waits for copies any more. */
  clear (): void {
    this.waiting.clear()
  }
}
