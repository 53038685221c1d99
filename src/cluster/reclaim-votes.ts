/**
 * A voter's durable votes, `quotad-votes.json` in its data directory
 * (design §3.5, §4.5, §10): its promises and acceptances per open slot, the
 * chosen watermark and tail, and every incarnation it has echoed that the
 * log does not cover. The content is reclaim-acceptor.ts's `VotesState`;
 * the reclaim log returns it as `persist`, and the driver writes it here,
 * atomically and fsynced (util/atomic-file.ts, as the state file), before
 * it sends the reply that reveals the vote.
 *
 * The file is validated field by field when read; a bad one is refused with
 * E_VOTES_INVALID naming the field, never guessed at or reset: a voter that
 * forgets a promise can let two values be chosen for one slot.
 *
 * A missing file is not "no votes" if the node has run before (its state
 * file exists): it may have voted and lost the record, so it must not vote
 * (E_VOTES_MISSING, §10). Hence on a first start the driver creates the
 * votes file (`openVotes`) before it first writes the state file.
 */
import { access } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { FieldError as Bad, parseJsonDoc, readIfExists, writeJsonFile } from '../util/json-file.js'
import { STATE_FILE } from './durable-state.js'
import { emptyVotes, type SlotVotes, type VotesState } from './reclaim-acceptor.js'
import type { KnownInc } from './reclaim-messages.js'
import { compareBallots, type Ballot, type ChosenEntry, type ReclaimValue } from './reclaim-value.js'

export const VOTES_FILE = 'quotad-votes.json'

/** Bounds on what a file may hold (far above what the log keeps: open slots 16, tail 16). */
const MAX_SLOTS = 1024
const MAX_CHOSEN = 1024
const MAX_ECHOED = 100_000
const MAX_ACCOUNTS = 10_000

type Obj = Record<string, unknown>


function obj (v: unknown, path: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Bad(path, 'must be an object')
  return v as Obj
}

function str (v: unknown, path: string, allowEmpty = false): string {
  if (typeof v !== 'string' || v.length > 64 || (!allowEmpty && v.length === 0)) throw new Bad(path, `must be a ${allowEmpty ? '' : 'non-empty '}string of at most 64 characters, got ${JSON.stringify(v)}`)
  return v
}

function int (v: unknown, path: string, min = 0): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw new Bad(path, `must be a whole number >= ${min}, got ${JSON.stringify(v)}`)
  return v
}

function arr (v: unknown, path: string, max: number): unknown[] {
  if (!Array.isArray(v)) throw new Bad(path, 'must be an array')
  if (v.length > max) throw new Bad(path, `has more than ${max} entries`)
  return v
}

function ballot (v: unknown, path: string): Ballot {
  const o = obj(v, path)
  const round = int(o.round, `${path}.round`)
  const node = str(o.node, `${path}.node`, round === 0)
  if (round === 0 && node !== '') throw new Bad(`${path}.node`, 'must be "" when round is 0')
  return { round, node }
}

function value (v: unknown, path: string, slot: number): ReclaimValue {
  const o = obj(v, path)
  if (o.slot !== slot) throw new Bad(`${path}.slot`, `must be ${slot}, got ${JSON.stringify(o.slot)}`)
  const h = obj(o.heir, `${path}.heir`)
  return {
    slot,
    D: arr(o.D, `${path}.D`, MAX_ACCOUNTS).map((e, i) => {
      const d = obj(e, `${path}.D[${i}]`)
      return { node: str(d.node, `${path}.D[${i}].node`), acct: int(d.acct, `${path}.D[${i}].acct`), inc: int(d.inc, `${path}.D[${i}].inc`), epoch: str(d.epoch, `${path}.D[${i}].epoch`) }
    }),
    heir: { node: str(h.node, `${path}.heir.node`), epoch: str(h.epoch, `${path}.heir.epoch`), acct: int(h.acct, `${path}.heir.acct`) },
    listed: arr(o.listed, `${path}.listed`, MAX_ACCOUNTS).map((e, i) => {
      const l = obj(e, `${path}.listed[${i}]`)
      return { node: str(l.node, `${path}.listed[${i}].node`), acct: int(l.acct, `${path}.listed[${i}].acct`) }
    })
  }
}

function slotVotes (v: unknown, path: string, through: number): SlotVotes {
  const o = obj(v, path)
  const slot = int(o.slot, `${path}.slot`, through + 1)
  const promised = ballot(o.promised, `${path}.promised`)
  const s: SlotVotes = { slot, promised }
  if (o.accepted !== undefined) {
    const a = obj(o.accepted, `${path}.accepted`)
    const b = ballot(a.ballot, `${path}.accepted.ballot`)
    // An acceptance raises the promise to its ballot (reclaim-acceptor.ts A2): a file saying otherwise is corrupt.
    if (b.round === 0 || compareBallots(b, promised) > 0) throw new Bad(`${path}.accepted.ballot`, 'must be a real ballot no higher than promised')
    s.accepted = { ballot: b, value: value(a.value, `${path}.accepted.value`, slot) }
  }
  return s
}

function votes (raw: unknown): VotesState {
  const o = obj(raw, '$')
  if (o.version !== 1) throw new Bad('version', `must be 1, got ${JSON.stringify(o.version)}`)
  const through = int(o.through, 'through')
  const slots = arr(o.slots, 'slots', MAX_SLOTS).map((s, i) => slotVotes(s, `slots[${i}]`, through))
  if (new Set(slots.map(s => s.slot)).size !== slots.length) throw new Bad('slots', 'lists a slot twice')
  const chosen: ChosenEntry[] = arr(o.chosen, 'chosen', MAX_CHOSEN).map((e, i) => {
    const c = obj(e, `chosen[${i}]`)
    const slot = int(c.slot, `chosen[${i}].slot`, 1)
    if (slot > through) throw new Bad(`chosen[${i}].slot`, `must be at most through (${through}), got ${slot}`)
    return { slot, value: value(c.value, `chosen[${i}].value`, slot) }
  })
  const echoed = arr(o.echoed, 'echoed', MAX_ECHOED).map((e, i) => {
    const t = arr(e, `echoed[${i}]`, 2)
    if (t.length !== 2) throw new Bad(`echoed[${i}]`, 'must be [node, inc]')
    return [str(t[0], `echoed[${i}][0]`), int(t[1], `echoed[${i}][1]`)] as KnownInc
  })
  return {
    version: 1, node: str(o.node, 'node'), cluster: str(o.cluster, 'cluster'), gen: int(o.gen, 'gen'), through,
    slots: slots.sort((a, b) => a.slot - b.slot), chosen, echoed
  }
}

function invalid (file: string, path: string, what: string): QuotadError {
  return new QuotadError(ErrorCodes.VOTES_INVALID,
    `${file} is not a valid quotad votes file: ${what}. Do not delete or edit it: a voter that forgets a vote can let two reclaims be chosen for one slot. ` +
    'Restore it from a backup, or retire this voter (docs/reclaim-design.md §10)', { file, path })
}

/** Parse and validate a votes file's text. Throws E_VOTES_INVALID naming the field. */
export function parseVotes (text: string, file: string): VotesState {
  return parseJsonDoc(text, votes, (path, what) => invalid(file, path, what))
}

/** Refuse a votes file written by another node or cluster. */
export function checkVotesOwner (v: VotesState, file: string, node: string, cluster: string): void {
  if (v.node !== node) throw invalid(file, 'node', `it belongs to node "${v.node}", not "${node}" (a data directory per node)`)
  if (v.cluster !== cluster) throw invalid(file, 'cluster', `it belongs to cluster "${v.cluster}", not "${cluster}"`)
}

/** The file, or undefined if there is none. Throws E_VOTES_UNREADABLE or E_VOTES_INVALID. */
export async function readVotes (dataDir: string): Promise<VotesState | undefined> {
  const text = await readIfExists(dataDir, VOTES_FILE, ErrorCodes.VOTES_UNREADABLE)
  return text === undefined ? undefined : parseVotes(text, join(dataDir, VOTES_FILE))
}

/** Write atomically and durably. Throws E_VOTES_UNWRITABLE. */
export async function writeVotes (dataDir: string, v: VotesState): Promise<void> {
  await writeJsonFile(dataDir, VOTES_FILE, v, ErrorCodes.VOTES_UNWRITABLE)
}

/**
 * §10, pure: may this voter vote with these votes? A missing votes file is refused (E_VOTES_MISSING)
 * when the node has run before, i.e. its state file exists.
 */
export function checkMayVote (v: VotesState | undefined, stateFileExists: boolean, file: string): void {
  if (v !== undefined || !stateFileExists) return
  throw new QuotadError(ErrorCodes.VOTES_MISSING,
    `${file} is missing, but this node has run before (its ${STATE_FILE} exists): it may have voted in the reclaim log and ` +
    'lost the record, so it must not vote. Restore the file from a backup, or retire this voter (docs/reclaim-design.md §10)',
    { file })
}

/**
 * A voter's start: read and check its votes file; on a true first start (no state file, no votes
 * file) create an empty one, durably, so that it exists before the state file does.
 * Call it before the first `writeState` of the start.
 */
export async function openVotes (dataDir: string, node: string, cluster: string): Promise<VotesState> {
  const file = join(dataDir, VOTES_FILE)
  const v = await readVotes(dataDir)
  if (v !== undefined) {
    checkVotesOwner(v, file, node, cluster)
    return v
  }
  checkMayVote(undefined, await exists(join(dataDir, STATE_FILE)), file)
  const fresh = emptyVotes(node, cluster)
  await writeVotes(dataDir, fresh)
  return fresh
}

async function exists (path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw new QuotadError(ErrorCodes.VOTES_UNREADABLE, `cannot check ${path}: ${(err as Error).message}`, { file: path, errno: (err as NodeJS.ErrnoException).code })
  }
}
