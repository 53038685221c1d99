/**
 * Rule changes in a cluster (SIGHUP, or a clean restart with a changed
 * file: both run this same code).
 *
 * Carry-over, per key: the key's tokens stay where they are. This node
 * keeps what it holds and what it has outstanding (spent again now, so
 * nothing returns early), and adds or destroys only the change in its own
 * pre-allocated share. Summed over the seeds, the cluster's tokens move by
 * exactly the change in the rule's stock, wherever they had travelled.
 * (Rebuilding from the new share, as a lone node may, would re-create tokens
 * that had moved to other nodes.)
 *
 * What cannot be destroyed at once, because this node holds too little, is
 * a burn it owes (`KeyExt.burn`): paid from tokens as they come back or
 * arrive, asked of peers if need be, saved across restarts, and gossiped.
 * A burn owed at one node means tokens elsewhere that should not exist, so
 * while it is unpaid every node keeps that many of its own held tokens
 * unspent (caution.ts). For that, a node remembers the versions a rule came
 * through (`Transitions`) until every seed has announced the new one: a seed
 * not yet heard at the new version may still owe what its share shrank by.
 */
import { createBucket } from '../core/algorithms/index.js'
import type { CalendarView } from '../core/calendar.js'
import type { KeyState } from '../core/limiter.js'
import type { CompiledRule } from '../core/rules.js'
import { initialShare, type Homes } from '../core/share.js'
import { ext } from './key-ext.js'
import { heardAll } from './heard.js'
import type { Peer } from './peers.js'

/** What a node must know of a rule version to work out a seed's share under it. */
export interface RuleStamp {
  hash: string
  stock: number
  glob: boolean
}

export function stampOf (r: CompiledRule): RuleStamp {
  return { hash: r.hash, stock: r.stock, glob: r.glob }
}

/**
 * Move one key to its changed rule. `allocate` false (after an unclean
 * restart): this node's pre-allocated share is already stranded, so a change
 * to it neither adds nor owes anything here.
 */
export function carryOver (ks: KeyState, next: CompiledRule, node: string, seeds: readonly string[], allocate: boolean, nowMs: number, cal: CalendarView, homes?: Homes): void {
  const b = ks.bucket
  b.advance(nowMs)
  const held = Math.max(0, b.held)
  const out = b.outstanding(nowMs)
  const old = ks.rule
  const own = allocate ? initialShare(next.stock, next.glob, ks.key, node, seeds, homes) - initialShare(old.stock, old.glob, ks.key, node, seeds, homes) : 0
  // The shares of the dead seeds this node inherited are in its books too (heir.ts): they change with the rule as
  // its own does. (Only the heir's own share once did: 3 seeds, one inherited, 300 lowered to 100, and the cluster
  // admitted 167 a window, the dead seed's 100 never cut to 33.) A glob key's inherited home is in `homes` already.
  const delta = own + (allocate && !next.glob ? inheritedShares(next, ks.key, node, seeds, homes) - inheritedShares(old, ks.key, node, seeds, homes) : 0)
  const x = ext(ks)
  // An earlier burn still owed is paid first out of a raise.
  const total = held + out + delta - x.burn
  // Spent tokens stay spent, all of them, and return no earlier than they would have: an
  // exact limiter still counts them (a sliding window's previous window, say). So the
  // share never drops below them; what the change takes beyond what is held is owed.
  const share = Math.max(out, total)
  x.burn = share - total
  const c = next.config
  const fresh = createBucket(c.algorithm, { limit: c.limit, perMs: c.perMs, burst: next.stock, share }, nowMs, cal)
  fresh.forceSpend(out, nowMs)
  fresh.setReserve?.(ks.reserve)
  ks.bucket = fresh
  b.release?.()
  ks.initial = Math.max(0, ks.initial + own)
  // Peers must hear the new owed (and holding) at the new version; the reserve is recomputed now.
  x.sentOwed = NaN
  x.sentHeld = NaN
  x.reserveAt = -Infinity
}

/**
 * What the dead seeds whose estates `node` holds had of exact `key` under
 * `rule`: those homed at it (heir.ts), and those homed at a dead seed whose
 * own estate it holds, along the chain of heirs (as share.ts `homeOf`
 * follows it). A heir that dies carries the estates it inherited to its own
 * heir: counting only the direct ones left such a share out of every rule
 * change, and a lowered limit kept it whole (chaos 5 seeds, seed 1: 204 in a
 * window on a limit of 200 lowered from 228; scenario inherit-chain-lower).
 */
export function inheritedShares (rule: Pick<CompiledRule, 'stock' | 'glob'>, key: string, node: string, seeds: readonly string[], homes?: Homes): number {
  if (homes === undefined || homes.size === 0 || rule.glob) return 0
  let n = 0
  for (const dead of homes.keys()) if (dead !== node && heirAtEnd(dead, homes, seeds.length) === node) n += initialShare(rule.stock, false, key, dead, seeds)
  return n
}

/** Where a dead seed's estate is now: its heir, that heir's heir if it died too, and so on (bounded: no cycle runs on). */
export function heirAtEnd (dead: string, homes: Homes, bound: number): string | undefined {
  let h = homes.get(dead)
  for (let i = 0; i < bound && h !== undefined && homes.has(h); i++) h = homes.get(h)
  return h
}

/**
 * The rule versions each changed rule came through at this node, kept
 * until the change is complete: every other seed has announced the new
 * version and all of its keys under it.
 */
export class Transitions {
  /** rule name -> earlier versions, oldest first. */
  private readonly from = new Map<string, RuleStamp[]>()

  /** The rule `old` became `next` here. */
  changed (old: RuleStamp, next: CompiledRule): void {
    const list = this.from.get(next.name) ?? []
    if (!list.some(s => s.hash === old.hash)) list.push(old)
    // A change back to an earlier version is still a change from the one before it.
    this.from.set(next.name, list.filter(s => s.hash !== next.hash))
    if (this.from.get(next.name)?.length === 0) this.from.delete(next.name)
  }

  get active (): boolean {
    return this.from.size > 0
  }

  versions (rule: string): readonly RuleStamp[] | undefined {
    return this.from.get(rule)
  }

  /**
   * The most seed `j` may owe of `key` while its change to `rule` is not
   * known to be done: what its share shrank by from the largest earlier
   * version (it may come through any of them). Infinity if `j` is on a
   * version this node never had: nothing bounds what it may owe.
   */
  expectedDebt (rule: CompiledRule, key: string, j: string, jHash: string | undefined, seeds: readonly string[], homes?: Homes): number {
    const list = this.from.get(rule.name)
    if (list === undefined) return 0
    if (jHash !== undefined && jHash !== rule.hash && !list.some(s => s.hash === jHash)) return Infinity
    // A heir owes for the estates it holds too (carryOver): counted at the heir, whatever the dead seed says.
    const share = (s: RuleStamp | CompiledRule): number => initialShare(s.stock, s.glob, key, j, seeds) + inheritedShares(s, key, j, seeds, homes)
    const now = share(rule)
    let most = 0
    for (const s of list) most = Math.max(most, share(s) - now)
    return most
  }

  /**
   * Forget the change of every rule that every other seed has finished, as
   * heard here: it gossips the new version, names the rule no longer
   * pending, and this node applied every message of a full pass it began
   * after its change (heard.ts `heardAll`). `pending` alone clears once the
   * seed has *sent* every key: the one gossip that carried a debtor's new
   * line can be lost, and its next says nothing of the key unless the key
   * changes again. Forgotten then, a node read the debtor's old line as
   * owing nothing and spent the burn (test/rule-change-lost-line.test.ts);
   * a grace of a few full syncs only bounded that (two lost passes reopened
   * it).
   */
  settle (rules: readonly CompiledRule[], seeds: readonly string[], me: string, peer: (name: string) => Peer | undefined): void {
    for (const name of this.from.keys()) {
      const rule = rules.find(r => r.name === name)
      if (rule === undefined) { this.from.delete(name); continue }
      const done = seeds.every(j => {
        if (j === me) return true
        const p = peer(j)
        return p !== undefined && p.rules[name] === rule.hash && !p.pending.has(name) && heardAll(p)
      })
      if (done) this.from.delete(name)
    }
  }

  /** For the state file. */
  toJSON (): Record<string, RuleStamp[]> {
    return Object.fromEntries(this.from)
  }

  restore (saved: Record<string, RuleStamp[]>): void {
    for (const [name, list] of Object.entries(saved)) if (list.length > 0) this.from.set(name, list.map(s => ({ ...s })))
  }
}
