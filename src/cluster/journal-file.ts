/**
 * The books journal on disk (`<dataDir>/quotad-journal.jsonl`; journal.ts
 * has the format and why). A checkpoint replaces the file atomically
 * (util/atomic-file.ts); a batch is appended, and fsynced (fdatasync) when
 * it holds a give. Writes are serialized by the driver.
 */
import { open, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { readIfExists } from '../util/json-file.js'
import { unwritableReason, writeFileAtomic } from '../util/atomic-file.js'
import { JOURNAL_FILE, type JournalWrite } from './journal.js'

export class JournalFile {
  private readonly dir: string
  private fh: FileHandle | null = null

  constructor (dataDir: string) {
    this.dir = dataDir
  }

  static async read (dataDir: string): Promise<string | undefined> {
    return await readIfExists(dataDir, JOURNAL_FILE, ErrorCodes.STATE_UNREADABLE)
  }

  get path (): string {
    return join(this.dir, JOURNAL_FILE)
  }

  /** Write one JournalWrite; resolves once it is on disk as `w.sync` asks. Throws E_JOURNAL_UNWRITABLE. */
  async write (w: JournalWrite): Promise<void> {
    try {
      if (w.checkpoint !== null) {
        await this.close()
        await writeFileAtomic(this.dir, JOURNAL_FILE, `${w.checkpoint}\n`)
        return
      }
      this.fh ??= await open(this.path, 'a', 0o600)
      await this.fh.write(`${w.batch as string}\n`)
      if (w.sync) await this.fh.datasync()
    } catch (err) {
      throw new QuotadError(ErrorCodes.JOURNAL_UNWRITABLE, unwritableReason(this.path, err), { path: this.path })
    }
  }

  async close (): Promise<void> {
    const fh = this.fh
    this.fh = null
    if (fh !== null) await fh.close()
  }
}
