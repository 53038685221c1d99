/**
 * Positions (cluster-protocol.md, "The ledger"): per other account and key, the net
 * tokens this node has taken from that account by transfer. Pure
 * bookkeeping; no token moves here.
 *
 *     +amount  a grant from the account is credited here (every item the
 *              ledger lets through and we do not refuse, including items
 *              Transfers.credit cannot place: they left the giver for us)
 *     -amount  a grant of ours to the account is acked (Ledger.ack returns
 *              the grants it drops)
 *     +amount  a refused grant of ours that had been counted as acked is
 *              taken back (the tokens never stayed there)
 *
 * Refused grants are never added at the receiver. So the two sides of a
 * pair differ only by grants applied and not yet acked, and for an account
 * A that is alive, `base_A − Σ_L pos_L[A]` is A's own books corrected by
 * its grants in flight (the simulator checks exactly this: position-audit.ts).
 * A reclaim of a dead account D counts `Σ_L pos_L[D]` against D's base.
 *
 * Accounts. Callers name the other side by what a grant carries, (node,
 * epoch); `accountOf` maps that to the account. Today every incarnation is
 * an account (the default: the epoch). When gossip carries `acct`, a clean
 * restart continues its predecessor's account and only `accountOf` changes.
 *
 * Memory: one number per (account, key) with a non-zero position; a zero is
 * deleted at once, so the common pattern (home -> node -> home) leaves
 * nothing. Cycles (X -> Y -> Z -> X) leave entries. Entries for a departed
 * node go when the ledger forgets it (`forget`, from intake.forgetDeparted).
 * Entries of an old incarnation of a node that is still a member stay until
 * then too: its account may live on (a clean restart) or be reclaimed. Once
 * reclaim lands, a dead account's entries are dropped by the reclaim's
 * relabel (§3.6), not by forgetting the node.
 */
import type { Grant, GrantItem } from './messages.js'

/** Which account an incarnation (node, epoch) belongs to. */
export type AccountOf = (node: string, epoch: string) => string

/** Today each incarnation is its own account. */
export const EPOCH_ACCOUNT: AccountOf = (_node, epoch) => epoch

export class Positions {
  /** node -> account -> key -> tokens (never 0). */
  private readonly byNode = new Map<string, Map<string, Map<string, number>>>()
  private readonly accountOf: AccountOf
  private count = 0

  constructor (accountOf: AccountOf = EPOCH_ACCOUNT) {
    this.accountOf = accountOf
  }

  /** A grant from (node, epoch) was credited here. */
  received (g: Grant): void {
    this.add(g.node, g.epoch, g.items, 1)
  }

  /** Grants of ours were acked (what Ledger.ack dropped). */
  acked (dropped: readonly Grant[]): void {
    for (const g of dropped) this.add(g.to, g.toEpoch, g.items, -1)
  }

  /** A refused grant of ours, counted as acked, came back to us. */
  takenBack (g: Grant): void {
    this.add(g.to, g.toEpoch, g.items, 1)
  }

  /** The position with one account on one key (0 when none). */
  of (node: string, account: string, key: string): number {
    return this.byNode.get(node)?.get(account)?.get(key) ?? 0
  }

  /** Every account of `node` this node has a position with, and the positions by key. */
  accounts (node: string): ReadonlyMap<string, ReadonlyMap<string, number>> {
    return this.byNode.get(node) ?? new Map()
  }

  /** Nodes with at least one position. */
  nodes (): IterableIterator<string> {
    return this.byNode.keys()
  }

  /** The node left for good: its accounts' entries go (see the header). */
  forget (node: string): void {
    const accts = this.byNode.get(node)
    if (accts === undefined) return
    for (const a of [...accts.keys()]) this.forgetAccount(node, a)
  }

  /** One account of `node` was settled (reclaim.ts): its entries go. */
  forgetAccount (node: string, account: string): void {
    const accts = this.byNode.get(node)
    const keys = accts?.get(account)
    if (accts === undefined || keys === undefined) return
    this.count -= keys.size
    accts.delete(account)
    if (accts.size === 0) this.byNode.delete(node)
  }

  /** Non-zero (account, key) entries kept. */
  get size (): number {
    return this.count
  }

  private add (node: string, epoch: string, items: readonly GrantItem[], sign: 1 | -1): void {
    const account = this.accountOf(node, epoch)
    let accts = this.byNode.get(node)
    if (accts === undefined) this.byNode.set(node, accts = new Map())
    let keys = accts.get(account)
    if (keys === undefined) accts.set(account, keys = new Map())
    for (const [key, amount] of items) {
      const before = keys.get(key)
      // Amounts are whole tokens (a receiver refuses anything else), so the sum is exact and 0 means 0.
      const next = (before ?? 0) + sign * amount
      if (next === 0) {
        if (before !== undefined) { keys.delete(key); this.count-- }
      } else {
        if (before === undefined) this.count++
        keys.set(key, next)
      }
    }
    if (keys.size === 0) accts.delete(account)
    if (accts.size === 0) this.byNode.delete(node)
  }
}
