/** Small builders for validated-looking rule and limit objects in unit tests. */
import { DEFAULT_LIMITS, type LimitsConfig, type RuleConfig } from '../../src/config/types.js'

export function rule (r: Partial<RuleConfig> & { name: string, limit: number, perMs: number }): RuleConfig {
  return {
    match: r.name,
    per: `${r.perMs}ms`,
    algorithm: 'fixed-window',
    burst: r.burst ?? r.limit,
    mode: 'hard',
    onPartition: 'local-share',
    maxDebt: r.limit,
    ...r
  }
}

export function limits (l: Partial<LimitsConfig> = {}): LimitsConfig {
  return { ...DEFAULT_LIMITS, ...l }
}
