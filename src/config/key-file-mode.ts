/**
 * The permission check for key files (the cluster's swarm key, a node's peer
 * key), the way ssh checks private keys: a key file that group or others may
 * read or write is refused, because anyone who can read the swarm key can
 * join the cluster (and spend or strand its tokens), and anyone who can read
 * a peer key can impersonate that node.
 *
 * The fix is named in the error: `chmod 600 FILE`. Where a wider mode is
 * deliberate (a key shared through a group-readable secret mount, say), the
 * environment variable QUOTAD_ALLOW_INSECURE_KEYS=1 accepts it; the callers
 * still see the mode and can log it.
 */
import { statSync, type Stats } from 'node:fs'
import { stat } from 'node:fs/promises'
import { ErrorCodes, QuotadError } from '../errors.js'

export const ALLOW_INSECURE_KEYS_ENV = 'QUOTAD_ALLOW_INSECURE_KEYS'

/** Bits that must be clear on a key file: any access for group or others. */
const GROUP_OTHER_BITS = 0o077

/** Whether the environment accepts key files with group/other bits set. */
export function insecureKeysAllowed (env: NodeJS.ProcessEnv = process.env): boolean {
  return env[ALLOW_INSECURE_KEYS_ENV] === '1'
}

/**
 * Throw E_KEY_PERMISSIONS if `mode` lets group or others at the key file
 * `path`, unless QUOTAD_ALLOW_INSECURE_KEYS=1. `what` names the file for the
 * reader ("swarm key", "peer key").
 */
export function assertKeyFileMode (path: string, mode: number, what: string, env: NodeJS.ProcessEnv = process.env): void {
  if ((mode & GROUP_OTHER_BITS) === 0 || insecureKeysAllowed(env)) return
  const octal = (mode & 0o777).toString(8).padStart(4, '0')
  throw new QuotadError(ErrorCodes.KEY_PERMISSIONS,
    `${path}: the ${what} file has mode ${octal}, so group or others may read or change it; ` +
    `run "chmod 600 ${path}" (or set ${ALLOW_INSECURE_KEYS_ENV}=1 to accept it anyway)`,
    { path, mode: mode & 0o777 })
}

/** Check the key file at `path` (following symlinks, like the read that follows). */
export async function checkKeyFileMode (path: string, what = 'key', env: NodeJS.ProcessEnv = process.env): Promise<void> {
  assertKeyFileMode(path, (await statOrThrow(() => stat(path), path, what)).mode, what, env)
}

/** The same, synchronously. */
export function checkKeyFileModeSync (path: string, what = 'key', env: NodeJS.ProcessEnv = process.env): void {
  let s: Stats
  try {
    s = statSync(path)
  } catch (err) {
    throw cannotStat(err, path, what)
  }
  assertKeyFileMode(path, s.mode, what, env)
}

async function statOrThrow (f: () => Promise<Stats>, path: string, what: string): Promise<Stats> {
  try {
    return await f()
  } catch (err) {
    throw cannotStat(err, path, what)
  }
}

function cannotStat (err: unknown, path: string, what: string): QuotadError {
  return new QuotadError(ErrorCodes.CONFIG_READ, `${path}: cannot read the ${what} file (${(err as Error).message})`)
}
