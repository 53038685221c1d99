/**
 * The fate of every grant the simulator has seen, for the conservation
 * audit (token-audit.ts): open (its tokens in transit, or stranded while it
 * can no longer be applied), applied (its tokens in the receiver's books),
 * or settled as never applied (stranded, unless a heir takes it back).
 *
 * Apart from token-audit.ts, which counts the nodes' books (live, saved,
 * crashed, inherited): a grant's fate depends only on its receiver's
 * applied mark and on whether its giver, receiver and copies still exist.
 * What is stranded here goes to the audit's books through `strand`, so the
 * invariant `held + transit + saved + stranded = stock` is still summed in
 * one place. A fate, once known, is final: a resend never reopens it.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Grant } from '../cluster/messages.js'

interface GrantRecord {
  giverEpoch: string
  toEpoch: string
  giver: string
  seq: number
  items: Grant['items']
  /** Copies in the network right now. */
  copies: number
}

export class GrantFates {
  /** Live incarnations by epoch (the audit's own map). */
  private readonly live: ReadonlyMap<string, ClusterCore>
  /** Adds tokens of a key to the audit's stranded books (negative: they leave). */
  private readonly strandTokens: (key: string, n: number) => void
  private readonly open = new Map<string, GrantRecord>()
  /** Grants whose fate is known (a resend of one must not reopen it). */
  private readonly settled = new Set<string>()
  /** Grants settled as never applied (their tokens are in `stranded`): a heir may take them back (estate-returns.ts). */
  private readonly strandedIds = new Map<string, GrantRecord>()
  /** Tokens of grants ever applied, for the report. */
  applied = 0

  constructor (live: ReadonlyMap<string, ClusterCore>, strandTokens: (key: string, n: number) => void) {
    this.live = live
    this.strandTokens = strandTokens
  }

  private static id (g: { giverEpoch: string, toEpoch: string, seq: number }): string {
    return `${g.giverEpoch}>${g.toEpoch}#${g.seq}`
  }

  /** A grant was created or resent. */
  granted (g: Grant): void {
    const id = GrantFates.id({ giverEpoch: g.epoch, toEpoch: g.toEpoch, seq: g.seq })
    if (!this.open.has(id) && !this.settled.has(id)) {
      this.open.set(id, { giverEpoch: g.epoch, toEpoch: g.toEpoch, giver: g.node, seq: g.seq, items: g.items, copies: 0 })
    }
  }

  /** A copy of a grant entered (+1) or left (-1) the network. */
  copies (g: Grant, delta: number): void {
    const r = this.open.get(GrantFates.id({ giverEpoch: g.epoch, toEpoch: g.toEpoch, seq: g.seq }))
    if (r !== undefined) r.copies += delta
  }

  /** Incarnation `core` ended (after `settle`): the open grants to it are settled, applied or stranded. */
  receiverDied (core: ClusterCore): void {
    for (const [id, r] of this.open) {
      if (r.toEpoch !== core.epoch) continue
      // What it applied is in its books; what it did not can never be applied now.
      if (core.ledger.appliedFrom(r.giver, r.giverEpoch) < r.seq) this.strand(r, id)
      else this.applied += sum(r.items)
      this.open.delete(id)
      this.settled.add(id)
    }
  }

  private strand (r: GrantRecord, id: string): void {
    for (const [k, n] of r.items) this.strandTokens(k, n)
    this.strandedIds.set(id, r)
  }

  /** An open grant that can no longer be applied: its receiver ended, or its giver did with no copy left in the network. */
  private lost (r: GrantRecord): boolean {
    return !this.live.has(r.toEpoch) || (!this.live.has(r.giverEpoch) && r.copies === 0)
  }

  /**
   * A heir took back a dead seed's grant that its receiver says it never
   * applied (estate-returns.ts): if that is so, its tokens leave `stranded`
   * (or were counted there while it was open) for the heir's books. If the
   * receiver had applied it, nothing leaves: the tokens count twice, and
   * the run fails as tokens created.
   */
  estateReturn (giverEpoch: string, toEpoch: string, seq: number): void {
    const id = GrantFates.id({ giverEpoch, toEpoch, seq })
    const r = this.open.get(id)
    if (r !== undefined) {
      // Open: counted stranded by account() (its giver is dead, no copy is in the network) or in transit; applied never.
      const to = this.live.get(r.toEpoch)
      if (to !== undefined && to.ledger.appliedFrom(r.giver, r.giverEpoch) >= r.seq) return
      this.open.delete(id)
      this.settled.add(id)
      return
    }
    const stranded = this.strandedIds.get(id)
    if (stranded === undefined) return
    this.strandedIds.delete(id)
    for (const [k, n] of stranded.items) this.strandTokens(k, -n)
  }

  /** Move grants whose fate is known out of `open` (token-audit.ts's `settle` says when). */
  settle (): void {
    for (const [id, r] of this.open) {
      const to = this.live.get(r.toEpoch)
      if (to !== undefined && to.ledger.appliedFrom(r.giver, r.giverEpoch) >= r.seq) {
        this.applied += sum(r.items)
        this.open.delete(id)
        this.settled.add(id)
      } else if (to === undefined && !this.live.has(r.giverEpoch) && r.copies === 0) {
        // Its receiver is gone without applying it: stranded. (died() settles those too.)
        this.strand(r, id)
        this.open.delete(id)
        this.settled.add(id)
      }
    }
  }

  /** The grants whose tokens are stranded now: settled as never applied, or open and no longer appliable. */
  strandedGrants (): Array<{ giverEpoch: string, toEpoch: string, seq: number, tokens: number }> {
    const lost = [...this.open.values()].filter(r => this.lost(r))
    return [...this.strandedIds.values(), ...lost].map(r => ({ giverEpoch: r.giverEpoch, toEpoch: r.toEpoch, seq: r.seq, tokens: sum(r.items) }))
  }

  /** Add the tokens of `key` in open grants to `a`: in transit, or stranded if the grant can no longer be applied. */
  count (key: string, a: { transit: number, stranded: number }): void {
    for (const r of this.open.values()) {
      const lost = this.lost(r)
      for (const [k, n] of r.items) {
        if (k !== key) continue
        if (lost) a.stranded += n
        else a.transit += n
      }
    }
  }
}

function sum (items: Grant['items']): number {
  let s = 0
  for (const [, n] of items) s += n
  return s
}
