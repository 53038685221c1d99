/**
 * What a heir credits for a seed that never comes back, read from the best
 * copy of its journal (replica-store.ts; cluster-protocol.md, "The heir of a dead seed"):
 *
 *     credit(k) = books_copy(k) − max(0, ceiling_copy(k) − gave_copy(k))
 *
 * per key, where books are the copy's checkpoint and deltas (a key not in
 * it: the seed's initial share under the copy's rules and homes), and the
 * second term is what is left of the reservation the copy holds: every give
 * made after the copy ends is under it (replication.ts), so the credit never
 * counts a token that left. A key with a reservation but no books change is
 * in the estate too (a give under it may have left after the copy ended).
 *
 * Glob keys the seed never changed are not listed: from the inheritance on,
 * their home is the heir (share.ts `homeOf`), which materializes their stock
 * when they are first used there (heir.ts). `copied` lists the glob keys the
 * copy does name: their books are credited here, never materialized again.
 *
 * No copy at all (`text` null: no seed of a read quorum holds any) means no
 * write of the seed was ever durable, so no grant ever left it: its estate
 * is its initial share of every exact key, under the heir's rules.
 */
import type { CompiledRule } from '../core/rules.js'
import { RuleSet } from '../core/rules.js'
import { initialShare, type Homes } from '../core/share.js'
import { replayJournal } from './journal.js'
import { inheritedShares } from './rule-change.js'

export interface Estate {
  /** Per key: what a heir credits (never below 0). */
  credits: Map<string, number>
  /** Per key: what the estate owes (its books carried to a lowered rule went below 0): the heir burns it. */
  burns: Map<string, number>
  /** Their sum. */
  tokens: number
  /** What was left of the copy's reservations, over its keys: the part of the books not credited (lost for good). */
  unspent: number
  /** The same per key (the simulator's capacity check allows exactly this loss: shortfall-check.ts). */
  lost: Map<string, number>
  /** The glob keys the copy names (credited; never materialized again at the heir). */
  copied: Set<string>
  /** What the dead seed held of each peer account's tokens: node -> epoch -> key -> tokens (the heir's `restored`). */
  peers: Map<string, Map<string, Map<string, number>>>
  /** Which incarnation each of those accounts is, where the copy names it (journal.ts `incs`): `${node}\0${epoch}` -> inc. */
  incs: Map<string, number>
  /** The seeds the dead one had inherited itself: [node, inc, calMs]. */
  inherited: Array<[string, number, number]>
  /** The copy's incarnation and generation (0 without a copy). */
  inc: number
  gen: number
  /** The copy's epoch (null without a copy), and its applied marks: `${giver}\0${giverEpoch}` -> seq (journal.ts). */
  epoch: string | null
  marks: Map<string, number>
  /** The grants the dead seed gave that the copy names: `${to}\0${toEpoch}` -> seq -> items (estate-returns.ts). */
  sent: Map<string, Map<number, Array<[string, number]>>>
}

interface Rules { rules: readonly CompiledRule[], match: (key: string) => CompiledRule | undefined }

/**
 * The estate in a copy of `writer`'s journal. `rules`: the heir's, in force
 * (the copy's own rules decided the writer's books; a key whose rule changed
 * since is carried over to the heir's).
 */
export function estateOf (text: string | null, writer: string, cluster: string, rules: Rules, seeds: readonly string[]): Estate {
  const credits = new Map<string, number>()
  const copied = new Set<string>()
  if (text === null) {
    for (const r of rules.rules) if (!r.glob) credits.set(r.config.match, initialShare(r.stock, false, r.config.match, writer, seeds))
    return { credits, burns: new Map(), tokens: sum(credits), unspent: 0, lost: new Map(), copied, peers: new Map(), incs: new Map(), inherited: [], inc: 0, gen: 0, epoch: null, marks: new Map(), sent: new Map() }
  }
  const r = replayJournal(text, `copy of ${writer}'s journal`, writer, cluster)
  const cp = r.checkpoint
  const own: Rules = cp.rules.length > 0 ? new RuleSet(cp.rules) : rules
  const homes: Homes = new Map((cp.inherited ?? []).map(([n]) => [n, writer]))
  // The writer's books are under the copy's rules; the heir credits them under the rules in force, as a reload
  // would have carried them over (rule-change.ts carryOver): the change in the writer's share (and in the shares of
  // the seeds it had inherited) is added, and what that leaves below zero is owed as a burn. Credited under the
  // copy's rules, an estate inherited after a lowered limit kept the old share, for good.
  //
  // A key the checkpoint does not name had books equal to the writer's own share (persist.ts journalCheckpoint,
  // which compares with initialShare alone, as a recovery reads it back): the shares of the seeds it had inherited
  // are in its books, never in that base. Read with them, a copy whose key had come back to exactly the writer's own
  // share credited the inherited shares a second time (chaos 5 seeds, seed 2: a heir of a seed that had inherited
  // two others credited 63 for 32, and the cluster admitted 130 per window of 100 for good).
  const ownShare = (rule: CompiledRule | undefined, key: string): number => rule === undefined || !cp.allocate ? 0 : initialShare(rule.stock, rule.glob, key, writer, seeds, homes)
  const held = (rule: CompiledRule | undefined, key: string): number => rule === undefined || !cp.allocate
    ? 0
    : ownShare(rule, key) + inheritedShares(rule, key, writer, seeds, homes)
  const burns = new Map<string, number>()
  let unspent = 0
  const lost = new Map<string, number>()
  const exact = (rs: Rules): string[] => rs.rules.filter(x => !x.glob).map(x => x.config.match)
  const keys = new Set([...r.books.keys(), ...r.reserved.keys(), ...exact(own), ...(own === rules ? [] : exact(rules))])
  for (const key of keys) {
    const b = r.books.get(key)
    const then = own.match(key)
    const now = rules.match(key)
    const delta = now === undefined || now.hash === then?.hash ? 0 : held(now, key) - held(then, key)
    const books = (b?.base ?? ownShare(then, key)) + (b?.delta ?? 0) + delta
    const res = r.reserved.get(key)
    const left = res === undefined ? 0 : Math.max(0, res.ceiling - res.given)
    credits.set(key, Math.max(0, books - left))
    if (books < 0) burns.set(key, -books)
    const gone = Math.min(left, Math.max(0, books))
    unspent += gone
    if (gone > 0) lost.set(key, gone)
    if ((now ?? then)?.glob === true) copied.add(key)
  }
  return { credits, burns, tokens: sum(credits), unspent, lost, copied, peers: r.peers, incs: r.incs, inherited: cp.inherited ?? [], inc: cp.inc, gen: cp.gen ?? 0, epoch: cp.epoch, marks: r.marks, sent: r.sent }
}

function sum (m: ReadonlyMap<string, number>): number {
  let t = 0
  for (const n of m.values()) t += n
  return t
}
