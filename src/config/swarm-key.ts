/**
 * The cluster's pre-shared key, in the standard libp2p/IPFS pnet swarm.key
 * format (95 bytes):
 *
 *     /key/swarm/psk/1.0.0/
 *     /base16/
 *     <64 hex digits>
 *
 * Written with mode 0600: whoever reads it can join the cluster.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'

const HEADER = '/key/swarm/psk/1.0.0/\n/base16/\n'

export function formatSwarmKey (key: Uint8Array): string {
  return HEADER + Buffer.from(key).toString('hex')
}

/** Parse a swarm key file's text; throws E_CONFIG_INVALID naming the problem. */
export function parseSwarmKey (text: string, source = 'swarm key'): Uint8Array {
  const lines = text.split(/\r?\n/)
  if (lines[0] !== '/key/swarm/psk/1.0.0/' || lines[1] !== '/base16/' || !/^[0-9a-fA-F]{64}$/.test(lines[2] ?? '')) {
    throw new QuotadError(ErrorCodes.CONFIG_INVALID, `${source}: not a swarm key (expected "/key/swarm/psk/1.0.0/", "/base16/" and 64 hex digits; run "quotad keygen FILE")`)
  }
  return Uint8Array.from(Buffer.from(lines[2], 'hex'))
}

/** Write a new random swarm key to `path`. Refuses to overwrite unless `force`. */
export async function writeSwarmKey (path: string, force = false): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  try {
    await writeFile(path, formatSwarmKey(randomBytes(32)), { mode: 0o600, flag: force ? 'w' : 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new QuotadError(ErrorCodes.USAGE, `${path} exists; pass --force to replace it (every node then needs the new key)`)
    }
    throw err
  }
}
