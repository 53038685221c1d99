/**
 * Reading the cluster file from disk: read, parse JSON, validate.
 *
 * Two failure kinds stay apart: a file that cannot be read or is not JSON is
 * E_CONFIG_READ (the message names the file), and JSON that breaks the
 * contract is E_CONFIG_INVALID from the validator. Relative paths inside the
 * file resolve against the file's own folder, never the working directory.
 */

import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import type { ClusterConfig } from './types.js'
import { validateClusterFile } from './validate.js'

function readError (file: string, err: unknown): QuotadError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  const reason = err instanceof Error ? err.message : String(err)
  return new QuotadError(ErrorCodes.CONFIG_READ, `cannot read cluster file ${file}: ${reason}`, { file, errno: code })
}

/**
 * Where JSON.parse stopped, as 1-based line and column: from the "at
 * position N" of its message (Node 20), or the end of the text for "end of
 * JSON input". A BOM, stripped before parsing, is not counted.
 */
export function lineColumn (text: string, reason: string): { line: number, column: number } {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  const m = /at position (\d+)/.exec(reason)
  const pos = Math.min(body.length, m !== null ? Number(m[1]) : body.length)
  const before = body.slice(0, pos)
  const nl = before.lastIndexOf('\n')
  return { line: before.split('\n').length, column: pos - nl }
}

function parseAndValidate (file: string, text: string): ClusterConfig {
  let raw: unknown
  try {
    // Some editors save UTF-8 with a byte-order mark, which JSON.parse rejects.
    raw = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err)
    const { line, column } = lineColumn(text, reason)
    throw new QuotadError(ErrorCodes.CONFIG_READ, `cluster file ${file} is not valid JSON at line ${line}, column ${column}: ${reason}`, { file, line, column })
  }
  return validateClusterFile(raw, dirname(file), file)
}

/**
 * Load and validate a cluster file. The result's `source` is the file's
 * absolute path.
 * @throws QuotadError E_CONFIG_READ if the file cannot be read or is not JSON.
 * @throws ConfigError E_CONFIG_INVALID listing every issue in the content.
 */
export async function loadClusterFile (path: string): Promise<ClusterConfig> {
  const file = resolve(path)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw readError(file, err)
  }
  return parseAndValidate(file, text)
}

/** As loadClusterFile, for start-up code that cannot await. */
export function loadClusterFileSync (path: string): ClusterConfig {
  const file = resolve(path)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw readError(file, err)
  }
  return parseAndValidate(file, text)
}
