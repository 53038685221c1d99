/**
 * The receiver's side of the transfer ledger (ledger.ts): per giver
 * incarnation, the highest grant seq applied here, the grants that arrived
 * ahead of a gap, and the givers' incarnations settled dead. It decides
 * whether an incoming grant may be credited; the giver's side (outboxes,
 * resends, tokens in transit) stays in ledger.ts.
 *
 * Apart because the two sides share no state: a node's marks are written
 * only by the grants it receives, its outboxes only by the grants it makes.
 * The argument that no message can create a token (ledger.ts's header)
 * rests on this side's rule: grant `seq` is applied only if it is
 * `applied + 1` for its pair, and only from the giver's current epoch or
 * one whose mark is still kept.
 */
import type { Grant } from './messages.js'

export type ApplyResult = 'applied' | 'duplicate' | 'early' | 'gap' | 'wrong-epoch' | 'old-epoch'

/** Early grants held per giver incarnation; beyond this they are dropped and come back by retransmit. */
export const MAX_EARLY = 64

export class AppliedMarks {
  /** `${giver}/${giverEpoch}` -> highest seq applied. */
  private readonly applied = new Map<string, number>()
  /** `${giver}/${giverEpoch}` -> grants that arrived before their predecessors, by seq. */
  private readonly early = new Map<string, Map<number, Grant>>()
  /** giver -> the highest incarnation settled dead. */
  private readonly dead = new Map<string, number>()
  /** `${giver}/${giverEpoch}` whose marks went (its epoch ended, or the giver was forgotten): never taken again. */
  private readonly closed = new Set<string>()

  /**
   * Decide an incoming grant addressed to this incarnation. Returns what to
   * credit now, in seq order: the grant and any held successors it unblocks
   * (empty if none may be).
   */
  apply (g: Grant, currentEpoch: string | undefined): { result: ApplyResult, credit: Grant[] } {
    if (g.inc <= (this.dead.get(g.node) ?? 0)) return { result: 'old-epoch', credit: [] }
    const id = `${g.node}/${g.epoch}`
    const mark = this.applied.get(id)
    // A giver this node has not heard (no peer entry: its gossip has not come, or it was forgotten) is taken in
    // order like any other, so that the refusal that follows (grant-checks.ts: not a peer this node has heard) is
    // binding: its seq is used up here, the giver takes its tokens back, and no copy of it can be credited later.
    // Refused `old-epoch` instead (not binding), a grant a stopping node handed to a peer that had not heard it yet
    // stayed in the giver's ledger until its stop ended, and was lost with it (sim `stops`, seeds 6 and 15). An
    // epoch whose marks went is never taken: a grant it made may have been credited under them.
    if (mark === undefined && (currentEpoch !== undefined ? g.epoch !== currentEpoch : this.closed.has(id))) return { result: 'old-epoch', credit: [] }
    let last = mark ?? 0
    if (g.seq <= last) return { result: 'duplicate', credit: [] }
    if (g.seq !== last + 1) {
      let held = this.early.get(id)
      if (held === undefined) this.early.set(id, held = new Map())
      if (held.has(g.seq)) return { result: 'duplicate', credit: [] }
      if (held.size >= MAX_EARLY) return { result: 'gap', credit: [] }
      held.set(g.seq, g)
      return { result: 'early', credit: [] }
    }
    const credit = [g]
    last = g.seq
    const held = this.early.get(id)
    if (held !== undefined) {
      for (let next = held.get(last + 1); next !== undefined; next = held.get(last + 1)) {
        held.delete(last + 1)
        credit.push(next)
        last++
      }
      if (held.size === 0) this.early.delete(id)
    }
    this.applied.set(id, last)
    return { result: 'applied', credit }
  }

  appliedFrom (giver: string, giverEpoch: string): number {
    return this.applied.get(`${giver}/${giverEpoch}`) ?? 0
  }

  /**
   * [giver, epoch, applied] for gossip: only for givers' current epochs (an
   * old incarnation has no one left to read its acks), so the list stays one
   * entry per peer. The applied marks themselves are all kept (see ledger.ts's header).
   */
  acks (current: ReadonlyMap<string, string>): Array<[string, string, number]> {
    const out: Array<[string, string, number]> = []
    for (const [id, n] of this.applied) {
      const i = id.lastIndexOf('/')
      const giver = id.slice(0, i)
      const epoch = id.slice(i + 1)
      if (current.get(giver) === epoch) out.push([giver, epoch, n])
    }
    return out
  }

  /** The epochs of `giver` whose grants this node has applied (their marks: a settled seed's, for its heir). */
  appliedEpochs (giver: string): string[] {
    const out: string[] = []
    for (const id of this.applied.keys()) {
      const i = id.lastIndexOf('/')
      if (id.slice(0, i) === giver) out.push(id.slice(i + 1))
    }
    return out
  }

  /** Incarnations of `giver` up to `inc` are settled dead (reclaim.ts): their grants are never applied, and their marks go. */
  deadGiver (giver: string, inc: number, newer: ReadonlySet<string> = new Set()): void {
    this.dead.set(giver, Math.max(inc, this.dead.get(giver) ?? 0))
    if (this.dead.size > 4096) this.dead.delete(this.dead.keys().next().value as string)
    // Not the marks of `newer`, the epochs of later incarnations: a restart that settles an old incarnation late
    // (its settled set is not kept) dropped the live one's mark with the rest, and every grant of that pair was a gap
    // from then on, unacked for good (sim chaos 5 seeds seed 34: 70 tokens stuck between two live seeds).
    this.drop(id => id.slice(0, id.lastIndexOf('/')) === giver && !newer.has(id.slice(id.lastIndexOf('/') + 1)))
  }

  /** A giver is now incarnation `epoch`: the marks of its other epochs go (see ledger.ts's header). */
  giverEpoch (giver: string, epoch: string): void {
    this.drop(id => {
      const i = id.lastIndexOf('/')
      return id.slice(0, i) === giver && id.slice(i + 1) !== epoch
    })
  }

  /** The marks (and early grants) of the giver epochs `which` picks go; those epochs are closed (see apply). */
  private drop (which: (id: string) => boolean): void {
    for (const id of [...this.applied.keys()]) {
      if (!which(id)) continue
      this.applied.delete(id)
      this.closed.add(id)
      if (this.closed.size > 4096) this.closed.delete(this.closed.values().next().value as string)
    }
    for (const id of [...this.early.keys()]) if (which(id)) this.early.delete(id)
  }

  /** Applied marks and early-grant sets kept (bounded by live peers). */
  get size (): number {
    return this.applied.size + this.early.size
  }
}
