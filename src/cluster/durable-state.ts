/**
 * A node's durable state in its dataDir, so that a restart never spends a
 * token twice.
 *
 * `quotad-state.json` says whether the last run stopped cleanly:
 * - absent: a first start. The node may materialize its pre-allocated shares.
 * - `status: "running"`: the last run did not stop cleanly (crash, kill -9).
 *   Whatever it held is stranded; the node starts with nothing and never
 *   materializes pre-allocated shares again (they may be out there already).
 * - `status: "stopped"`: a clean stop. The file lists what the node still
 *   had after handing its held tokens to peers (mostly tokens spent and not
 *   yet returned), and those come back on their schedule.
 *
 * The file is rewritten as "running" (and fsynced) BEFORE the node serves:
 * the stopped state is consumed exactly once, so a crash after start cannot
 * replay it.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'

export const STATE_FILE = 'quotad-state.json'

export interface SavedKey {
  key: string
  rule: string
  ruleHash: string
  /** The share the key was created with (eviction needs it back). */
  initial: number
  /** Tokens held at the stop: spendable at once after the restart. */
  held: number
  /** Tokens spent (or deferred) and not yet back, and the time by which all have returned. */
  tokens: number
  at: number
}

export interface SavedState {
  version: 1
  node: string
  cluster: string
  status: 'running' | 'stopped'
  allocate: boolean
  stoppedAt?: number
  keys: SavedKey[]
}

export type StartKind = 'first-start' | 'clean-restart' | 'unclean-restart'

export async function readState (dataDir: string): Promise<SavedState | undefined> {
  const file = join(dataDir, STATE_FILE)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
  try {
    const s = JSON.parse(text) as SavedState
    if (s.version !== 1 || (s.status !== 'running' && s.status !== 'stopped') || !Array.isArray(s.keys)) throw new Error('bad shape')
    return s
  } catch {
    // Refuse to guess: deleting the file would mean "first start", which
    // materializes the node's shares again and could create tokens.
    throw new QuotadError(ErrorCodes.CONFIG_INVALID, `${file} is corrupt. To start this node with nothing (its tokens stay stranded), ` +
      'replace it with {"version":1,"node":"NAME","cluster":"CLUSTER","status":"running","allocate":false,"keys":[]}; do not delete it')
  }
}

/** Write atomically (temp file, fsync, rename, fsync the directory). */
export async function writeState (dataDir: string, state: SavedState): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  const file = join(dataDir, STATE_FILE)
  const tmp = `${file}.tmp`
  const fh = await open(tmp, 'w', 0o600)
  try {
    await fh.writeFile(JSON.stringify(state))
    await fh.sync()
  } finally {
    await fh.close()
  }
  await rename(tmp, file)
  const dir = await open(dataDir, 'r')
  try { await dir.sync() } finally { await dir.close() }
}

export function startKind (s: SavedState | undefined): StartKind {
  if (s === undefined) return 'first-start'
  return s.status === 'stopped' ? 'clean-restart' : 'unclean-restart'
}
