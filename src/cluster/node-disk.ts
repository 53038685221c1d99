/**
 * The daemon's disk port (node-effects.ts `DiskPort`): what the cluster
 * driver keeps on disk while it runs, beside the state file: the books
 * journal (journal.ts, journal-file.ts), a seed's copies of the other
 * seeds' journals (replica-file.ts) and a voter's attestations
 * (attest-file.ts). Only the files: when to write, in what order and what
 * waits for it is the effects interpreter's, shared with the simulator.
 */
import { join } from 'node:path'
import type { Logger } from '../util/log.js'
import { writeAttestations } from './attest-file.js'
import { JournalFile } from './journal-file.js'
import { JOURNAL_FILE, replayJournal, type JournalWrite, type Replayed } from './journal.js'
import { writeReplica } from './replica-file.js'
import type { ReplicaChange } from './replica-store.js'
import type { DiskPort, Done } from './node-effects.js'

/** The crashed predecessor's journal, if there is a usable one: a bad one is logged and ignored (nothing is recovered). */
export async function readJournal (dataDir: string, node: string, cluster: string, log: Logger): Promise<Replayed | undefined> {
  try {
    const text = await JournalFile.read(dataDir)
    if (text === undefined) return undefined
    const r = replayJournal(text, join(dataDir, JOURNAL_FILE), node, cluster)
    if (r.torn) log.info('the journal\'s last line was torn by the crash; it is ignored (it was never synced, no grant in it left)')
    return r
  } catch (err) {
    log.error('the journal cannot be used; the crashed incarnation\'s tokens are not recovered', { code: (err as { code?: string }).code, err: (err as Error).message })
    return undefined
  }
}

export class NodeFiles implements DiskPort {
  private readonly journal: JournalFile

  constructor (private readonly dataDir: string, private readonly node: string, private readonly cluster: string) {
    this.journal = new JournalFile(dataDir)
  }

  writeJournal (w: JournalWrite, done: Done): void {
    this.journal.write(w).then(() => { done(null) }, done)
  }

  writeReplica (c: ReplicaChange, done: Done): void {
    writeReplica(this.dataDir, c).then(() => { done(null) }, done)
  }

  writeAttestations (attested: ReadonlyMap<string, number>, done: Done): void {
    writeAttestations(this.dataDir, this.node, this.cluster, attested).then(() => { done(null) }, done)
  }

  /** Close the journal (once the interpreter's writes have landed: NodeEffects `settled`). */
  async close (): Promise<void> {
    await this.journal.close()
  }
}
