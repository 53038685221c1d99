/**
 * The vocabulary of the reclaim log (reclaim-log.ts): ballots, the value a
 * slot decides, its digest, and the quorum the log counts with. Pure.
 *
 * Ballots are `(round, proposer name)`, ordered by round and then by name,
 * so two proposers never share a ballot. A proposer does not persist its
 * rounds: an acceptor promises a given ballot at most once ever (prepare
 * must be strictly higher than the promise, and promises are durable), so
 * at most one proposer process ever gathers a quorum of promises for a
 * ballot, and a restarted proposer that reuses one of its old ballots is
 * refused by every acceptor of that quorum (any two quorums intersect).
 * Hence one ballot never carries two values.
 *
 * The value is opaque to Paxos except for its digest, which learners use to
 * compare acceptances; `D` and `listed` are sets, so the digest is taken
 * over a canonical (sorted, deduplicated) form.
 */
import { createHash } from 'node:crypto'

export interface Ballot {
  /** ≥ 1 for a real ballot; 0 only in NO_BALLOT. */
  round: number
  /** The proposer's node name. */
  node: string
}

/** Below every real ballot: "nothing promised". */
export const NO_BALLOT: Ballot = Object.freeze({ round: 0, node: '' })

/** Total order: round first, then the proposer's name (code-unit order, the same on every node). */
export function compareBallots (a: Ballot, b: Ballot): number {
  if (a.round !== b.round) return a.round < b.round ? -1 : 1
  if (a.node === b.node) return 0
  return a.node < b.node ? -1 : 1
}

export function sameBallot (a: Ballot, b: Ballot): boolean {
  return a.round === b.round && a.node === b.node
}

/** An account reclaimed by the slot: the incarnation that was attested and its epoch. */
export interface DeadAccount { node: string, acct: number, inc: number, epoch: string }
/** The account that takes the estate (the proposer whose value was chosen). */
export interface HeirAccount { node: string, epoch: string, acct: number }
/** An account that reported its positions with D (§3.5). */
export interface ListedAccount { node: string, acct: number }

export interface ReclaimValue {
  slot: number
  D: DeadAccount[]
  heir: HeirAccount
  listed: ListedAccount[]
}

export interface ChosenEntry { slot: number, value: ReclaimValue }

function byNodeAcct (a: { node: string, acct: number }, b: { node: string, acct: number }): number {
  if (a.node !== b.node) return a.node < b.node ? -1 : 1
  return a.acct - b.acct
}

/** Sorted by (node, acct), duplicates of (node, acct) dropped (the first kept after sorting). */
function canonList<T extends { node: string, acct: number }> (xs: readonly T[], full: (a: T, b: T) => number): T[] {
  const sorted = [...xs].sort((a, b) => byNodeAcct(a, b) || full(a, b))
  return sorted.filter((x, i) => i === 0 || byNodeAcct(sorted[i - 1], x) !== 0)
}

/** The canonical form: the same set of accounts always gives the same object, field order included. */
export function canonicalValue (v: ReclaimValue): ReclaimValue {
  return {
    slot: v.slot,
    D: canonList(v.D, (a, b) => a.inc - b.inc || (a.epoch < b.epoch ? -1 : a.epoch > b.epoch ? 1 : 0))
      .map(d => ({ node: d.node, acct: d.acct, inc: d.inc, epoch: d.epoch })),
    heir: { node: v.heir.node, epoch: v.heir.epoch, acct: v.heir.acct },
    listed: canonList(v.listed, () => 0).map(l => ({ node: l.node, acct: l.acct }))
  }
}

/** Values are never mutated once built (every holder shares them), so a digest is computed once per object. */
const digests = new WeakMap<ReclaimValue, string>()

/** 128 bits of sha256 over the canonical form: equal digests mean equal values. */
export function valueDigest (v: ReclaimValue): string {
  const known = digests.get(v)
  if (known !== undefined) return known
  const c = canonicalValue(v)
  const canon = JSON.stringify([c.slot, c.D.map(d => [d.node, d.acct, d.inc, d.epoch]), [c.heir.node, c.heir.epoch, c.heir.acct],
    c.listed.map(l => [l.node, l.acct])])
  const d = createHash('sha256').update(canon).digest('hex').slice(0, 32)
  digests.set(v, d)
  return d
}

/**
 * Who counts as a quorum. `quorum.ts` implements it for the configured
 * voters (weights 1, the first voter 1.5 when their number is even); any two
 * quorums must intersect, which is all Paxos needs.
 */
export interface Quorum {
  isQuorum (names: Iterable<string>): boolean
}

/** Uniform in [0, 1): the simulator's `Rng` fits, the daemon passes Math.random's wrapper. */
export interface Random {
  next (): number
}
