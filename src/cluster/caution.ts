/**
 * Caution: how many of its held tokens of a key a node must leave unspent
 * while burns owed elsewhere are unpaid (rule-change.ts). It becomes the
 * key's `reserve`, which the limiter never spends into.
 *
 * Why this is enough. After a rule change lowers a stock by D, the cluster
 * must destroy D tokens, but a node's share may have shrunk by more than it
 * holds: it owes the rest (`burn`), while the tokens that should be gone sit
 * at other nodes. Let R be the sum of every unpaid burn, and h_i what node i
 * holds. A node that owes holds nothing (it burns before anything else).
 * Every other node spends only above R: sum over i of max(0, h_i - R) <=
 * max(0, sum h_i - R) whenever R >= 0 (at most one term can exceed the
 * total less R). So the cluster spends at most its holdings less what it
 * owes: exactly what it could spend had every burn been paid at once. Tokens
 * in flight and tokens coming back join some h_i and the same bound holds.
 *
 * A node knows others' burns only from gossip, so it counts, per other seed
 * (only seeds have pre-allocated shares, so only seeds can owe):
 * - what the seed last said it owes of the key, under whatever version it
 *   said it (a burn only shrinks until the next change, so an old figure is
 *   never too small; a raise pays an old burn first and may leave the rest
 *   owed, so a line said under an earlier version counts until the seed's
 *   line at our version arrives);
 * - while our own change of the rule is not known to be complete
 *   (Transitions), for a seed not yet heard at our version, or not done
 *   announcing its keys under it, or whose announcements did not all reach
 *   us (heard.ts `heardAll`): the most its share can have shrunk by;
 *   and Infinity for a seed on a version we never had (we don't know what it
 *   owes: spend nothing of the key until it catches up);
 * - what ended epochs of the seed owed (Peers.legacy).
 * The sum is recomputed at most every half gossip interval per key.
 *
 * A fenced node (no lease, fence.ts) reserves everything of a hard key:
 * Infinity, "spend nothing", the value a rule version we never had gets.
 */
import type { KeyState } from '../core/limiter.js'
import type { CompiledRule } from '../core/rules.js'
import { ext } from './key-ext.js'
import { heardAll } from './heard.js'
import type { Peers } from './peers.js'
import type { Transitions } from './rule-change.js'

export interface CautionInput {
  node: string
  seeds: readonly string[]
  peers: Peers
  transitions: Transitions
  /** How long a computed reserve stays good. */
  refreshMs: number
  /** The time of the current computation (set by updateReserve). */
  now: number
  /** This node has no lease (fence.ts): it spends nothing of a hard rule. Kept current by the core. */
  fenced: boolean
  /** Dead seed -> the seed whose books hold its estate (heir.ts `homes`): a heir may owe for it. */
  homes: ReadonlyMap<string, string>
}

/** Bring `ks.reserve` up to date (cheap when nothing is owed anywhere). */
export function updateReserve (c: CautionInput, ks: KeyState, nowMs: number): void {
  if (c.fenced && ks.rule.config.mode === 'hard') {
    setReserve(ks, Infinity, nowMs)
    // Recomputed in full once the fence lifts.
    const x = ks.ext as { reserveAt: number } | null
    if (x !== null) x.reserveAt = -Infinity
    return
  }
  if (c.peers.owingEntries === 0 && !c.transitions.active) {
    setReserve(ks, 0, nowMs)
    const x = ks.ext as { debts: number } | null
    if (x !== null) x.debts = 0
    return
  }
  const x = ext(ks)
  if (nowMs >= x.reserveAt && nowMs - x.reserveAt < c.refreshMs) return
  x.reserveAt = nowMs
  c.now = nowMs
  setReserve(ks, reserveOf(c, ks), nowMs)
}

function setReserve (ks: KeyState, r: number, nowMs: number): void {
  if (ks.reserve === r) return
  // A token bucket refills at the rate of its capacity less the reserve: settle the past at the old rate first.
  if (ks.bucket.setReserve !== undefined) {
    ks.bucket.advance(nowMs)
    ks.bucket.setReserve(r)
  }
  ks.reserve = r
}

/**
 * The reserve: the larger of this node's own view of the burns owed
 * elsewhere, and the views peers gossip. A peer's view covers a node that
 * knows nothing yet (it started with nothing after a crash, and peers are
 * its only source of tokens): it learns of a debt from the very peers that
 * give it tokens. Only own views are gossiped, never the larger of the two,
 * so a view can't echo between nodes after the debt is paid.
 */
function reserveOf (c: CautionInput, ks: KeyState): number {
  const x = ext(ks)
  x.debts = ownView(c, ks.rule, ks.key)
  let r = x.debts
  for (const p of c.peers.all()) {
    const e = p.keys.get(ks.key)
    if (e !== undefined && e.debts > r && e.gen[ks.rule.name] === ks.rule.hash && c.peers.isAlive(p, c.now)) r = e.debts
  }
  return r
}

/**
 * The most tokens of `key` an honest node can give in one grant: the stock,
 * plus every burn owed of it, this node's (`ownBurn`) and its own view of
 * the others' (the same count as its reserve, from its own books only). A
 * rule lowered while tokens sat elsewhere (a member's, a peer's) leaves that
 * many more than the new stock in the cluster until the burns are paid, and
 * a node may hold them all and give them back: a grant checked against the
 * stock alone was refused and its tokens lost for good (grant-checks.ts).
 * Infinity while some seed is on a version this node never had.
 */
export function mostTokens (c: CautionInput, rule: CompiledRule, key: string, ownBurn: number): number {
  return rule.stock + ownBurn + ownView(c, rule, key)
}

function ownView (c: CautionInput, rule: CompiledRule, key: string): number {
  const transitioning = c.transitions.versions(rule.name) !== undefined
  let n = 0
  for (const j of c.seeds) {
    if (j === c.node) continue
    const p = c.peers.get(j)
    if (p !== undefined) n += c.peers.legacyOwed(p, key)
    const e = p?.keys.get(key)
    if (e !== undefined && e.gen[rule.name] === rule.hash) { n += e.owed; continue }
    // A line said under another version: what it owed then is still owed, less at most a raise (carryOver
    // pays an old burn first out of a raise, and a raise smaller than the burn leaves the rest). Its line
    // at our version has not reached us: it is not sent yet, or its message was lost.
    if (e !== undefined) n += e.owed
    if (!transitioning) continue
    const jHash = p?.rules[rule.name]
    // At our version, done announcing, and all of it heard here: no entry at all means no state, so nothing owed.
    if (p !== undefined && jHash === rule.hash && !p.pending.has(rule.name) && heardAll(p) && e === undefined) continue
    n += c.transitions.expectedDebt(rule, key, j, jHash, c.seeds, c.homes)
    if (n === Infinity) return n
  }
  return n
}
