/**
 * What a heir would credit for a seed that never comes back, read from one
 * copy of its journal (replica-store.ts; reclaim-design.md §11.6):
 *
 *     credit(k) = books_copy(k) − max(0, ceiling_copy(k) − gave_copy(k))
 *
 * per key, where books are the copy's checkpoint and deltas (a key not in
 * it: the seed's initial share, under this node's rules), and the second
 * term is what is left of the reservation the copy holds: every give made
 * after the copy ends is under it (replication.ts), so the credit never
 * counts a token that left. Glob keys the seed never changed are not
 * listed (their home's stock is the heir's to materialize).
 *
 * Today this is what `status` shows a seed's operator (`cluster.replicas`
 * `estate`): what its copy says would come back if that seed were gone for
 * good. The heir that credits it is not built yet.
 */
import type { CompiledRule } from '../core/rules.js'
import { initialShare } from '../core/share.js'
import { replayJournal } from './journal.js'

export interface Estate {
  /** Per key: what a heir would credit (never below 0). */
  credits: Map<string, number>
  /** Their sum. */
  tokens: number
}

/** The estate in a copy of `writer`'s journal; `rules`: this node's, and its match (a RuleSet; for keys at their initial share). */
export function estateOf (text: string, writer: string, cluster: string, rules: { rules: readonly CompiledRule[], match: (key: string) => CompiledRule | undefined }, seeds: readonly string[]): Estate {
  const r = replayJournal(text, `copy of ${writer}'s journal`, writer, cluster)
  const credits = new Map<string, number>()
  const share = (key: string): number => {
    const rule = rules.match(key)
    return rule === undefined || !r.checkpoint.allocate ? 0 : initialShare(rule.stock, rule.glob, key, writer, seeds)
  }
  const keys = new Set([...r.books.keys(), ...rules.rules.filter(x => !x.glob).map(x => x.config.match)])
  for (const key of keys) {
    const b = r.books.get(key)
    const books = (b?.base ?? share(key)) + (b?.delta ?? 0)
    const res = r.reserved.get(key)
    const left = res === undefined ? 0 : Math.max(0, res.ceiling - res.given)
    credits.set(key, Math.max(0, books - left))
  }
  let tokens = 0
  for (const n of credits.values()) tokens += n
  return { credits, tokens }
}
