/**
 * What the cluster driver keeps on disk while it runs, beside the state
 * file: the books journal (journal.ts, journal-file.ts) and a voter's
 * attestations (attest-file.ts). Each is written by one chain of promises,
 * so writes land in order, and each write resolves to whether it is on disk:
 *
 * - a grant leaves only after the journal write that holds its give;
 * - a gossip leaves only after the attestations it carries are written.
 */
import { join } from 'node:path'
import type { Clock } from '../clock.js'
import { ErrorCodes } from '../errors.js'
import type { Logger } from '../util/log.js'
import { writeAttestations } from './attest-file.js'
import type { ClusterCore } from './cluster-core.js'
import { JournalFile } from './journal-file.js'
import { JOURNAL_FILE, replayJournal, type Replayed } from './journal.js'
import { journalCheckpoint } from './persist.js'
import { writeReplica } from './replica-file.js'
import type { Jack } from './replica-messages.js'
import type { ReplicaChange } from './replica-store.js'

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

export class NodeDisk {
  private readonly core: ClusterCore
  private readonly dataDir: string
  private readonly cluster: string
  private readonly log: Logger
  private readonly clock: Clock
  private readonly journal: JournalFile
  private journalTail: Promise<boolean> = Promise.resolve(true)
  private journalFailedAt = -Infinity
  private attestTail: Promise<boolean> = Promise.resolve(true)
  private attestWrites = 0
  private attestFailedAt = -Infinity
  private replicaTail: Promise<unknown> = Promise.resolve()
  private replicaFailedAt = -Infinity
  /** Called when a grant waits for the journal's copies: the driver sends them at once (replication.ts). */
  onWaiting: () => void = () => {}

  constructor (core: ClusterCore, dataDir: string, cluster: string, log: Logger, clock: Clock) {
    this.core = core
    this.dataDir = dataDir
    this.cluster = cluster
    this.log = log
    this.clock = clock
    this.journal = new JournalFile(dataDir)
  }

  /**
   * Write what the journal has pending. Resolves true once it is on disk:
   * only then may a grant recorded before this call leave. After a failed
   * write the next one is a whole checkpoint (the books are current in
   * memory, so nothing a failed batch held is lost), and until one succeeds
   * no grant leaves: a give the disk does not know of must not be out.
   */
  persistJournal (): Promise<boolean> {
    this.journalTail = this.journalTail.then(async () => {
      const r = this.core.replication.take(this.core.journal, () => journalCheckpoint(this.core))
      if (r === null) return true
      try {
        await this.journal.write(r.w)
        this.core.replication.localDone(r.pos)
        return true
      } catch (err) {
        this.core.journal.checkpointNeeded = true
        const now = this.clock.mono()
        if (now - this.journalFailedAt > 60_000) {
          this.journalFailedAt = now
          this.log.error('cannot write the journal; no tokens are given until it can be written', { code: (err as { code?: string }).code, err: (err as Error).message })
        }
        return false
      }
    })
    return this.journalTail
  }

  /**
   * Before a grant of `keys` leaves: the journal, with the give, on this
   * disk and, for a seed with a share, a reservation covering its gives at a
   * quorum of seeds (replication.ts). False if
   * either does not happen within the want timeout: the grant does not
   * leave (the ledger resends it later).
   */
  async persistForGrant (keys: Iterable<string>): Promise<boolean> {
    if (!await this.persistJournal()) return false
    const r = this.core.replication
    return await new Promise<boolean>(resolve => {
      r.whenCovered(keys, this.clock.mono(), resolve)
      // Waiting, it is urgent: the copies it needs go out now, not at the next tick (as the simulator does).
      this.onWaiting()
    })
  }

  /**
   * A jrep, in order with the others: `accept` runs when its turn comes (the
   * store's state is then current), its change is written, and only then
   * committed and answered. Null: refused (the driver answers nothing).
   */
  storeReplica (writer: string, accept: () => { change: ReplicaChange | null } | null): Promise<Jack | null> {
    const next = this.replicaTail.then(async () => {
      const r = accept()
      if (r === null) return null
      if (r.change !== null) {
        try {
          await writeReplica(this.dataDir, r.change)
          this.core.replicas?.commit(r.change)
        } catch (err) {
          const now = this.clock.mono()
          if (now - this.replicaFailedAt > 60_000) {
            this.replicaFailedAt = now
            this.log.error('cannot write a seed\'s journal copy; that seed\'s grants wait for other seeds', { writer, err: (err as Error).message })
          }
        }
      }
      return this.core.journalAck(writer)
    })
    this.replicaTail = next.catch(() => {})
    return next
  }

  /** No attestation is waiting to be written: a gossip may leave at once. */
  get attestationsWritten (): boolean {
    return !this.core.reclaim.dirty && this.attestWrites === 0
  }

  /** Write the voter's attestations if they changed; resolves false if they could not be written. */
  persistAttestations (): Promise<boolean> {
    const r = this.core.reclaim
    if (!r.dirty) return this.attestTail
    r.dirty = false
    const snapshot = new Map(r.attested)
    this.attestWrites++
    this.attestTail = this.attestTail.then(async () => {
      try {
        await writeAttestations(this.dataDir, this.core.node, this.cluster, snapshot)
        return true
      } catch (err) {
        r.dirty = true
        const now = this.clock.mono()
        if (now - this.attestFailedAt > 60_000) {
          this.attestFailedAt = now
          this.log.error('cannot write the attestations; gossip waits until they are written', { code: ErrorCodes.ATTEST_UNWRITABLE, err: (err as Error).message })
        }
        return false
      } finally {
        this.attestWrites--
      }
    })
    return this.attestTail
  }

  /** Let pending writes land, then close the journal. */
  async close (): Promise<void> {
    await this.journalTail
    await this.attestTail
    await this.replicaTail
    await this.journal.close()
  }
}
