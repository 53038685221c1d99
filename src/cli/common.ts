/**
 * What the two CLIs share: printing an error with its stable code and turning
 * it into an exit status. Only CLI code calls process.exit.
 */
import { readFileSync } from 'node:fs'
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { ErrorCodes, ExitCodes, QuotadError, isQuotadError } from '../errors.js'
import { closest } from '../util/closest.js'

export function fail (err: unknown, json = false): never {
  if (json) {
    const code = isQuotadError(err) ? err.code : 'E_INTERNAL'
    const message = err instanceof Error ? err.message : String(err)
    process.stdout.write(JSON.stringify({ error: { code, message } }) + '\n')
  } else if (isQuotadError(err)) {
    process.stderr.write(`error ${err.code}: ${err.message}\n`)
  } else {
    process.stderr.write(`error E_INTERNAL: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  }
  process.exit(ExitCodes.ERROR)
}

/** A whole number from a flag, or a usage error naming the flag. */
export function intFlag (name: string, value: string | undefined, dflt: number, min = 0): number {
  if (value === undefined) return dflt
  if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw usage(`--${name} must be a whole number >= ${min}, got "${value}"`)
  }
  return Number(value)
}

export function usage (message: string): QuotadError {
  return new QuotadError(ErrorCodes.USAGE, message)
}

/** node:util parseArgs, with its errors turned into E_USAGE; an unknown flag gets the nearest known ones. */
export function parseCli<T extends ParseArgsConfig> (config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config)
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    // parseArgs says: Unknown option '--wiat'. To specify a positional argument ...
    const flag = e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(-[^']*)'/.exec(e.message)?.[1] : undefined
    if (flag === undefined) throw usage(e.message)
    const known = Object.keys(config.options ?? {})
    const near = closest(flag.replace(/^-+/, '').replace(/=.*$/, ''), known).map(o => `--${o}`)
    throw usage(`unknown option ${flag}${near.length > 0 ? `: did you mean ${near.join(' or ')}?` : ''} (--help lists the options)`)
  }
}

/** The package's version (package.json, three folders up from dist/src/cli). */
export function version (): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string }
    return pkg.version ?? 'unknown'
  } catch {
    return 'unknown'
  }
}
