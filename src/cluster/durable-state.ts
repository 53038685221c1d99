/**
 * A node's durable state in its dataDir, so that a restart never spends a
 * token twice.
 *
 * `quotad-state.json` says whether the last run stopped cleanly:
 * - absent: a first start. The node may materialize its pre-allocated shares.
 * - `status: "running"`: the last run did not stop cleanly (crash, kill -9).
 *   Whatever it held is stranded; the node starts with nothing and never
 *   materializes pre-allocated shares again (they may be out there already).
 * - `status: "stopped"`: a clean stop. The file lists what the node still
 *   had after handing its held tokens to peers (mostly tokens spent and not
 *   yet returned), the burns it owes, the rules it ran with (so a restart
 *   with a changed file carries the keys over exactly as a reload would)
 *   and the rule versions it is still changing from.
 *
 * The file is rewritten as "running" (and fsynced) BEFORE the node serves:
 * the stopped state is consumed exactly once, so a crash after start cannot
 * replay it. It also carries the incarnation counter, so that every start
 * gets a higher one than any before it (peers order epochs by it).
 *
 * The file is validated field by field when read (state-schema.ts); a bad
 * file is refused with E_STATE_INVALID naming the field, never guessed at.
 */
import { join } from 'node:path'
import type { RuleConfig } from '../config/types.js'
import { ErrorCodes } from '../errors.js'
import { ruleToFile } from '../config/validate.js'
import { readIfExists, writeTextFile } from '../util/json-file.js'
import type { RuleStamp } from './rule-change.js'
import { parseState } from './state-schema.js'

export const STATE_FILE = 'quotad-state.json'
export const STATE_VERSION = 2

export interface SavedKey {
  key: string
  rule: string
  ruleHash: string
  /** The share the key was created with (eviction needs it back). */
  initial: number
  /** Tokens held at the stop: spendable at once after the restart. */
  held: number
  /** Tokens spent (or deferred) and not yet back, and the wall-clock time by which all have returned. */
  tokens: number
  at: number
  /** Tokens this node still owes to burn (rule-change.ts). */
  burn: number
}

export interface SavedState {
  version: 2
  node: string
  cluster: string
  status: 'running' | 'stopped'
  allocate: boolean
  /** Starts so far, this one included (a running file) or the stopped one. */
  incarnation: number
  /** The epoch that wrote the file. */
  epoch: string
  /** Epochs whose books this file carries (the writer's own and those it carried). */
  carries: string[]
  /** How many of `carries`, from the first, a quorum might still attest (core-options.ts); absent: all. */
  carriedAtRisk?: number
  /**
   * A voter wrote it, and keeps `quotad-attest.json` beside it (created
   * before its first state file): the next start refuses a missing one
   * (E_ATTEST_MISSING) instead of forgetting what it attested.
   */
  attestKept?: true
  /** Wall-clock time of a clean stop. */
  stoppedAt?: number
  /** The rules the stopped node ran with (a clean stop only). */
  rules?: RuleConfig[]
  /** Rule versions the stopped node was still changing from. */
  transitions?: Record<string, RuleStamp[]>
  /** Burns other nodes owed as far as the stopped node knew: kept until they say otherwise (caution.ts). */
  debts?: KnownDebt[]
  /** What the stopped node held of each peer account's tokens, net of its unacked grants (reclaim.ts: it gives each peer no more). */
  peers?: Array<[node: string, epoch: string, key: string, tokens: number]>
  /**
   * Which incarnation each of those accounts is, where known (journal.ts
   * `incs`, as a checkpoint has them): a settlement of an older incarnation,
   * heard by the restart before the newer one, leaves the newer one's alone.
   */
  incs?: Array<[node: string, epoch: string, inc: number]>
  /** The dead seeds whose estates this account inherited (heir.ts): [node, inc, calendar ms of the inheritance]. */
  inherited?: Array<[node: string, inc: number, calMs: number]>
  /** Other seeds' inheritances heard here (heir.ts `known`): [dead seed, its heir, the incarnation inherited]. */
  estates?: Array<[node: string, home: string, inc: number]>
  /**
   * A clean stop's applied marks: per giver's epoch, the highest grant seq
   * these books hold. Final (a stopped node credits nothing), so the restart
   * gossips them and the givers settle their grants in flight to the stopped
   * epoch by them (estate-marks.ts, "own marks").
   */
  marks?: Array<[giver: string, giverEpoch: string, seq: number]>
  keys: SavedKey[]
}

export interface KnownDebt {
  node: string
  epoch: string
  inc: number
  owed: Record<string, number>
}

export type StartKind = 'first-start' | 'clean-restart' | 'unclean-restart'

export async function readState (dataDir: string): Promise<SavedState | undefined> {
  const text = await readIfExists(dataDir, STATE_FILE, ErrorCodes.STATE_UNREADABLE)
  return text === undefined ? undefined : parseState(text, join(dataDir, STATE_FILE))
}

/** Write atomically (temp file, fsync, rename, fsync the directory: util/atomic-file.ts). */
export async function writeState (dataDir: string, state: SavedState): Promise<void> {
  await writeTextFile(dataDir, STATE_FILE, encodeState(state), ErrorCodes.STATE_UNWRITABLE)
}

/** The file's text: the rules in the cluster file's shape, so that parseState reads them by the file's own definition. */
export function encodeState (state: SavedState): string {
  return JSON.stringify(state.rules === undefined ? state : { ...state, rules: state.rules.map(ruleToFile) })
}

export function startKind (s: SavedState | undefined): StartKind {
  if (s === undefined) return 'first-start'
  return s.status === 'stopped' ? 'clean-restart' : 'unclean-restart'
}
