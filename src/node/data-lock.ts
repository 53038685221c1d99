/**
 * One daemon per data directory. Two processes on one dataDir would both
 * read the state file and both spend the node's tokens, and the second would
 * rewrite the first one's state. So a node takes `<dataDir>/quotad.lock`
 * before it touches anything else, and a second `quotad` for the same node
 * exits with E_DATA_DIR_LOCKED, naming the process that holds it.
 *
 * The lock is a file created with O_EXCL holding the owner's pid and the
 * process's start time (from /proc, so a reused pid is not mistaken for the
 * owner). A lock whose owner is gone (kill -9, a power cut) is stale and is
 * taken over: renamed aside under a unique name, checked to be the stale
 * one that was judged (if a live owner's lock was moved by a race, it is put
 * back), and then created afresh with O_EXCL. Only when two processes race
 * for the same stale lock within microseconds could both believe they hold
 * it; a process manager restarting one node never does that.
 */
import { link, open, readFile, rename, unlink } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'

export const LOCK_FILE = 'quotad.lock'

interface Owner { pid: number, start: string }

/** A process's start time in clock ticks since boot (/proc/<pid>/stat field 22); undefined if unknown. */
function startTime (pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return undefined
  }
}

/** Whether the lock's owner still runs: its pid exists and, where /proc tells, started when the lock says. */
function alive (o: Owner): boolean {
  try {
    process.kill(o.pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
  }
  // A reused pid (our own, say, in a restarted container) started at another time.
  const s = startTime(o.pid)
  if (s === undefined || o.start === '') return o.pid !== process.pid
  return s === o.start
}

function parse (text: string): Owner | null {
  try {
    const o = JSON.parse(text) as Partial<Owner>
    if (typeof o.pid === 'number' && Number.isSafeInteger(o.pid) && o.pid > 0) return { pid: o.pid, start: typeof o.start === 'string' ? o.start : '' }
  } catch {
    // not JSON: a garbled lock, treated as stale
  }
  return null
}

export class DataLock {
  readonly path: string
  private held = false

  private constructor (path: string) {
    this.path = path
  }

  /** Take the lock of `dataDir` (which must exist). Throws E_DATA_DIR_LOCKED if a live process holds it. */
  static async acquire (dataDir: string): Promise<DataLock> {
    const lock = new DataLock(join(dataDir, LOCK_FILE))
    await lock.take()
    return lock
  }

  private async take (): Promise<void> {
    const me = JSON.stringify({ pid: process.pid, start: startTime(process.pid) ?? '' })
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const fh = await open(this.path, 'wx', 0o600)
        try { await fh.writeFile(me + '\n'); await fh.sync() } finally { await fh.close() }
        this.held = true
        return
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw this.ioError(err)
      }
      const text = await readFile(this.path, 'utf8').catch(() => null)
      if (text === null) continue // gone meanwhile: try again
      const owner = parse(text)
      if (owner !== null && alive(owner)) throw this.locked(owner)
      // Stale (its owner is gone) or unreadable garbage: move it aside, check it was the one judged.
      const aside = `${this.path}.stale.${process.pid}.${attempt}`
      try {
        await rename(this.path, aside)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
        throw this.ioError(err)
      }
      const moved = await readFile(aside, 'utf8').catch(() => '')
      if (moved !== text) {
        // A live owner's fresh lock was moved by a race: put it back, and step aside.
        await link(aside, this.path).catch(() => {})
        await unlink(aside).catch(() => {})
        const o = parse(moved)
        throw this.locked(o ?? { pid: 0, start: '' })
      }
      await unlink(aside).catch(() => {})
    }
    throw new QuotadError(ErrorCodes.DATA_DIR_LOCKED, `could not take ${this.path}: it kept changing (another quotad is starting for this data directory)`)
  }

  /** Release the lock if this process holds it. Idempotent. */
  async release (): Promise<void> {
    if (!this.held) return
    this.held = false
    const text = await readFile(this.path, 'utf8').catch(() => null)
    if (text !== null && parse(text)?.pid === process.pid) await unlink(this.path).catch(() => {})
  }

  private locked (o: Owner): QuotadError {
    return new QuotadError(ErrorCodes.DATA_DIR_LOCKED,
      `${this.path} is held by another quotad process (pid ${o.pid}): one daemon per node and data directory. ` +
      'Stop that process first (if it is gone, this lock is stale and the next start takes it over).', { path: this.path, pid: o.pid })
  }

  private ioError (err: unknown): QuotadError {
    const code = (err as NodeJS.ErrnoException).code
    return new QuotadError(ErrorCodes.STATE_UNWRITABLE, `cannot create ${this.path}: ${(err as Error).message}`, { path: this.path, errno: code })
  }
}
