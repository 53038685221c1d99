/**
 * A voter's attestations on disk (`<dataDir>/quotad-attest.json`,
 * reclaim.ts): an attestation must outlive the voter's process, because a
 * restarted voter that forgot it could echo the dead incarnation again, and
 * the survivors have already credited what it held. Written atomically and
 * durably before any gossip that carries a new attestation leaves.
 *
 * A lost file must not pass for "attested nothing": a voter creates it
 * (empty) before its first state file, and says so in every state file it
 * writes (`attestKept`). A start whose state file says so and finds no file
 * is refused (E_ATTEST_MISSING). State files written before this existed
 * carry no mark: such a voter creates the file at its next start.
 */
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { FieldError, parseJsonDoc, readIfExists, writeJsonFile } from '../util/json-file.js'

export const ATTEST_FILE = 'quotad-attest.json'

interface AttestDoc {
  version: 1
  node: string
  cluster: string
  /** [node, highest incarnation attested]. */
  attested: Array<[string, number]>
}

/** The attestations kept in `dataDir` (none if there is no file). Throws E_STATE_INVALID naming the field. */
export async function readAttestations (dataDir: string, node: string, cluster: string): Promise<Map<string, number>> {
  const file = join(dataDir, ATTEST_FILE)
  const text = await readIfExists(dataDir, ATTEST_FILE, ErrorCodes.STATE_UNREADABLE)
  if (text === undefined) return new Map()
  const doc = parseJsonDoc(text, raw => check(raw, node, cluster), (path, what) =>
    new QuotadError(ErrorCodes.STATE_INVALID, `${file}: ${what}`, { file, path }))
  return new Map(doc.attested)
}

/**
 * A voter's start: its attestations, and whether the file is missing (the
 * driver then creates it, empty, before it writes its state file). Throws
 * E_ATTEST_MISSING if the state file says the file was kept (`kept`).
 */
export async function openAttestations (dataDir: string, node: string, cluster: string, kept: boolean): Promise<{ attested: Map<string, number>, missing: boolean }> {
  const file = join(dataDir, ATTEST_FILE)
  const text = await readIfExists(dataDir, ATTEST_FILE, ErrorCodes.STATE_UNREADABLE)
  if (text !== undefined) return { attested: await readAttestations(dataDir, node, cluster), missing: false }
  if (kept) {
    throw new QuotadError(ErrorCodes.ATTEST_MISSING,
      `${file} is missing, but this seed kept it (its state file says so): it may have attested members dead that it ` +
      'must never echo again. Restore the file from a backup, or see "Never delete quotad-attest.json" in docs/operations.md',
      { file })
  }
  return { attested: new Map(), missing: true }
}

export async function writeAttestations (dataDir: string, node: string, cluster: string, attested: ReadonlyMap<string, number>): Promise<void> {
  const doc: AttestDoc = { version: 1, node, cluster, attested: [...attested] }
  await writeJsonFile(dataDir, ATTEST_FILE, doc, ErrorCodes.STATE_UNWRITABLE)
}

function check (raw: unknown, node: string, cluster: string): AttestDoc {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new FieldError('$', 'must be an object')
  const o = raw as Record<string, unknown>
  if (o.version !== 1) throw new FieldError('version', `must be 1, got ${String(o.version)}`)
  if (o.node !== node) throw new FieldError('node', `belongs to node "${String(o.node)}", not "${node}"`)
  if (o.cluster !== cluster) throw new FieldError('cluster', `belongs to cluster "${String(o.cluster)}", not "${cluster}"`)
  if (!Array.isArray(o.attested)) throw new FieldError('attested', 'must be a list')
  o.attested.forEach((e, i) => {
    if (!Array.isArray(e) || e.length !== 2 || typeof e[0] !== 'string' || !Number.isSafeInteger(e[1]) || e[1] < 1) {
      throw new FieldError(`attested[${i}]`, 'must be [node, incarnation]')
    }
  })
  return o as unknown as AttestDoc
}
