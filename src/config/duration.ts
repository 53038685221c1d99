/**
 * Duration text (`500ms`, `10s`, `1m`, `1h`, `1d`) <-> milliseconds.
 *
 * Only a non-negative integer followed by one unit is accepted: no fractions,
 * no signs, no spaces, no compound forms like `1h30m`. Write `1500ms` or `90m`
 * instead. A narrow grammar keeps every accepted text an exact whole number of
 * milliseconds, so a rule's window is never a rounded float, and
 * `formatDuration(parseDuration(x))` gives one canonical text for each value.
 */

import { ErrorCodes, QuotadError } from '../errors.js'

/** Milliseconds in one of each unit, largest first (formatDuration relies on the order). */
const UNITS: ReadonlyArray<readonly [string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
  ['ms', 1]
]

const UNIT_MS: ReadonlyMap<string, number> = new Map(UNITS)

// Digits are capped at 16 so the multiplication cannot lose precision silently;
// the safe-integer check below catches what is left.
const DURATION_RE = /^([0-9]{1,16})(ms|s|m|h|d)$/

/** Human hint used in every "bad duration" message, so they all read alike. */
export const DURATION_HINT = 'a duration like 500ms, 1s, 1m, 1h or 1d'

/**
 * Parse duration text to milliseconds, or return undefined when the text is not
 * a duration. Zero (`0s`) is a valid duration here; callers apply their own
 * bounds.
 */
export function tryParseDuration (text: string): number | undefined {
  if (typeof text !== 'string') return undefined
  const m = DURATION_RE.exec(text)
  if (m === null) return undefined
  const ms = Number(m[1]) * (UNIT_MS.get(m[2]) as number)
  return Number.isSafeInteger(ms) ? ms : undefined
}

/**
 * Parse duration text to milliseconds.
 * @throws QuotadError with code E_BAD_ARGUMENT when the text is not a duration.
 */
export function parseDuration (text: string): number {
  const ms = tryParseDuration(text)
  if (ms === undefined) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT,
      `must be ${DURATION_HINT}, got ${JSON.stringify(text)}`, { text })
  }
  return ms
}

/**
 * Format milliseconds as duration text in the largest unit that divides it
 * exactly: 86400000 -> `1d`, 90000 -> `90s`, 1500 -> `1500ms`. For whole,
 * non-negative ms the result parses back to the same value. Fractional or
 * negative values are still formatted (for display, e.g. a retry hint), but
 * such text is not accepted by parseDuration.
 */
export function formatDuration (ms: number): string {
  if (!Number.isFinite(ms)) return String(ms)
  if (ms < 0) return `-${formatDuration(-ms)}`
  if (!Number.isInteger(ms)) return `${ms}ms`
  if (ms === 0) return '0ms'
  for (const [unit, size] of UNITS) {
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}
