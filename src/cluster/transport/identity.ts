/**
 * The node's peer identity: an Ed25519 private key kept in `<dataDir>/peer-key`
 * as a protobuf-marshalled libp2p private key (the same bytes
 * `privateKeyToProtobuf` writes), mode 0600. The peer id is derived from it,
 * so it must survive restarts: peers and operators recognise a node by it.
 *
 * An existing key file that others may use, or its group write, or a group
 * not the process's read, is refused with E_KEY_PERMISSIONS
 * (config/key-file-mode.ts), unless QUOTAD_ALLOW_INSECURE_KEYS=1.
 *
 * The first start creates the key atomically (temp file, then `link`, which
 * refuses to replace an existing file), so a crash never leaves a half-written
 * key and two processes racing on one data dir end up with the same identity.
 */
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys'
import { chmod, link, open, unlink } from 'node:fs/promises'
import { makeDirs } from '../../util/make-dirs.js'
import { join } from 'node:path'
import { ErrorCodes, QuotadError, isQuotadError } from '../../errors.js'
import { assertKeyFileMode } from '../../config/key-file-mode.js'

export const PEER_KEY_FILE = 'peer-key'

/** Whatever `privateKeyFromProtobuf` returns (Ed25519 for keys we generate). */
export type PeerPrivateKey = ReturnType<typeof privateKeyFromProtobuf>

export interface LoadedIdentity {
  key: PeerPrivateKey
  path: string
  /** True when this call generated and wrote a new key. */
  created: boolean
  /** Permission bits of the key file; group read only for a group of this process, more only with QUOTAD_ALLOW_INSECURE_KEYS=1. */
  mode: number
}

/**
 * The node's peer id (`12D3KooW...`), from `<dataDir>/peer-key`, created if
 * missing: what `quotad peer-id` prints for a cluster file's `peerId`.
 */
export async function peerIdOf (dataDir: string): Promise<{ peerId: string, created: boolean, path: string }> {
  const { peerIdFromPrivateKey } = await import('@libp2p/peer-id')
  const id = await loadOrCreateIdentity(dataDir)
  return { peerId: peerIdFromPrivateKey(id.key as Parameters<typeof peerIdFromPrivateKey>[0]).toString(), created: id.created, path: id.path }
}

/** Load `<dataDir>/peer-key`, or create it. Throws E_CONFIG_INVALID naming the file if it is not a key. */
export async function loadOrCreateIdentity (dataDir: string): Promise<LoadedIdentity> {
  const path = join(dataDir, PEER_KEY_FILE)
  const existing = await readKeyFile(path)
  if (existing !== undefined) return existing

  await makeDirs(dataDir, 0o700)
  const key = await generateKeyPair('Ed25519')
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`
  const fh = await open(tmp, 'wx', 0o600)
  try {
    await fh.writeFile(privateKeyToProtobuf(key))
    await fh.sync()
  } finally {
    await fh.close()
  }
  // the umask may have narrowed the mode, never widened it; make it exact
  await chmod(tmp, 0o600)
  try {
    await link(tmp, path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    // another process won the race: use its key
    const theirs = await readKeyFile(path)
    if (theirs !== undefined) return theirs
    throw err
  } finally {
    await unlink(tmp).catch(() => {})
  }
  return { key, path, created: true, mode: 0o600 }
}

async function readKeyFile (path: string): Promise<LoadedIdentity | undefined> {
  let bytes: Buffer
  let mode: number
  try {
    const fh = await open(path, 'r')
    try {
      // The mode of the file actually read: refused, like ssh, if others (or another group) may read it.
      const st = await fh.stat()
      mode = st.mode & 0o777
      assertKeyFileMode(path, st, 'peer key')
      bytes = await fh.readFile()
    } finally {
      await fh.close()
    }
  } catch (err) {
    if (isQuotadError(err)) throw err
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new QuotadError(ErrorCodes.CONFIG_INVALID,
      `${path}: cannot read the peer identity file (${(err as Error).message})`)
  }
  let key: PeerPrivateKey
  try {
    key = privateKeyFromProtobuf(bytes)
  } catch (err) {
    throw new QuotadError(ErrorCodes.CONFIG_INVALID,
      `${path}: not a valid peer identity file (${(err as Error).message}); ` +
      'restore it from a backup, or delete it to give this node a new peer id')
  }
  return { key, path, created: false, mode }
}
