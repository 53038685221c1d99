/**
 * A small JSON document in a data directory (the state file, the votes
 * file): read if it exists, parse and validate naming the bad field, write
 * atomically and durably (atomic-file.ts). Each caller brings its own error
 * codes and validator; the I/O and the parse-then-validate shape live here once.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { QuotadError, type ErrorCode } from '../errors.js'
import { unwritableReason, writeFileAtomic } from './atomic-file.js'

/** A validator's complaint about one field: `path` is its JSON path (`keys[3].held`). */
export class FieldError extends Error {
  readonly path: string
  constructor (path: string, what: string) {
    super(`${path}: ${what}`)
    this.path = path
  }
}

/**
 * Parse `text` and run `validate` on it. Bad JSON, or a FieldError from the
 * validator, becomes `invalid(path, what)`; anything else is rethrown.
 */
export function parseJsonDoc<T> (text: string, validate: (raw: unknown) => T, invalid: (path: string, what: string) => Error): T {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (err) {
    throw invalid('$', `not JSON (${(err as Error).message})`)
  }
  try {
    return validate(raw)
  } catch (err) {
    if (!(err instanceof FieldError)) throw err
    throw invalid(err.path, err.message)
  }
}

/** The text of `<dir>/<name>`, or undefined if there is none. Any other failure throws `unreadable`. */
export async function readIfExists (dir: string, name: string, unreadable: ErrorCode): Promise<string | undefined> {
  const file = join(dir, name)
  try {
    return await readFile(file, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    throw new QuotadError(unreadable, `cannot read ${file}: ${(err as Error).message}`, { file, errno: code })
  }
}

/** Replace `<dir>/<name>` with `value` as JSON, atomically and durably. Failures throw `unwritable`. */
export async function writeJsonFile (dir: string, name: string, value: unknown, unwritable: ErrorCode): Promise<void> {
  await writeTextFile(dir, name, JSON.stringify(value), unwritable)
}

/** Replace `<dir>/<name>` with `text`, atomically and durably. Failures throw `unwritable`. */
export async function writeTextFile (dir: string, name: string, text: string, unwritable: ErrorCode): Promise<void> {
  try {
    await writeFileAtomic(dir, name, text)
  } catch (err) {
    const file = join(dir, name)
    throw new QuotadError(unwritable, unwritableReason(file, err), { file, errno: (err as NodeJS.ErrnoException).code })
  }
}
