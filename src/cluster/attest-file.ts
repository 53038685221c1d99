/**
 * A voter's attestations on disk (`<dataDir>/quotad-attest.json`,
 * reclaim.ts): an attestation must outlive the voter's process, because a
 * restarted voter that forgot it could echo the dead incarnation again, and
 * the survivors have already credited what it held. Written atomically and
 * durably before any gossip that carries a new attestation leaves.
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
