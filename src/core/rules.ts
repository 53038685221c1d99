/**
 * Compiled rules: how a key finds its rule, and each rule's content hash.
 *
 * Matching order: an exact `match` wins; otherwise the first glob rule in file
 * order whose pattern matches. `*` matches any run of characters (including
 * none). A glob rule gives each distinct key its own bucket.
 *
 * The hash covers every field that changes what a rule admits, so two nodes
 * (or a reload) can tell whether they enforce the same rule.
 */
import { createHash } from 'node:crypto'
import type { RuleConfig } from '../config/types.js'
import { editDistance } from '../util/closest.js'

export interface CompiledRule {
  readonly config: RuleConfig
  readonly name: string
  readonly glob: boolean
  /** sha256 (hex, 16 chars) of the admission-relevant fields. */
  readonly hash: string
  /** The stock a key of this rule has cluster-wide: burst for token-bucket, else limit. */
  readonly stock: number
  readonly test: (key: string) => boolean
  /** Counters, for status. Mutated by the limiter. */
  stats: { allowed: number, denied: number, keys: number }
}

export function ruleHash (r: RuleConfig): string {
  // `decide` and `creditMs` only when set, so every rule without them keeps the hash it had (a cluster hash across an upgrade).
  // A field that does not apply (burst but for a token bucket, onPartition and maxDebt in hard mode) hashes as its
  // default, the value a validated file gives it: so a rule built in memory hashes as the same rule saved in the
  // file's shape and read back (config/validate.ts ruleToFile), and no validated rule's hash changes.
  const burst = r.algorithm === 'token-bucket' ? r.burst : r.limit
  const [onPartition, maxDebt] = r.mode === 'soft' ? [r.onPartition, r.maxDebt] : ['local-share', r.limit]
  const canon = JSON.stringify([r.name, r.match, r.algorithm, r.limit, r.perMs, burst, r.mode, onPartition, maxDebt, r.pace === true, ...(r.decide === 'seeds' ? ['decide:seeds'] : []), ...(r.creditMs === undefined ? [] : [`credit:${r.creditMs}`])])
  return createHash('sha256').update(canon).digest('hex').slice(0, 16)
}

function compileGlob (pattern: string): (key: string) => boolean {
  const parts = pattern.split('*')
  if (parts.length === 1) return key => key === pattern
  const first = parts[0]
  const last = parts[parts.length - 1]
  // The common case, `prefix:*`, is one startsWith.
  if (parts.length === 2 && last === '') return key => key.startsWith(first)
  const middle = parts.slice(1, -1)
  const minLen = parts.reduce((n, p) => n + p.length, 0)
  return key => {
    if (key.length < minLen || !key.startsWith(first) || !key.endsWith(last)) return false
    let at = first.length
    const end = key.length - last.length
    for (const m of middle) {
      const i = key.indexOf(m, at)
      if (i < 0 || i + m.length > end) return false
      at = i + m.length
    }
    return true
  }
}

export function compileRule (r: RuleConfig): CompiledRule {
  const glob = r.match.includes('*')
  return {
    config: r,
    name: r.name,
    glob,
    hash: ruleHash(r),
    stock: r.algorithm === 'token-bucket' ? r.burst : r.limit,
    test: compileGlob(r.match),
    stats: { allowed: 0, denied: 0, keys: 0 }
  }
}

export class RuleSet {
  readonly rules: CompiledRule[]
  private readonly exact = new Map<string, CompiledRule>()
  private readonly globs: CompiledRule[] = []
  private readonly byName = new Map<string, CompiledRule>()

  constructor (configs: RuleConfig[]) {
    this.rules = configs.map(compileRule)
    for (const r of this.rules) {
      this.byName.set(r.name, r)
      if (r.glob) this.globs.push(r)
      else if (!this.exact.has(r.config.match)) this.exact.set(r.config.match, r)
    }
  }

  match (key: string): CompiledRule | undefined {
    const r = this.exact.get(key)
    if (r !== undefined) return r
    for (const g of this.globs) if (g.test(key)) return g
    return undefined
  }

  get (name: string): CompiledRule | undefined {
    return this.byName.get(name)
  }

  /**
   * The `max` rules whose `match` is nearest to a key none matches (for the
   * E_NO_RULE message), nearest first: edit distance to an exact match, and
   * for a glob, of the key's start to the pattern's text before its first
   * `*` (the part a key must begin with). An error path: bounded by the
   * rules and by closest.ts's cut.
   */
  nearest (key: string, max = 3): CompiledRule[] {
    return this.rules
      .map((r, i) => {
        const lead = r.glob ? r.config.match.slice(0, r.config.match.indexOf('*')) : r.config.match
        return { r, i, d: editDistance(r.glob ? key.slice(0, lead.length) : key, lead) }
      })
      .sort((x, y) => x.d - y.d || x.i - y.i)
      .slice(0, max)
      .map(x => x.r)
  }
}
