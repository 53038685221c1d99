/**
 * The permission check for key files (the cluster's swarm key, a node's peer
 * key), the way ssh checks private keys: anyone who can read the swarm key
 * can join the cluster (and spend or strand its tokens), and anyone who can
 * read a peer key can impersonate that node. So a key file is refused when
 * others may do anything with it, or its group may write it, or its group
 * may read it and that group is not one of this process's own.
 *
 * Reading by the process's own group (its effective gid or a supplementary
 * group) is accepted, because that is how container platforms hand a secret
 * to a non-root process: Kubernetes mounts a Secret owned by root, and with
 * the pod's `fsGroup` the file becomes group-readable (0440) for that group,
 * which the container's process has among its groups. Whoever else is in that
 * group can read the key too: it is the operator's grant, as the group's
 * members are the operator's (in the example pod, no other container mounts
 * the Secret).
 *
 * The fix is named in the error: `chmod 600 FILE`. Where a wider mode is
 * deliberate, the environment variable QUOTAD_ALLOW_INSECURE_KEYS=1 accepts
 * it; the callers still see the mode and can log it.
 */
import { statSync, type Stats } from 'node:fs'
import { stat } from 'node:fs/promises'
import { ErrorCodes, QuotadError } from '../errors.js'

export const ALLOW_INSECURE_KEYS_ENV = 'QUOTAD_ALLOW_INSECURE_KEYS'

/** What the check needs of a key file's stat. */
export interface KeyFileStat {
  mode: number
  gid: number
}

/** Bits that must be clear whatever the group: any access for others, and group write or execute. */
const ALWAYS_REFUSED_BITS = 0o037
/** Group read: accepted when the file's group is one of the process's. */
const GROUP_READ = 0o040

/** Whether the environment accepts key files with group/other bits set. */
export function insecureKeysAllowed (env: NodeJS.ProcessEnv = process.env): boolean {
  return env[ALLOW_INSECURE_KEYS_ENV] === '1'
}

/** The process's groups: its effective gid and its supplementary groups (none where the platform has no gids). */
export function processGroups (): ReadonlySet<number> {
  const groups = new Set<number>()
  if (process.getegid !== undefined) groups.add(process.getegid())
  if (process.getgroups !== undefined) for (const g of process.getgroups()) groups.add(g)
  return groups
}

/**
 * Throw E_KEY_PERMISSIONS if the key file `path` (its `mode` and `gid`) may
 * be read or changed by anyone but its owner and, for reading, the process's
 * own `groups`; unless QUOTAD_ALLOW_INSECURE_KEYS=1. `what` names the file
 * for the reader ("swarm key", "peer key").
 */
export function assertKeyFileMode (path: string, file: KeyFileStat, what: string, env: NodeJS.ProcessEnv = process.env,
  groups: ReadonlySet<number> = processGroups()): void {
  const mode = file.mode & 0o777
  if ((mode & (ALWAYS_REFUSED_BITS | GROUP_READ)) === 0 || insecureKeysAllowed(env)) return
  if ((mode & ALWAYS_REFUSED_BITS) === 0 && groups.has(file.gid)) return
  const octal = mode.toString(8).padStart(4, '0')
  const who = (mode & ALWAYS_REFUSED_BITS) !== 0
    ? 'group or others may read or change it'
    : `group ${file.gid}, which is not one of this process's groups, may read it`
  throw new QuotadError(ErrorCodes.KEY_PERMISSIONS,
    `${path}: the ${what} file has mode ${octal}, so ${who}; ` +
    `run "chmod 600 ${path}" (a mode of 0640 or 0440 is accepted when the file's group is one of this process's; ` +
    `or set ${ALLOW_INSECURE_KEYS_ENV}=1 to accept it anyway)`,
    { path, mode, gid: file.gid })
}

/** Check the key file at `path` (following symlinks, like the read that follows). */
export async function checkKeyFileMode (path: string, what = 'key', env: NodeJS.ProcessEnv = process.env): Promise<void> {
  assertKeyFileMode(path, await statOrThrow(() => stat(path), path, what), what, env)
}

/** The same, synchronously. */
export function checkKeyFileModeSync (path: string, what = 'key', env: NodeJS.ProcessEnv = process.env): void {
  let s: Stats
  try {
    s = statSync(path)
  } catch (err) {
    throw cannotStat(err, path, what)
  }
  assertKeyFileMode(path, s, what, env)
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
