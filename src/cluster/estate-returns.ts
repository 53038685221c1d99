/**
 * Grants in flight *from* a seed that died for good: taken back by its heir
 * (the mirror of estate-marks.ts, which settles the grants in flight *to*
 * it).
 *
 * A seed D gives (debits its books, journals the give) before its grant
 * leaves, and the grant stays in its ledger until the receiver acks it. If
 * D dies meanwhile, a receiver L that has not applied the grant refuses it
 * from its settlement of D on (reclaim.ts settleSeed): the tokens are in no
 * one's books. That used to be lost for good, and under load it is not a
 * grant or two: an asker whose want replies arrive after its timeout asks
 * again, and D gives again, so D's books drain into its ledger (on real
 * processes at a load average of 14, 160 of a 300-token stock were lost
 * this way; `test/sim-estate-returns.test.ts` reproduces it).
 *
 * D's journal names each grant in the batch that holds its give (`sent`
 * entries; checkpoints list the unacked ones), so a copy that has a give
 * names its grant. Every survivor L, when it settles D, reads its applied
 * mark for each of D's epochs, which can never rise again (D's grants are
 * refused from then on), and gossips it for `waitMs` (`deadApplied`:
 * [D, D's epoch, seq]). The heir, for each grant in the copy it credited
 * from D to L's current epoch, takes back those above L's mark: a credit
 * deferred to the rule's horizon, and, since the copy counted the grant as
 * held by L (`peers`), L holds that much less of the heir's tokens.
 *
 * Why nothing is counted twice: a grant above L's final mark was never
 * applied by that incarnation of L, nor can it be; the copy's books have its
 * give, so the estate lacks its tokens; only the heir takes it back, once
 * (the pending grants go at the first report). A give after the copy's end
 * is not named and is not taken back: it is under the copy's reservation,
 * which the heir's credit deducts already (estate.ts).
 */
import type { ClusterCore } from './cluster-core.js'
import { CLUSTER_VERSION, type DeadApplied, type Grant } from './messages.js'
import { creditAtHorizon } from './recovery.js'

/** Reports kept per gossip, at most (the parser's bound, maxPeers, is higher). */
export const MAX_APPLIED_PER_GOSSIP = 64
/** Receivers' marks from their heirs kept for givers not inherited yet, at most (`receiverInherited`). */
const MAX_HEIR_MARKS = 4096

interface Pending {
  dead: string
  epoch: string
  /** `${to}\0${toEpoch}` -> seq -> items, of the copy's grants not yet decided. */
  sent: Map<string, Map<number, Array<[string, number]>>>
  until: number
  /** A restart's own: when its probes last went (`probes`). */
  probedAt?: number
}

export class EstateReturns {
  private readonly c: ClusterCore
  /** Survivor: `${dead}\0${epoch}` -> our final applied mark of its grants, gossiped until `until`. */
  private readonly reports = new Map<string, { dead: string, epoch: string, seq: number, until: number }>()
  /** Heir: the copies' grants waiting for their receivers' reports. */
  private readonly pending: Pending[] = []
  /**
   * Receivers that died too, by their heirs' word (`receiverInherited`): `${giver}\0${giver epoch}\0${to}\0${to
   * epoch}` -> the mark of the receiver's copy. Kept (bounded) for a giver inherited after they came.
   */
  private readonly heirMarks = new Map<string, number>()
  /** Per key: tokens taken back (the simulator's audits read it). */
  readonly returned = new Map<string, number>()
  /** Per key: of those, taken back of this node's own crashed epoch's grants (`restarted`). */
  readonly ownReturned = new Map<string, number>()
  /** `tokensReturnedOwn`: of `tokensReturned`, this node's own crashed epoch's grants (`restarted`). */
  readonly counters = { tokensReturned: 0, grantsReturned: 0, tokensReturnedOwn: 0 }
  /** Told of each grant taken back: [dead, dead epoch, to, to epoch, seq] (the simulator's token audit checks it). */
  onReturn: ((dead: string, deadEpoch: string, to: string, toEpoch: string, seq: number, items: ReadonlyArray<[string, number]>) => void) | null = null

  constructor (core: ClusterCore) {
    this.c = core
  }

  /** How long reports are gossiped and a heir waits for them (as the marks: estate-marks.ts). */
  get waitMs (): number {
    return this.c.reclaim.marks.waitMs
  }

  /**
   * Survivor, settling dead seed `node` (before its marks go, reclaim.ts
   * markSettled): its grants are refused from now on, so our applied mark
   * of each of its epochs is final. Reported only where it is known: an
   * epoch we hold a mark for, or `current`, the epoch our peer table has
   * for it (its marks are dropped only at its settlement). The marks of an
   * epoch that ended before (a newer incarnation was heard) are gone, and
   * 0 would be a lie: the heir would take back grants we applied (the
   * simulator's heal-settle, a zombie seed restarted before some survivor
   * settled it, created 19 tokens that way).
   */
  settled (node: string, current: string | undefined, nowMs: number): void {
    const c = this.c
    const all = new Set(c.ledger.appliedEpochs(node))
    if (current !== undefined) all.add(current)
    this.report(node, all, nowMs)
  }

  /** Our applied mark of each of `node`'s `epochs`, final now: gossiped for `waitMs`. */
  private report (node: string, epochs: Iterable<string>, nowMs: number): void {
    for (const e of epochs) this.reports.set(`${node}\u0000${e}`, { dead: node, epoch: e, seq: this.c.ledger.appliedFrom(node, e), until: nowMs + this.waitMs })
  }

  /**
   * Our final applied marks of givers' ended or settled epochs, while they are reported: [giver, epoch, seq]. A
   * stop saves them with the current epochs' marks (persist.ts), so that its restart answers a probe of such an
   * epoch truthfully (estate-marks.ts ownEnded). Saved without them, the restart answered 0 for a giver whose new
   * epoch it had heard before the stop, and the giver's restart took back grants applied here (chaos 3+2 seed 20:
   * a seed killed and recovered, another stopped cleanly right after; tokens created on every key the first homed).
   */
  finalMarks (): Array<[string, string, number]> {
    return [...this.reports.values()].map(r => [r.dead, r.epoch, r.seq])
  }

  /** For gossip: our final marks of dead seeds' grants, while they last. */
  take (nowMs: number): DeadApplied[] {
    const out: DeadApplied[] = []
    for (const [id, r] of this.reports) {
      if (r.until <= nowMs) { this.reports.delete(id); continue }
      if (out.length < MAX_APPLIED_PER_GOSSIP) out.push([r.dead, r.epoch, r.seq])
    }
    return out
  }

  /**
   * Receiver, when giver `node`'s epoch `ended` is over (its new epoch `now` was heard: intake.ts endedEpoch,
   * before its marks go): our applied mark of each of its ended epochs is final, since their grants are refused from
   * here on. `ended` was its current epoch, so a mark of 0 for it is the truth, not a forgotten mark; other epochs
   * are reported only where a mark is kept. Its restart from its journal takes back, by these, the grants it made
   * that never arrived (`restarted`), as a heir does for a dead seed.
   */
  ended (node: string, ended: string, now: string, nowMs: number): void {
    const all = new Set(this.c.ledger.appliedEpochs(node))
    all.add(ended)
    all.delete(now)
    this.report(node, all, nowMs)
  }

  /**
   * This node restarted from its journal: the grants its crashed epoch made and had not seen acked (the journal's
   * `sent`), to be taken back where their receivers' final marks show they never arrived. Only once this
   * incarnation's carried books are its own for good (carrier.ts isSafe): until then a quorum may still attest the
   * crashed epoch, and then a heir takes them back (a seed's) or the receivers' settlement credits them (a member's),
   * and this restart drops its books instead. Before, such grants were lost for good (sim heal-settle seed 1: 7 of 35,
   * in a grant from a crashed seed to a peer that stopped before it applied it).
   */
  restarted (epoch: string, sent: Map<string, Map<number, Array<[string, number]>>>): void {
    if (sent.size > 0) this.ownOnceSafe = { epoch, sent, early: new Map() }
  }

  /** `early`: receivers' final marks of those grants heard before it may act (`${to}\0${toEpoch}` -> seq). */
  private ownOnceSafe: { epoch: string, sent: Map<string, Map<number, Array<[string, number]>>>, early: Map<string, number> } | null = null

  /**
   * Member account (to, toEpoch) was settled here (reclaim-settle.ts): the credit counted every grant in flight to
   * it (unacked, or as given in the holdings a journal or a copy restored), so none is taken back from now on.
   * (Chaos 3+2 seed 10: a seed settled a paused member whose grants were lost with its connections, crashed, and its
   * restart took the same grants back; every key overshot from then on.) A take-back decided before the settlement
   * is no double: it restored the holding (`decide`), which the settlement then credits that much less.
   */
  receiverSettled (to: string, toEpoch: string): void {
    const id = `${to}\u0000${toEpoch}`
    for (const p of this.pending) p.sent.delete(id)
    this.ownOnceSafe?.sent.delete(id)
  }

  /**
   * Restart: receiver `to`'s ended epoch `toEpoch` applied this node's crashed epoch `giverEpoch`'s grants up to
   * `mark` (its restart said so: a gossiped estate mark, or Ack.ended in the reply to a probe).
   */
  onEnded (to: string, toEpoch: string, giverEpoch: string, mark: number, nowMs: number): void {
    for (const p of this.pending) if (p.dead === this.c.node && p.epoch === giverEpoch) this.decide(p, to, toEpoch, mark, nowMs)
  }

  /**
   * Restart: its crashed epoch's grants to receivers that restarted too, sent again as probes (the last of each, every
   * `everyMs`): addressed to an ended epoch, never applied; the reply names that epoch's final mark (Ack.ended). A
   * receiver's restart gossips marks only for the givers it hears, under their current epoch, so without the probe
   * a grant from a crashed giver to a stopped receiver stayed lost.
   */
  probes (nowMs: number, everyMs: number): Grant[] {
    const c = this.c
    const out: Grant[] = []
    for (const p of this.pending) {
      if (p.dead !== c.node || nowMs - (p.probedAt ?? -Infinity) < everyMs) continue
      p.probedAt = nowMs
      for (const [id, bySeq] of p.sent) {
        const i = id.indexOf('\u0000')
        const to = id.slice(0, i)
        const toEpoch = id.slice(i + 1)
        const known = c.peers.get(to)?.epoch
        if (known === undefined || known === toEpoch) continue
        const seq = Math.max(...bySeq.keys())
        const items = (bySeq.get(seq) ?? []).map(([k, n]) => [k, n, 0] as [string, number, number])
        out.push({ v: CLUSTER_VERSION, t: 'grant', node: c.node, epoch: p.epoch, inc: c.incarnation - 1, to, toEpoch, seq, items })
      }
    }
    return out
  }

  /**
   * Heir, after crediting dead seed `dead`'s copy: its grants wait for their receivers' marks; ours are decided now.
   * Returns what waits (undefined: nothing).
   */
  inherited (dead: string, epoch: string, sent: Map<string, Map<number, Array<[string, number]>>>, nowMs: number): Pending | undefined {
    // Those to an account settled here before: its settlement credited them (`receiverSettled`).
    for (const id of [...sent.keys()]) {
      const i = id.indexOf('\u0000')
      if (this.c.reclaim.settledAccount(id.slice(0, i), id.slice(i + 1))) sent.delete(id)
    }
    if (sent.size === 0) return undefined
    const p: Pending = { dead, epoch, sent, until: nowMs + this.waitMs }
    this.pending.push(p)
    const own = this.reports.get(`${dead}\u0000${epoch}`)
    if (own !== undefined) this.decide(p, this.c.node, this.c.epoch, own.seq, nowMs)
    for (const id of [...sent.keys()]) {
      const mark = this.heirMarks.get(`${dead}\u0000${epoch}\u0000${id}`)
      const i = id.indexOf('\u0000')
      if (mark !== undefined) this.decide(p, id.slice(0, i), id.slice(i + 1), mark, nowMs)
    }
    return p
  }

  /**
   * The heir of dead seed `to` (its epoch `toEpoch`) credited a copy that holds the grants of `giver`'s epoch
   * `giverEpoch` up to `mark` (estate-marks.ts: this node, or the heir's gossip). If that giver is dead as well and
   * its grants wait here, no receiver lives to report: the copy's mark is the receiver's last word. A grant above it
   * has no credit in the receiver's estate, and one the receiver applied after the copy and gave on is covered by
   * the copy's reservation, which its heir's credit deducts (estate.ts), so taking it back doubles nothing. Before,
   * such grants waited for a report that never came and were lost (sim chaos 5 seeds seed 37: a cut-off seed gave
   * 12 to another cut off with it, which was then killed; one heir inherited both, and the 12 were gone for good).
   */
  receiverInherited (to: string, toEpoch: string, giver: string, giverEpoch: string, mark: number, nowMs: number): void {
    if (giver === this.c.node && giverEpoch === this.c.epoch) return
    const id = `${giver}\u0000${giverEpoch}\u0000${to}\u0000${toEpoch}`
    if (!this.heirMarks.has(id) && this.heirMarks.size >= MAX_HEIR_MARKS) this.heirMarks.delete(this.heirMarks.keys().next().value as string)
    this.heirMarks.set(id, mark)
    for (const p of this.pending) if (p.dead === giver && p.epoch === giverEpoch) this.decide(p, to, toEpoch, mark, nowMs)
  }

  /** A gossip's reports, from `from` (its epoch `fromEpoch`): its applied marks of dead seeds' grants. */
  onReports (from: string, fromEpoch: string, entries: readonly DeadApplied[], nowMs: number): void {
    const own = this.ownOnceSafe
    for (const [dead, epoch, seq] of entries) {
      // Of our crashed epoch, heard before this restart may act on them (`restarted`): kept until it may. Dropped,
      // they left only the probes, answered by a receiver's restart that may no longer know the mark.
      if (own !== null && dead === this.c.node && epoch === own.epoch && own.sent.has(`${from}\u0000${fromEpoch}`)) {
        own.early.set(`${from}\u0000${fromEpoch}`, seq)
      }
    }
    if (this.pending.length === 0) return
    for (const [dead, epoch, seq] of entries) {
      for (const p of this.pending) if (p.dead === dead && p.epoch === epoch) this.decide(p, from, fromEpoch, seq, nowMs)
    }
  }

  /** The grants of `p` to (to, toEpoch): those above `mark` are taken back. */
  private decide (p: Pending, to: string, toEpoch: string, mark: number, nowMs: number): void {
    const id = `${to}\u0000${toEpoch}`
    const bySeq = p.sent.get(id)
    if (bySeq === undefined) return
    p.sent.delete(id)
    const c = this.c
    for (const [seq, items] of bySeq) {
      if (seq <= mark) continue
      this.onReturn?.(p.dead, p.epoch, to, toEpoch, seq, items)
      this.counters.grantsReturned++
      for (const [k, n] of items) {
        // Deferred like the rest of the estate (the heir credits nothing of it before the horizon).
        if (!creditAtHorizon(c, k, n, nowMs)) continue
        // The copy counted it as held by the receiver (its `peers`, now the heir's): it never got there.
        if (to !== c.node) c.reclaim.restore(to, toEpoch, k, n)
        this.returned.set(k, (this.returned.get(k) ?? 0) + n)
        if (p.dead === c.node) {
          this.ownReturned.set(k, (this.ownReturned.get(k) ?? 0) + n)
          this.counters.tokensReturnedOwn += n
        }
        this.counters.tokensReturned += n
      }
    }
    // What it holds of the receiver's tokens goes to disk with the credit (the checkpoint's `peers`).
    c.journal.checkpointNeeded = true
  }

  /** Housekeeping: pending copies whose receivers never reported are dropped (those grants stay lost). */
  update (nowMs: number): void {
    const own = this.ownOnceSafe
    const carrier = this.c.reclaim.carrier
    if (own !== null && (carrier.isSafe || carrier.dropped)) {
      this.ownOnceSafe = null
      const p = carrier.dropped ? undefined : this.inherited(this.c.node, own.epoch, own.sent, nowMs)
      if (p !== undefined) {
        // The reports heard before it could act (`onReports`).
        for (const [id, seq] of own.early) {
          const i = id.indexOf('\u0000')
          this.decide(p, id.slice(0, i), id.slice(i + 1), seq, nowMs)
        }
      }
    }
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const p = this.pending[i]
      if (p.sent.size === 0 || p.until <= nowMs) this.pending.splice(i, 1)
    }
  }

  status (): Record<string, unknown> {
    let waiting = 0
    for (const p of this.pending) waiting += p.sent.size
    return { reporting: this.reports.size, waitingReceivers: waiting, ...this.counters }
  }
}
