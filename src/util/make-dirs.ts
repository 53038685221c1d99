/**
 * `mkdir -p`, one level at a time. Node's `mkdir(dir, { recursive: true })`
 * spins forever, at 100% CPU, on a path under /proc (mkdir there fails with
 * ENOENT although the parent exists, and its loop retries the parent), so a
 * socket path or data dir under /proc hung the start. This walks up to the
 * nearest existing folder and creates each missing one below it with a
 * plain mkdir: at most one call per path component, and every failure is
 * an error, never a retry.
 */
import { mkdir, stat } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'

/**
 * Create `dir` and any missing parents with `mode` (less the umask, as
 * mkdir does). Resolves with the folders it created, top first (none if
 * `dir` existed). Rejects with the errno error of the failing step
 * (ENOTDIR: a part is a file).
 */
export async function makeDirs (dir: string, mode: number): Promise<string[]> {
  const missing: string[] = []
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      const st = await stat(d)
      if (!st.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, ${d}`), { code: 'ENOTDIR', path: d })
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(d) === d) throw err
      missing.push(d)
    }
  }
  missing.reverse()
  for (const d of missing) {
    try {
      await mkdir(d, { mode })
    } catch (err) {
      // Made meanwhile by another process: as good as made here.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  return missing
}
