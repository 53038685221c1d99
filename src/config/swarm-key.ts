/**
 * The cluster's pre-shared key, in the standard libp2p/IPFS pnet swarm.key
 * format (95 bytes):
 *
 *     /key/swarm/psk/1.0.0/
 *     /base16/
 *     <64 hex digits>
 *
 * Written with mode 0600: whoever reads it can join the cluster. Read only
 * with mode 0600 or 0400, or group-readable (0640, 0440) when its group is
 * one of this process's (a Kubernetes Secret with the pod's fsGroup): any
 * other key file is refused with E_KEY_PERMISSIONS (key-file-mode.ts),
 * unless QUOTAD_ALLOW_INSECURE_KEYS=1.
 */
import { randomBytes } from 'node:crypto'
import { chmod, open, writeFile } from 'node:fs/promises'
import { makeDirs } from '../util/make-dirs.js'
import { dirname } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { assertKeyFileMode, checkKeyFileModeSync } from './key-file-mode.js'

const HEADER = '/key/swarm/psk/1.0.0/\n/base16/\n'

export function formatSwarmKey (key: Uint8Array): string {
  return HEADER + Buffer.from(key).toString('hex')
}

/**
 * Parse a swarm key file's text; throws E_CONFIG_INVALID naming the problem.
 * `path`, when given, is the file the text was read from: its permission
 * bits are checked first (E_KEY_PERMISSIONS), so a reader that does
 * `parseSwarmKey(await readFile(p, 'utf8'), p)` refuses a world-readable key.
 * `loadSwarmKey` does both without a window between the check and the read.
 */
export function parseSwarmKey (text: string, path?: string): Uint8Array {
  if (path !== undefined) checkKeyFileModeSync(path, 'swarm key')
  return parseText(text, path ?? 'swarm key')
}

function parseText (text: string, source: string): Uint8Array {
  const lines = text.split(/\r?\n/)
  if (lines[0] !== '/key/swarm/psk/1.0.0/' || lines[1] !== '/base16/' || !/^[0-9a-fA-F]{64}$/.test(lines[2] ?? '')) {
    throw new QuotadError(ErrorCodes.CONFIG_INVALID, `${source}: not a swarm key (expected "/key/swarm/psk/1.0.0/", "/base16/" and 64 hex digits; run "quotad keygen FILE")`)
  }
  return Uint8Array.from(Buffer.from(lines[2], 'hex'))
}

/** Read and parse the swarm key at `path`, checking the mode of the file actually opened. */
export async function loadSwarmKey (path: string): Promise<Uint8Array> {
  let text: string
  try {
    const fh = await open(path, 'r')
    try {
      assertKeyFileMode(path, await fh.stat(), 'swarm key')
      text = await fh.readFile('utf8')
    } finally {
      await fh.close()
    }
  } catch (err) {
    if (err instanceof QuotadError) throw err
    throw new QuotadError(ErrorCodes.CONFIG_READ, `${path}: cannot read the swarm key file (${(err as Error).message})`)
  }
  return parseText(text, path)
}

/** Write a new random swarm key to `path`. Refuses to overwrite unless `force`. */
export async function writeSwarmKey (path: string, force = false): Promise<void> {
  await makeDirs(dirname(path), 0o777)
  try {
    await writeFile(path, formatSwarmKey(randomBytes(32)), { mode: 0o600, flag: force ? 'w' : 'wx' })
    // `mode` applies only to a new file: a replaced one keeps its old bits.
    if (force) await chmod(path, 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new QuotadError(ErrorCodes.USAGE, `${path} exists; pass --force to replace it (every node then needs the new key)`)
    }
    throw err
  }
}
