/**
 * A seed's copies of the other seeds' journals on disk (replica-store.ts):
 * `<dataDir>/quotad-replica-<writer>.jsonl`, one per writer, in the journal's
 * own format (journal.ts), so a copy replays exactly as the writer's file
 * would. A new generation replaces the file atomically; a batch is appended
 * and fdatasync'ed before the jack that counts it leaves.
 */
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { unwritableReason, writeFileAtomic } from '../util/atomic-file.js'
import { readIfExists } from '../util/json-file.js'
import type { ReplicaChange } from './replica-store.js'

export function replicaFileName (writer: string): string {
  return `quotad-replica-${encodeURIComponent(writer)}.jsonl`
}

/** The copy of a writer's previous incarnation, kept aside when a newer one replaced it (replica-store.ts). */
export function supersededFileName (writer: string): string {
  return `quotad-superseded-${encodeURIComponent(writer)}.jsonl`
}

/** The copies on disk of these writers' journals (missing files are skipped); `superseded`: the copies kept aside. */
export async function readReplicas (dataDir: string, writers: readonly string[], superseded = false): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const w of writers) {
    const text = await readIfExists(dataDir, superseded ? supersededFileName(w) : replicaFileName(w), ErrorCodes.STATE_UNREADABLE)
    if (text !== undefined) out.set(w, text)
  }
  return out
}

/** Write one change; resolves once it is on disk. Throws E_JOURNAL_UNWRITABLE. */
export async function writeReplica (dataDir: string, c: ReplicaChange): Promise<void> {
  const name = replicaFileName(c.writer)
  const path = join(dataDir, name)
  try {
    // The copy replaced by a newer incarnation's goes aside first: a crash between the two keeps it in both files.
    if (c.superseded !== undefined) await writeFileAtomic(dataDir, supersededFileName(c.writer), c.superseded.text)
    if (c.kind === 'replace') { await writeFileAtomic(dataDir, name, c.text); return }
    const fh = await open(path, 'a', 0o600)
    try {
      await fh.write(c.text)
      await fh.datasync()
    } finally {
      await fh.close()
    }
  } catch (err) {
    throw new QuotadError(ErrorCodes.JOURNAL_UNWRITABLE, unwritableReason(path, err), { path })
  }
}
