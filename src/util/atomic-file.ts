/**
 * Durable, atomic replacement of a small file in a data directory: write a
 * temp file, fsync it, rename it over the old one, fsync the directory. A
 * crash at any point leaves either the old content or the new one, never a
 * mix, and once the promise resolves the new content survives a power loss.
 * The state file and the votes file come here through json-file.ts, which
 * wraps the raw fs error in the caller's own code.
 */
import { open, rename } from 'node:fs/promises'
import { makeDirs } from './make-dirs.js'
import { join } from 'node:path'

/** Replace `<dir>/<name>` with `text`. Throws the fs error as is (its `code` is the errno). */
export async function writeFileAtomic (dir: string, name: string, text: string): Promise<void> {
  const file = join(dir, name)
  await makeDirs(dir, 0o700)
  const tmp = `${file}.tmp`
  const fh = await open(tmp, 'w', 0o600)
  try {
    await fh.writeFile(text)
    await fh.sync()
  } finally {
    await fh.close()
  }
  await rename(tmp, file)
  const d = await open(dir, 'r')
  try { await d.sync() } finally { await d.close() }
}

/** A human reason for a failed write, with the usual causes spelled out. */
export function unwritableReason (file: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code
  return `cannot write ${file}: ${(err as Error).message}` + (code === 'ENOSPC' ? ' (the disk is full)' : code === 'EROFS' ? ' (read-only file system)' : '')
}
