/**
 * The books journal: how a node that crashed (kill -9, OOM) gets its own
 * tokens back when it restarts, instead of losing them for good.
 *
 * A key's books at a node are `held + outstanding + deferred − burn owed`.
 * Spending never changes them (a spent token is outstanding until it
 * returns); only transfers do, and rule changes (carry-over). So the books
 * at any moment are
 *
 *     books(k) = checkpoint(k) + Σ deltas(k) since the checkpoint
 *
 * where `checkpoint(k)` defaults to the key's initial share under the
 * checkpoint's rules, and the deltas are: −n for every token given (a grant
 * debited, a handoff), +n for every token credited from a grant, +n for a
 * refused push taken back. A rule change writes a new checkpoint.
 *
 * Safety: the restarted node must never restore more than the crashed one
 * had. Every give is made durable (appended and fsynced) BEFORE its grant
 * leaves the node: the driver takes `take()` and persists it before it
 * sends any grant. Credits need no fsync: a credit lost in a crash restores
 * fewer tokens than there were, which loses them, never doubles them. A
 * line torn by the crash is ignored (it was never fsynced, so no grant it
 * names has left). Everything restored is deferred until every spend the
 * crashed process could have made has returned (`recovery.ts`).
 *
 * This module is pure: it keeps the pending deltas and encodes and replays
 * the file's text. The daemon writes the text (cluster-node.ts); the
 * simulator keeps it in its virtual disk. Format (JSON lines):
 *
 *     {"v":1,"node":..,"cluster":..,"inc":..,"epoch":..,"carries":[..],"allocate":..,"rules":[..],"keys":[[key, books], ..]}
 *     [[key, delta], ..]
 *     [[key, delta], ..]
 *
 * The first line is the checkpoint (written atomically, replacing the file);
 * each following line is one batch of deltas. A seed that copies its
 * journal to the other seeds (replication.ts) also writes, for a heir only,
 * `["gave", key, n]` and `["ceil", key, ceiling]` entries, and `gen` and
 * `reserved` in its checkpoints; a recovery ignores them. It also writes,
 * for every grant it applies, `["mark", [giver, giverEpoch], seq]` in the
 * batch that credits it, and its applied marks (`marks`) in checkpoints: any
 * prefix of the journal is then a consistent cut, whose books hold exactly
 * the grants up to its marks (a heir tells the givers: estate-marks.ts).
 * And, in the batch that holds a give, `["sent", [to, toEpoch, seq], key,
 * n]` for its grant, and its unacked grants (`sent`) in checkpoints: a heir
 * takes back those their receivers never applied (estate-returns.ts).
 * And `["inc", [node, epoch], inc]` the first time a batch names a peer
 * account, and `incs` in checkpoints: which incarnation each account is, so
 * that a restart settling a dead incarnation leaves the accounts of a newer
 * one alone (reclaim-settle.ts; the restart may not have heard it yet).
 */
import type { RuleConfig } from '../config/types.js'
import { parseSavedRules, ruleToFile } from '../config/validate.js'
import { ConfigError, ErrorCodes, QuotadError } from '../errors.js'
import type { SavedState } from './durable-state.js'

export const JOURNAL_FILE = 'quotad-journal.jsonl'
export const JOURNAL_VERSION = 1
/** Batches after which the next take() writes a checkpoint instead (the file stays short). */
export const CHECKPOINT_EVERY = 2000

export interface JournalCheckpoint {
  v: 1
  node: string
  cluster: string
  /** The incarnation writing the journal (the running state file's). */
  inc: number
  /** Its generation: checkpoints written by this incarnation so far, this one included (replication.ts). */
  gen?: number
  epoch: string
  /** Epochs whose books this incarnation carries. */
  carries: string[]
  /** How many of `carries`, from the first, a quorum might still attest (core-options.ts); absent: all. */
  carriedAtRisk?: number
  allocate: boolean
  rules: RuleConfig[]
  /** Keys whose books differ from their initial share under `rules`. */
  keys: Array<[key: string, books: number]>
  /**
   * Gives still allowed under the reservations copied to the seeds, per key
   * (replication.ts): a heir credits the books less these. Non-zero only.
   */
  reserved?: Array<[key: string, remaining: number]>
  /** What this node holds of each peer account's tokens, per key (non-zero only). */
  peers?: Array<[node: string, epoch: string, key: string, tokens: number]>
  /**
   * The dead seeds whose estates this account inherited (heir.ts): [node,
   * incarnation, calendar ms of the inheritance]. Their glob keys are homed
   * here (share.ts `homeOf`), so a key not named in `keys` is at its share
   * under these homes.
   */
  inherited?: Array<[node: string, inc: number, calMs: number]>
  /** Its unacked grants when it was written (for a heir only): [receiver, receiver epoch, seq, key, tokens]. */
  sent?: SentEntry[]
  /** The incarnation of each account in `peers`, where known: [node, epoch, inc]. */
  incs?: Array<[node: string, epoch: string, inc: number]>
  /** The applied marks when it was written (for a heir only): [giver, giver epoch, highest seq applied]. */
  marks?: Array<[giver: string, epoch: string, seq: number]>
  /** Other seeds' inheritances heard here (heir.ts `known`): [dead seed, its heir, the incarnation inherited]. */
  estates?: Array<[node: string, home: string, inc: number]>
  /** Rule versions still being changed from, and burns others owed (as a clean stop saves them: caution.ts). */
  transitions?: SavedState['transitions']
  debts?: SavedState['debts']
}

/** What the driver must persist now. */
export interface JournalWrite {
  /** A new checkpoint: replace the file with this line (atomically). */
  checkpoint: string | null
  /** A batch of deltas: append this line. */
  batch: string | null
  /** A give is in it: fsync before any grant leaves. */
  sync: boolean
}

/** One item of a grant this node gave: [receiver, receiver epoch, seq, key, tokens] (estate-returns.ts). */
export type SentEntry = [to: string, toEpoch: string, seq: number, key: string, n: number]

/** [node, epoch, its incarnation if known]: the peer account a books change came from or went to. */
export type PeerAccount = readonly [node: string, epoch: string, inc?: number]

export class BooksJournal {
  private pending = new Map<string, number>()
  /** `${node}\0${epoch}\0${key}` -> change of what this node holds of that account's tokens. */
  private pendingPeers = new Map<string, number>()
  /** Replication's entries (replication.ts): ['gave', key, n] and ['ceil', key, ceiling]. */
  private pendingCopy = new Map<string, number>()
  /** `${giver}\0${giverEpoch}` -> the applied mark, for the batch that credits its grants. */
  private pendingMarks = new Map<string, number>()
  /** The grants given since the last take() (a heir only reads them). */
  private pendingSent: SentEntry[] = []
  /** `${node}\0${epoch}` -> its incarnation: of the accounts named since the last checkpoint, and in it. */
  private readonly incs = new Map<string, number>()
  /** Of `incs`, those not yet written (in the next batch). */
  private readonly pendingIncs = new Set<string>()
  private syncNeeded = false
  private batches = 0
  /** The next take() writes a checkpoint (at start and after a rule change). */
  checkpointNeeded = true
  /** Off (no data directory to recover from): records nothing. */
  enabled = true

  /**
   * The books of `key` changed by `delta`; `sync`: a give, durable before its
   * grant leaves. `peer`: the account the tokens came from (a credit, a take-
   * back) or went to (a give): what this node holds of that account's tokens
   * moves by the same delta, so that a recovered restart still gives each
   * peer no more than it holds of its tokens (the no-relay rule, reclaim.ts).
   */
  record (key: string, delta: number, sync: boolean, peer?: PeerAccount): void {
    if (!this.enabled || delta === 0) return
    this.pending.set(key, (this.pending.get(key) ?? 0) + delta)
    if (peer !== undefined) {
      const id = `${peer[0]}\u0000${peer[1]}\u0000${key}`
      this.pendingPeers.set(id, (this.pendingPeers.get(id) ?? 0) + delta)
      const inc = peer[2]
      const acct = `${peer[0]}\u0000${peer[1]}`
      if (inc !== undefined && this.incs.get(acct) !== inc) {
        this.incs.set(acct, inc)
        this.pendingIncs.add(acct)
      }
    }
    if (sync) this.syncNeeded = true
  }

  /**
   * An entry only a heir reads (replication.ts): `gave` adds n to the key's
   * tokens given since the checkpoint, `ceil` raises its reservation. A
   * recovery from this journal ignores both: the books deltas say it all.
   */
  note (kind: 'gave' | 'ceil', key: string, n: number): void {
    if (!this.enabled) return
    const id = `${kind}\u0000${key}`
    this.pendingCopy.set(id, kind === 'gave' ? (this.pendingCopy.get(id) ?? 0) + n : n)
  }

  /**
   * Grants from (giver, epoch) are applied up to `seq` (a heir only reads
   * it): written in the batch that holds their credits, so no copy ever
   * has one without the other.
   */
  mark (giver: string, epoch: string, seq: number): void {
    if (!this.enabled) return
    const id = `${giver}\u0000${epoch}`
    if (seq > (this.pendingMarks.get(id) ?? 0)) this.pendingMarks.set(id, seq)
  }

  /**
   * A grant was made (a heir only reads it: estate-returns.ts): written in
   * the batch that holds its give, so a copy that has the give names the
   * grant.
   */
  sent (to: string, toEpoch: string, seq: number, items: ReadonlyArray<readonly [string, number, number]>): void {
    if (!this.enabled) return
    for (const [key, n] of items) this.pendingSent.push([to, toEpoch, seq, key, n])
  }

  /** The incarnation of account (node, epoch), if this journal named it with one (or its recovery read one). */
  incOf (node: string, epoch: string): number | undefined {
    return this.incs.get(`${node}\u0000${epoch}`)
  }

  /** A recovery: the crashed journal's incarnations of the accounts it names. */
  restoreIncs (incs: ReadonlyMap<string, number>): void {
    for (const [id, inc] of incs) this.incs.set(id, inc)
  }

  /**
   * For a checkpoint whose `peers` name these accounts (built in take(),
   * which clears what batches had pending): their known incarnations; the
   * rest are forgotten (an account named again is written again).
   */
  checkpointIncs (peers: ReadonlyArray<readonly [string, string, string, number]>): Array<[string, string, number]> {
    const keep = new Set(peers.map(([n, e]) => `${n}\u0000${e}`))
    for (const id of [...this.incs.keys()]) if (!keep.has(id)) this.incs.delete(id)
    return [...this.incs].map(([id, inc]) => {
      const i = id.indexOf('\u0000')
      return [id.slice(0, i), id.slice(i + 1), inc]
    })
  }

  /** Whether a give is waiting to be made durable. */
  get mustSync (): boolean {
    return this.syncNeeded
  }

  /**
   * What to write now, or null if nothing. `checkpoint` builds the current
   * checkpoint; it is called only when one is due, and then the pending
   * deltas are in it already (the books are current).
   */
  take (checkpoint: () => JournalCheckpoint): JournalWrite | null {
    if (!this.enabled) return null
    if (this.checkpointNeeded || this.batches >= CHECKPOINT_EVERY) {
      const sync = true
      this.checkpointNeeded = false
      this.batches = 0
      this.pending.clear()
      this.pendingPeers.clear()
      this.pendingCopy.clear()
      this.pendingMarks.clear()
      this.pendingSent = []
      this.pendingIncs.clear()
      this.syncNeeded = false
      return { checkpoint: encodeCheckpoint(checkpoint()), batch: null, sync }
    }
    if (this.pending.size === 0 && this.pendingPeers.size === 0 && this.pendingCopy.size === 0 && this.pendingMarks.size === 0 && this.pendingSent.length === 0) return null
    const entries: Array<[string, number] | [string, string, number] | [string, string, string, number] | MarkEntry | SentBatchEntry | IncEntry> = [...this.pending]
    for (const id of this.pendingIncs) {
      const i = id.indexOf('\u0000')
      entries.push(['inc', [id.slice(0, i), id.slice(i + 1)], this.incs.get(id) as number])
    }
    this.pendingIncs.clear()
    for (const [id, n] of this.pendingPeers) {
      const [node, epoch, key] = id.split('\u0000')
      entries.push([node, epoch, key, n])
    }
    for (const [id, n] of this.pendingCopy) {
      const [kind, key] = id.split('\u0000')
      entries.push([kind, key, n])
    }
    for (const [id, seq] of this.pendingMarks) {
      const [giver, epoch] = id.split('\u0000')
      entries.push(['mark', [giver, epoch], seq])
    }
    for (const [to, toEpoch, seq, key, n] of this.pendingSent) entries.push(['sent', [to, toEpoch, seq], key, n])
    const batch = JSON.stringify(entries)
    const sync = this.syncNeeded
    this.pending.clear()
    this.pendingPeers.clear()
    this.pendingCopy.clear()
    this.pendingMarks.clear()
    this.pendingSent = []
    this.syncNeeded = false
    this.batches++
    return { checkpoint: null, batch, sync }
  }
}

/** The journal's text after `w` is written (the simulator's disk; the daemon does the same with a file). */
export function nextJournal (text: string, w: JournalWrite | null): string {
  if (w === null) return text
  return w.checkpoint !== null ? `${w.checkpoint}\n` : `${text}${w.batch as string}\n`
}

export interface Replayed {
  checkpoint: JournalCheckpoint
  /** Books per key named in the checkpoint or a batch: the checkpoint's value (or undefined: the initial share) plus the deltas. */
  books: Map<string, { base: number | undefined, delta: number }>
  /** What the crashed node held of each peer account's tokens: node -> epoch -> key -> tokens. */
  peers: Map<string, Map<string, Map<string, number>>>
  /** Per key: the reservation copied to the seeds and what was given under it since the checkpoint (replication.ts). */
  reserved: Map<string, { ceiling: number, given: number }>
  /** `${giver}\0${giverEpoch}` -> the highest grant seq whose credit these books hold. */
  marks: Map<string, number>
  /** The grants it gave that the text names: `${to}\0${toEpoch}` -> seq -> [key, tokens] items. */
  sent: Map<string, Map<number, Array<[string, number]>>>
  /** `${node}\0${epoch}` -> the incarnation of that peer account, where the text names it. */
  incs: Map<string, number>
  /** A torn last line was ignored. */
  torn: boolean
}

/**
 * Read a journal's text. A last line that does not parse is a write torn
 * by the crash and is ignored; anything else that does not parse, or a
 * checkpoint of another node or cluster, is E_JOURNAL_INVALID.
 */
export function replayJournal (text: string, where: string, node: string, cluster: string): Replayed {
  const lines = text.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  if (lines.length === 0) bad(where, 'line 1', 'the file is empty')
  let torn = false
  const parsed: unknown[] = []
  for (let i = 0; i < lines.length; i++) {
    try {
      parsed.push(JSON.parse(lines[i]))
    } catch {
      if (i === lines.length - 1 && i > 0) { torn = true; break }
      bad(where, `line ${i + 1}`, 'is not JSON')
    }
  }
  const checkpoint = checkCheckpoint(parsed[0], where)
  if (checkpoint.node !== node) bad(where, 'node', `belongs to node "${checkpoint.node}", not "${node}"`)
  if (checkpoint.cluster !== cluster) bad(where, 'cluster', `belongs to cluster "${checkpoint.cluster}", not "${cluster}"`)
  const books = new Map<string, { base: number | undefined, delta: number }>()
  const peers = new Map<string, Map<string, Map<string, number>>>()
  const addPeer = (node: string, epoch: string, key: string, n: number): void => {
    let byEpoch = peers.get(node)
    if (byEpoch === undefined) peers.set(node, byEpoch = new Map())
    let byKey = byEpoch.get(epoch)
    if (byKey === undefined) byEpoch.set(epoch, byKey = new Map())
    byKey.set(key, (byKey.get(key) ?? 0) + n)
  }
  const reserved = new Map<string, { ceiling: number, given: number }>()
  for (const [k, n] of checkpoint.reserved ?? []) reserved.set(k, { ceiling: n, given: 0 })
  for (const [k, n] of checkpoint.keys) books.set(k, { base: n, delta: 0 })
  for (const [node, epoch, k, n] of checkpoint.peers ?? []) addPeer(node, epoch, k, n)
  const marks = new Map<string, number>()
  const addMark = (giver: string, epoch: string, seq: number): void => {
    const id = `${giver}\u0000${epoch}`
    if (seq > (marks.get(id) ?? 0)) marks.set(id, seq)
  }
  for (const [giver, epoch, seq] of checkpoint.marks ?? []) addMark(giver, epoch, seq)
  const sent = new Map<string, Map<number, Array<[string, number]>>>()
  const addSent = (to: string, toEpoch: string, seq: number, key: string, n: number): void => {
    const id = `${to}\u0000${toEpoch}`
    let bySeq = sent.get(id)
    if (bySeq === undefined) sent.set(id, bySeq = new Map())
    let items = bySeq.get(seq)
    if (items === undefined) bySeq.set(seq, items = [])
    items.push([key, n])
  }
  for (const [to, toEpoch, seq, key, n] of checkpoint.sent ?? []) addSent(to, toEpoch, seq, key, n)
  const incs = incsById(checkpoint.incs ?? [])
  for (let i = 1; i < parsed.length; i++) {
    const batch = parsed[i]
    if (!Array.isArray(batch)) bad(where, `line ${i + 1}`, 'is not a batch of deltas')
    for (const r of batch) {
      if (isPeerEntry(r)) { addPeer(r[0], r[1], r[2], r[3]); continue }
      if (isMarkEntry(r)) { addMark(r[1][0], r[1][1], r[2]); continue }
      if (isSentEntry(r)) { addSent(r[1][0], r[1][1], r[1][2], r[2], r[3]); continue }
      if (isIncEntry(r)) { incs.set(`${r[1][0]}\u0000${r[1][1]}`, r[2]); continue }
      if (isCopyEntry(r)) {
        const e = reserved.get(r[1]) ?? { ceiling: 0, given: 0 }
        if (r[0] === 'gave') e.given += r[2]
        else e.ceiling = r[2]
        reserved.set(r[1], e)
        continue
      }
      if (!isEntry(r)) bad(where, `line ${i + 1}`, 'holds an entry that is not [key, number], [node, epoch, key, number], [gave|ceil, key, number], [mark, [giver, epoch], seq], [sent, [to, epoch, seq], key, number] or [inc, [node, epoch], inc]')
      const e = books.get(r[0])
      if (e === undefined) books.set(r[0], { base: undefined, delta: r[1] })
      else e.delta += r[1]
    }
  }
  return { checkpoint, books, peers, reserved, marks, sent, incs, torn }
}

function checkCheckpoint (v: unknown, where: string): JournalCheckpoint {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) bad(where, 'line 1', 'is not a checkpoint object')
  const o = v as Record<string, unknown>
  if (o.v !== JOURNAL_VERSION) bad(where, 'v', `must be ${JOURNAL_VERSION}, got ${String(o.v)}`)
  for (const f of ['node', 'cluster', 'epoch'] as const) if (typeof o[f] !== 'string') bad(where, f, 'must be a string')
  if (!Number.isSafeInteger(o.inc) || (o.inc as number) < 1) bad(where, 'inc', 'must be a positive integer')
  if (typeof o.allocate !== 'boolean') bad(where, 'allocate', 'must be a boolean')
  if (!Array.isArray(o.carries) || !o.carries.every(c => typeof c === 'string')) bad(where, 'carries', 'must be a list of strings')
  if (o.carriedAtRisk !== undefined && (!Number.isSafeInteger(o.carriedAtRisk) || (o.carriedAtRisk as number) < 0)) bad(where, 'carriedAtRisk', 'must be a whole number, 0 or more')
  if (!Array.isArray(o.rules)) bad(where, 'rules', 'must be a list of rules')
  let rules: RuleConfig[] = []
  try {
    rules = parseSavedRules(o.rules)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    bad(where, err.issues[0].path, err.issues[0].message)
  }
  if (!Array.isArray(o.keys) || !o.keys.every(isEntry)) bad(where, 'keys', 'must be a list of [key, number]')
  if (o.peers !== undefined && (!Array.isArray(o.peers) || !o.peers.every(isPeerEntry))) bad(where, 'peers', 'must be a list of [node, epoch, key, number]')
  if (o.reserved !== undefined && (!Array.isArray(o.reserved) || !o.reserved.every(isEntry))) bad(where, 'reserved', 'must be a list of [key, number]')
  if (o.gen !== undefined && !Number.isSafeInteger(o.gen)) bad(where, 'gen', 'must be a whole number')
  if (o.inherited !== undefined && (!Array.isArray(o.inherited) || !o.inherited.every(isInherited))) bad(where, 'inherited', 'must be a list of [node, inc, calMs]')
  if (o.marks !== undefined && (!Array.isArray(o.marks) || !o.marks.every(isMark))) bad(where, 'marks', 'must be a list of [giver, epoch, seq]')
  if (o.sent !== undefined && (!Array.isArray(o.sent) || !o.sent.every(isSent))) bad(where, 'sent', 'must be a list of [to, epoch, seq, key, number]')
  if (o.estates !== undefined && (!Array.isArray(o.estates) || !o.estates.every(isEstate))) bad(where, 'estates', 'must be a list of [node, home, inc]')
  if (o.incs !== undefined && (!Array.isArray(o.incs) || !o.incs.every(isEstate))) bad(where, 'incs', 'must be a list of [node, epoch, inc]')
  return { ...o, rules } as unknown as JournalCheckpoint
}

/** Saved `incs` ([node, epoch, inc], a checkpoint's or a snapshot's) by account id, as `BooksJournal.restoreIncs` takes them. */
export function incsById (incs: ReadonlyArray<readonly [string, string, number]>): Map<string, number> {
  const m = new Map<string, number>()
  for (const [node, epoch, inc] of incs) m.set(`${node}\u0000${epoch}`, inc)
  return m
}

/** A checkpoint's line: its rules in the cluster file's shape, read back by the same definition (parseSavedRules). */
export function encodeCheckpoint (c: JournalCheckpoint): string {
  return JSON.stringify({ ...c, rules: c.rules.map(ruleToFile) })
}

function isEntry (r: unknown): r is [string, number] {
  return Array.isArray(r) && r.length === 2 && typeof r[0] === 'string' && typeof r[1] === 'number' && Number.isFinite(r[1])
}

function isEstate (r: unknown): r is [string, string, number] {
  return Array.isArray(r) && r.length === 3 && typeof r[0] === 'string' && typeof r[1] === 'string' && Number.isSafeInteger(r[2])
}

function isInherited (r: unknown): r is [string, number, number] {
  return Array.isArray(r) && r.length === 3 && typeof r[0] === 'string' && Number.isSafeInteger(r[1]) && typeof r[2] === 'number' && Number.isFinite(r[2])
}

type MarkEntry = ['mark', [giver: string, epoch: string], seq: number]

function isMarkEntry (r: unknown): r is MarkEntry {
  return Array.isArray(r) && r.length === 3 && r[0] === 'mark' && Array.isArray(r[1]) && r[1].length === 2 &&
    typeof r[1][0] === 'string' && typeof r[1][1] === 'string' && Number.isSafeInteger(r[2]) && (r[2] as number) >= 0
}

function isMark (r: unknown): r is [string, string, number] {
  return Array.isArray(r) && r.length === 3 && typeof r[0] === 'string' && typeof r[1] === 'string' && Number.isSafeInteger(r[2]) && (r[2] as number) >= 0
}

type IncEntry = ['inc', [node: string, epoch: string], inc: number]

function isIncEntry (r: unknown): r is IncEntry {
  return Array.isArray(r) && r.length === 3 && r[0] === 'inc' && Array.isArray(r[1]) && r[1].length === 2 &&
    typeof r[1][0] === 'string' && typeof r[1][1] === 'string' && Number.isSafeInteger(r[2]) && (r[2] as number) >= 1
}

type SentBatchEntry = ['sent', [to: string, toEpoch: string, seq: number], key: string, n: number]

function isSentEntry (r: unknown): r is SentBatchEntry {
  return Array.isArray(r) && r.length === 4 && r[0] === 'sent' && Array.isArray(r[1]) && r[1].length === 3 && typeof r[1][0] === 'string' &&
    typeof r[1][1] === 'string' && Number.isSafeInteger(r[1][2]) && typeof r[2] === 'string' && typeof r[3] === 'number' && Number.isFinite(r[3])
}

function isSent (r: unknown): r is SentEntry {
  return Array.isArray(r) && r.length === 5 && typeof r[0] === 'string' && typeof r[1] === 'string' && Number.isSafeInteger(r[2]) &&
    typeof r[3] === 'string' && typeof r[4] === 'number' && Number.isFinite(r[4])
}

function isCopyEntry (r: unknown): r is ['gave' | 'ceil', string, number] {
  return Array.isArray(r) && r.length === 3 && (r[0] === 'gave' || r[0] === 'ceil') && typeof r[1] === 'string' && typeof r[2] === 'number' && Number.isFinite(r[2])
}

function isPeerEntry (r: unknown): r is [string, string, string, number] {
  return Array.isArray(r) && r.length === 4 && typeof r[0] === 'string' && typeof r[1] === 'string' && typeof r[2] === 'string' && typeof r[3] === 'number' && Number.isFinite(r[3])
}

function bad (where: string, path: string, reason: string): never {
  throw new QuotadError(ErrorCodes.JOURNAL_INVALID, `${where}: ${path}: ${reason}`, { path, reason })
}
