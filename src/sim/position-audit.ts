/**
 * Positions are exact (cluster-protocol.md, "The ledger", "Invariants"), checked from outside
 * the nodes. A reclaim will credit a dead account's tokens as
 * `base_A − Σ_L pos_L[A]`; this checks, for every account that is alive,
 * per key, that the same sum equals what the account really has:
 *
 *     base_A − Σ_{L ∉ A} pos_L[A]  =  books_A
 *                                   + A's grants no receiver has applied
 *                                   + A's grants a receiver refused, less what A took back
 *                                   − grants to A that A credited and whose giver has not seen acked
 *                                   + grants to A that A refused, acked at the giver and not taken back
 *
 * - An account is an incarnation and the incarnations that continue it by
 *   clean restarts (`carries`), as the design's `acct` will name it; the
 *   positions of every incarnation ever (dead ones too, frozen at death) are
 *   summed over every epoch of the account.
 * - `base_A`: the share A would create the key with under its current rules
 *   if it allocates, else 0. Carry-over and burns keep `base + transfers`
 *   equal to the books (held + outstanding + deferred − burn owed), which is
 *   why rule changes and restarts need no term of their own.
 * - `books_A`: token-audit.ts's `booked` of the live incarnation's key, or
 *   the share it would create it with.
 * - The grant terms come from each grant's fate, learned from the ledgers'
 *   and transfers' own decisions (apply, ack, takeBack, refuse), which this
 *   audit wraps at each birth: the positions are what is checked, so they
 *   cannot be the witness.
 *
 * Assumes every credited item is placed (Transfers.credit can't fail in the
 * simulator's rules; the token audit would report such tokens as lost).
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Grant, GrantItem } from '../cluster/messages.js'
import { initialShare } from '../core/share.js'
import { booked, rulesOf } from './token-audit.js'

interface Fate {
  giverEpoch: string
  toEpoch: string
  items: GrantItem[]
  /** The receiver's ledger let it through (credited or refused). */
  applied: boolean
  refused: boolean
  /** The giver's ledger dropped it as acked. */
  acked: boolean
  /** The giver took it back after a refusal. */
  takenBack: boolean
}

export interface PositionDiscrepancy {
  node: string
  epoch: string
  key: string
  /** base − Σ positions held by others. */
  positions: number
  /** books plus the grant corrections. */
  books: number
}

function id (giverEpoch: string, toEpoch: string, seq: number): string {
  return `${giverEpoch}>${toEpoch}#${seq}`
}

export class PositionAudit {
  private readonly seeds: readonly string[]
  /** Every incarnation ever born. */
  private readonly cores: ClusterCore[] = []
  /** Every incarnation by epoch. */
  private readonly byEpoch = new Map<string, ClusterCore>()
  /** Live incarnations by node. */
  private readonly live = new Map<string, ClusterCore>()
  /** Epoch -> the first epoch of its account (clean restarts continue an account). */
  private readonly rootOf = new Map<string, string>()
  /** Account (root epoch) -> its epochs. */
  private readonly epochsOf = new Map<string, string[]>()
  private readonly fates = new Map<string, Fate>()
  /** Grants credited and acked: they weigh nothing any more, and a late copy must not reopen them. */
  private readonly done = new Set<string>()

  constructor (seeds: readonly string[]) {
    this.seeds = seeds
  }

  born (core: ClusterCore): void {
    const prev = core.carries[0]
    const root = prev !== undefined ? this.rootOf.get(prev) ?? core.epoch : core.epoch
    this.rootOf.set(core.epoch, root)
    const epochs = this.epochsOf.get(root)
    if (epochs === undefined) this.epochsOf.set(root, [core.epoch])
    else epochs.push(core.epoch)
    this.cores.push(core)
    this.byEpoch.set(core.epoch, core)
    this.live.set(core.node, core)
    this.watch(core)
  }

  died (core: ClusterCore): void {
    if (this.live.get(core.node) === core) this.live.delete(core.node)
  }

  /** A grant was created or resent. */
  granted (g: Grant): void {
    const k = id(g.epoch, g.toEpoch, g.seq)
    if (!this.fates.has(k) && !this.done.has(k)) this.fates.set(k, { giverEpoch: g.epoch, toEpoch: g.toEpoch, items: g.items, applied: false, refused: false, acked: false, takenBack: false })
  }

  /** Learn grant fates from the decisions themselves. */
  private watch (core: ClusterCore): void {
    const fate = (g: Grant): Fate | undefined => this.fates.get(id(g.epoch, g.toEpoch, g.seq))
    const ledger = core.ledger
    const apply = ledger.apply.bind(ledger)
    ledger.apply = (g, current) => {
      const r = apply(g, current)
      for (const cr of r.credit) { const f = fate(cr); if (f !== undefined) f.applied = true }
      return r
    }
    const ack = ledger.ack.bind(ledger)
    ledger.ack = (to, toEpoch, applied) => {
      const dropped = ack(to, toEpoch, applied)
      for (const g of dropped) { const f = fate(g); if (f !== undefined) f.acked = true }
      return dropped
    }
    const takeBack = ledger.takeBack.bind(ledger)
    ledger.takeBack = g => {
      const yes = takeBack(g)
      const f = fate(g)
      if (yes && f !== undefined) f.takenBack = true
      return yes
    }
    // A grant to a restart's ended epoch that its marks count as delivered is given, as if acked (estate-marks.ts).
    const marks = core.reclaim.marks
    const delivered = marks.onDelivered
    marks.onDelivered = g => {
      const f = fate(g)
      if (f !== undefined) f.acked = true
      delivered?.(g)
    }
    const transfers = core.transfers
    const refuse = transfers.refuse.bind(transfers)
    transfers.refuse = (g, why) => {
      const f = fate(g)
      if (f !== undefined) f.refused = true
      refuse(g, why)
    }
  }

  /** Per account (root epoch) and key: the grant terms of the identity (see the header). */
  private corrections (keys: ReadonlySet<string>): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>()
    const add = (epoch: string, key: string, n: number): void => {
      if (!keys.has(key) || n === 0) return
      const root = this.rootOf.get(epoch) ?? epoch
      let m = out.get(root)
      if (m === undefined) out.set(root, m = new Map())
      m.set(key, (m.get(key) ?? 0) + n)
    }
    for (const [fid, f] of this.fates) {
      if (f.applied && !f.refused && f.acked) { this.fates.delete(fid); this.done.add(fid); continue }
      // A pair one side settled (reclaim.ts) weighs nothing on the survivor's books any more: its flows and the settlement cancel.
      if (this.settledPair(f.giverEpoch, f.toEpoch)) continue
      for (const [k, n] of f.items) {
        if (!f.applied || f.refused) add(f.giverEpoch, k, n)
        if (f.applied && !f.refused && !f.acked) add(f.toEpoch, k, -n)
        // A refusal whose giver is a dead seed, settled for its heir (heir.ts), is never taken back either.
        if (f.refused && (f.acked || this.inheritedGiver(f.giverEpoch)) && !f.takenBack) add(f.toEpoch, k, n)
      }
    }
    for (const c of this.cores) for (const [k, n] of c.takenBackTokens) add(c.epoch, k, -n)
    // Grants to a dead seed taken back by its heir's marks (estate-marks.ts): in the giver's books again.
    for (const c of this.cores) for (const [k, n] of c.reclaim.marks.takenBack) add(c.epoch, k, -n)
    // Grants of its own crashed epoch that a journal restart took back (estate-returns.ts `restarted`): its books again.
    for (const c of this.cores) for (const [k, n] of c.reclaim.returns.ownReturned) add(c.epoch, k, -n)
    return out
  }

  /** Whether the incarnation of `epoch` is gone and its node is a seed settled for its heir by some live node. */
  private inheritedGiver (epoch: string): boolean {
    const g = this.byEpoch.get(epoch)
    if (g === undefined || this.live.get(g.node) === g) return false
    for (const l of this.live.values()) if (l.heir.homes.has(g.node) || l.heir.dead.has(g.node)) return true
    return false
  }

  /**
   * Whether a live core's incarnation, or one it carries, was settled by a
   * peer (reclaim.ts), alive or not since (a settlement outlives its
   * settler: its credits are in the settler's journal, a heir's in its
   * copies), or dropped what it carried (a quorum attests it).
   */
  private settledSomewhere (x: ClusterCore): boolean {
    // Attested dead by a quorum (it learned it and dropped its books): its heir or its lenders settle it, maybe later.
    if (x.reclaim.droppedCarried || x.reclaim.reclaimed) return true
    const lo = x.incarnation - x.carries.length
    for (const l of this.cores) if (l.node !== x.node && (l.reclaim.settled.get(x.node) ?? 0) >= lo) return true
    return false
  }

  /**
   * Whether either end of a grant settled the other's account (reclaim.ts):
   * any incarnation of an end's account counts, since a restart that carries
   * the epoch (a journal recovery) settles with the crashed one's positions.
   */
  private settledPair (giverEpoch: string, toEpoch: string): boolean {
    const g = this.byEpoch.get(giverEpoch)
    const r = this.byEpoch.get(toEpoch)
    if (g === undefined || r === undefined) return false
    return this.accountSettled(toEpoch, g) || this.accountSettled(giverEpoch, r)
  }

  /** Whether an incarnation of the account of `epoch` settled `dead`. */
  private accountSettled (epoch: string, dead: ClusterCore): boolean {
    const root = this.rootOf.get(epoch) ?? epoch
    for (const e of this.epochsOf.get(root) ?? [epoch]) {
      const l = this.byEpoch.get(e)
      // A seed with a share is settled without touching the survivor's books (its heir takes them: heir.ts).
      if (l !== undefined && settledAsMember(l, dead)) return true
    }
    return false
  }

  /** Every (live account, key) whose positions elsewhere disagree with its books. */
  check (keys: readonly string[]): PositionDiscrepancy[] {
    const bad: PositionDiscrepancy[] = []
    const corr = this.corrections(new Set(keys))
    for (const x of this.live.values()) {
      // An account settled somewhere is dead for accounting, even while its cut-off process lives on.
      if (this.settledSomewhere(x)) continue
      // A heir's books hold a dead seed's estate less what its copy could not vouch for (heir.ts): not exact by design.
      if (x.heir.mine.size > 0) continue
      const root = this.rootOf.get(x.epoch) ?? x.epoch
      const epochs = this.epochsOf.get(root) ?? [x.epoch]
      // What the other cores' positions say x's account has of each key: summed from their (sparse) entries, not
      // asked key by key (an audit at 200 nodes and 100 keys asked 4 million times, most of them zero).
      const others = new Map<string, number>()
      for (const l of this.cores) {
        // A dead member settled by x's account (a restart settles again, finding nothing left) is in x's books; a
        // dead seed's positions stay (its heir took them as they were).
        if (l.node === x.node || epochs.some(e => { const s = this.byEpoch.get(e); return s !== undefined && settledAsMember(s, l) })) continue
        const accts = l.positions.accounts(x.node)
        for (const e of epochs) for (const [key, n] of accts.get(e) ?? []) others.set(key, (others.get(key) ?? 0) + n)
      }
      for (const key of keys) {
        const rule = rulesOf(x).match(key)
        const base = x.limiter.allocate && rule !== undefined ? initialShare(rule.stock, rule.glob, key, x.node, this.seeds) : 0
        const ks = x.limiter.existing(key)
        const books = (ks !== undefined ? booked(ks) : base) + (corr.get(root)?.get(key) ?? 0)
        const positions = base - (others.get(key) ?? 0)
        if (Math.abs(positions - books) > 1e-6) bad.push({ node: x.node, epoch: x.epoch, key, positions, books })
      }
    }
    return bad
  }
}

/**
 * Whether `by` settled `dead`'s incarnation as a member's (its settlement
 * credited by's books), not as a seed's whose heir inherits it (reclaim.ts
 * settle: a seed not inherited yet, or an incarnation up to the one its
 * heir inherited).
 */
function settledAsMember (by: ClusterCore, dead: ClusterCore): boolean {
  if (!by.reclaim.isSettled(dead.node, dead.incarnation) || by.heir.dead.has(dead.node)) return false
  if (!by.heir.homes.has(dead.node)) return true
  return dead.incarnation > (by.heir.through.get(dead.node) ?? Infinity)
}
