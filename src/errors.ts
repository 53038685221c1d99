/**
 * The daemon's errors. The code table and `QuotadError` are the client
 * package's (one class, so `instanceof` holds across the two); the config
 * errors and exit statuses are the daemon's own.
 */
import { ErrorCodes, QuotadError } from '@quotad/client'

export { ErrorCodes, QuotadError, isQuotadError, type ErrorCode } from '@quotad/client'

export interface ConfigIssue {
  /** JSON path such as `rules[2].limit`. */
  path: string
  /** The constraint, e.g. `must be a positive integer, got -1`. */
  message: string
}

export class ConfigError extends QuotadError {
  readonly issues: ConfigIssue[]

  constructor (issues: ConfigIssue[], source?: string) {
    const head = source !== undefined ? `${source}: ` : ''
    super(ErrorCodes.CONFIG_INVALID,
      `${head}invalid cluster file (${issues.length} issue${issues.length === 1 ? '' : 's'}):\n` +
      issues.map(i => `  ${i.path}: ${i.message}`).join('\n'), issues)
    this.name = 'ConfigError'
    this.issues = issues
  }
}

/** Exit statuses shared by both CLIs. quotactl: 0 allowed, 1 denied, 2 anything else. */
export const ExitCodes = {
  OK: 0,
  DENIED: 1,
  ERROR: 2,
  /** quotad: this incarnation was reclaimed (a quorum of seeds attests it dead); start it again. */
  RESTART: 3
} as const

/** A batch item or a peek of a key decided at the seeds: stable code, and what to send instead. */
export function elsewhereError (key: string, what: string): QuotadError {
  return new QuotadError(ErrorCodes.BAD_ARGUMENT, `key ${JSON.stringify(key)} is decided at the seeds (its rule has "decide": "seeds"), ` +
    `so a member answers it only as an acquire of its own, not as ${what}`)
}
