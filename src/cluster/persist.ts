/**
 * What a clean stop saves of a ClusterCore, and how a start builds one from
 * the state file. Pure (time passed in), so the daemon's driver and the
 * simulator start and restart nodes with the same code; the file I/O lives
 * in durable-state.ts.
 *
 * Conservation: a key's share is `held + outstanding (+ deferred)`. The save
 * keeps exactly that: held tokens come back spendable, the rest comes back
 * deferred until the last of them would have returned, so a restart neither
 * creates tokens nor returns any early. Burns still owed are saved too.
 *
 * A restart with a changed file: the core is first rebuilt under the rules
 * it stopped with, then moved to the new ones by `setRules`, the very code a
 * SIGHUP runs (rule-change.ts). A changed rule's keys keep their tokens and
 * add or owe only the change in this node's share; nothing is dropped and
 * re-materialized (which once admitted 123 in a day on a limit of 93).
 */
import type { RuleConfig } from '../config/types.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import { ClusterCore, type ClusterCoreOptions } from './cluster-core.js'
import { startKind, type SavedKey, type SavedState, type StartKind } from './durable-state.js'
import { booksOf, deferredTotal, ext } from './key-ext.js'
import { MAX_CARRIES } from './messages.js'
import { incsById, JOURNAL_VERSION, type JournalCheckpoint, type Replayed } from './journal.js'
import { initialShare } from '../core/share.js'

/**
 * The state file's content: a running file (written before serving: it only
 * counts the incarnation) or a clean stop's snapshot.
 */
export function saveState (core: ClusterCore, nowMs: number, status: 'running' | 'stopped'): SavedState {
  const s: SavedState = {
    version: 2,
    node: core.node,
    cluster: core.cluster,
    status,
    allocate: core.limiter.allocate,
    incarnation: core.incarnation,
    epoch: core.epoch,
    carries: [core.epoch, ...core.carries].slice(0, MAX_CARRIES),
    // This incarnation's own books, and the carried ones while no quorum has settled them (carrier.ts).
    carriedAtRisk: Math.min(MAX_CARRIES, 1 + core.reclaim.carriedAtRisk),
    keys: []
  }
  // The driver creates the attestations file before the first state file a voter writes (cluster-node.ts).
  if (core.reclaim.voting) s.attestKept = true
  if (status === 'stopped') {
    s.stoppedAt = core.calendar.at(nowMs)
    s.rules = core.limiter.rules.map(r => r.config)
    s.transitions = core.transitions.toJSON()
    s.debts = core.peers.knownDebts()
    s.peers = core.reclaim.held()
    s.incs = core.journal.checkpointIncs(s.peers)
    s.inherited = core.heir.saved()
    s.estates = core.heir.known()
    s.marks = appliedMarks(core)
    s.keys = snapshotKeys(core, nowMs)
  }
  return s
}

/**
 * This incarnation's applied marks: of the givers' current epochs (the ledger's), and the final ones of their
 * ended or settled epochs while still reported (estate-returns.ts finalMarks). A restart speaks for its ended
 * epoch by them; a giver epoch absent from them is read as none applied (estate-marks.ts ownEnded).
 */
function appliedMarks (core: ClusterCore): Array<[string, string, number]> {
  const m = new Map<string, [string, string, number]>()
  for (const e of [...core.ledger.acks(core.currentEpochs()), ...core.reclaim.returns.finalMarks()]) {
    const id = `${e[0]}\u0000${e[1]}`
    const was = m.get(id)
    if (was === undefined || was[2] < e[2]) m.set(id, e)
  }
  return [...m.values()]
}

/** Every key with tokens, a pre-allocated share or a burn owed, after the handoff: what to save. */
export function snapshotKeys (core: ClusterCore, nowMs: number): SavedKey[] {
  const keys: SavedKey[] = []
  const cal = core.calendar.at(nowMs)
  for (const ks of core.limiter.states()) {
    ks.bucket.advance(nowMs)
    const x = ext(ks)
    const held = Math.max(0, ks.bucket.held)
    const tokens = ks.bucket.outstanding(nowMs) + deferredTotal(x)
    if (held + tokens <= 0 && ks.initial === 0 && x.burn === 0) continue
    // Spent tokens come back no earlier than their schedule (conservatively all at the last return), in calendar time,
    // moved to the next start's calendar, which reads the wall clock: later by what this calendar lags the wall (a
    // calendar ahead of it is left as it is: its times are later than the wall clock's anyway).
    let at = cal + ks.bucket.resetIn(nowMs)
    for (const [, when] of x.deferred ?? []) at = Math.max(at, when)
    at += Math.max(0, core.calendar.wallGapMs)
    keys.push({ key: ks.key, rule: ks.rule.name, ruleHash: ks.rule.hash, initial: ks.initial, held, tokens, at, burn: x.burn })
  }
  return keys
}

/** The journal's checkpoint as of now: the rules, and every key whose books differ from its initial share under them. */
export function journalCheckpoint (core: ClusterCore): JournalCheckpoint {
  const keys: Array<[string, number]> = []
  const peers = core.reclaim.held()
  const allocate = core.limiter.allocate
  for (const ks of core.limiter.states()) {
    const b = booksOf(ks)
    const share = allocate ? initialShare(ks.rule.stock, ks.rule.glob, ks.key, core.node, core.seeds, core.heir.homes) : 0
    if (Math.abs(b - share) > 1e-9) keys.push([ks.key, b])
  }
  return {
    v: JOURNAL_VERSION,
    node: core.node,
    cluster: core.cluster,
    inc: core.incarnation,
    gen: core.replication.nextGen,
    epoch: core.epoch,
    carries: core.carries.slice(0, MAX_CARRIES - 1),
    carriedAtRisk: Math.min(MAX_CARRIES - 1, core.reclaim.carriedAtRisk),
    allocate,
    rules: core.limiter.rules.map(r => r.config),
    keys,
    reserved: core.replication.reserved(),
    marks: appliedMarks(core),
    sent: core.ledger.unackedItems(),
    peers,
    incs: core.journal.checkpointIncs(peers),
    inherited: core.heir.saved(),
    estates: core.heir.known(),
    transitions: core.transitions.toJSON(),
    debts: core.peers.knownDebts()
  }
}

export interface Restored {
  kind: StartKind
  keys: number
  tokens: number
  burn: number
  /** Saved keys no rule of the file matches any more (dropped with their rule, as a reload would). */
  dropped: number
  /** Rules that changed since the stop (carried over as a reload would). */
  changed: string[]
  /** An unclean restart that recovered its predecessor's books from the journal (journal.ts). */
  recovered: boolean
}

/** Whether `journal` is the crashed predecessor's (the running file's incarnation wrote it). */
function recoverable (saved: SavedState | undefined, journal: Replayed | undefined): journal is Replayed {
  return saved !== undefined && saved.status === 'running' && journal !== undefined &&
    journal.checkpoint.inc === saved.incarnation && journal.checkpoint.epoch === saved.epoch
}

export type CoreBase = Omit<ClusterCoreOptions, 'rules' | 'allocate' | 'incarnation' | 'carries'>

/**
 * Build the core for a start: first start, clean restart (restore, then move
 * to the file's rules), unclean restart with the crashed incarnation's
 * journal (its books, all deferred: recovery.ts), or unclean restart without
 * one (nothing; no pre-allocation).
 */
export function startCore (base: CoreBase, rules: RuleConfig[], saved: SavedState | undefined, nowMs: number, journal?: Replayed): { core: ClusterCore, restored: Restored } {
  const kind = startKind(saved)
  if (recoverable(saved, journal)) return recoverCore(base, rules, saved as SavedState, journal, nowMs)
  const clean = kind === 'clean-restart' && saved !== undefined
  const allocate = kind === 'first-start' || (clean && saved.allocate)
  const r: Restored = { kind, keys: 0, tokens: 0, burn: 0, dropped: 0, changed: [], recovered: false }
  const incarnation = (saved?.incarnation ?? 0) + 1
  const core = new ClusterCore({
    ...base,
    rules: clean && saved.rules !== undefined ? saved.rules : rules,
    allocate,
    incarnation,
    carries: clean ? saved.carries : [],
    ...(clean && saved.carriedAtRisk !== undefined ? { carriedAtRisk: saved.carriedAtRisk } : {}),
    inherited: clean ? saved.inherited : [],
    estates: clean ? saved.estates : []
  })
  if (!clean) {
    core.init(nowMs)
    return { core, restored: r }
  }
  if (saved.rules === undefined) {
    // A quotad 0.1 file names its rules only by hash: it can be restored under the same rules only.
    for (const k of saved.keys) {
      const rule = core.limiter.rules.find(x => x.name === k.rule)
      if (rule !== undefined && rule.hash !== k.ruleHash) {
        throw new QuotadError(ErrorCodes.STATE_INVALID, `the state file was written by quotad 0.1 and rule "${k.rule}" has changed since: ` +
          'start once with the rules it stopped with, then change them with SIGHUP', { path: `keys[${saved.keys.indexOf(k)}]` })
      }
    }
  }
  restoreCaution(core, saved)
  restoreKeys(core, saved.keys, r, nowMs)
  restorePeers(core, saved.peers ?? [])
  core.journal.restoreIncs(incsById(saved.incs ?? []))
  // The stopped epoch's givers settle their grants in flight to it by these marks (estate-marks.ts): the snapshot
  // holds every grant at or below them, and the stopped process credited nothing after it. A seed's too: its marks
  // are at least those of any copy of its journal, so a heir that inherited it anyway never credits a grant they
  // send back. A file without them (an older build) announces nothing: such grants wait out the marks, as before.
  if (saved.marks !== undefined) core.reclaim.marks.announceOwn(saved.epoch, new Map(saved.marks.map(([g, e, n]) => [`${g}\u0000${e}`, n])), nowMs)
  return finish(core, rules, r, nowMs)
}

/**
 * An unclean restart after a crash whose journal is intact: the core is
 * built under the journal's rules and allocation, carries the crashed
 * epoch, and gets every key's books back as a deferred credit at the rule's
 * horizon (or, for books below zero, as a burn owed); then it moves to the
 * file's rules as a clean restart does.
 */
function recoverCore (base: CoreBase, rules: RuleConfig[], saved: SavedState, journal: Replayed, nowMs: number): { core: ClusterCore, restored: Restored } {
  const cp = journal.checkpoint
  const r: Restored = { kind: 'unclean-restart', keys: 0, tokens: 0, burn: 0, dropped: 0, changed: [], recovered: true }
  const core = new ClusterCore({
    ...base,
    rules: cp.rules,
    allocate: cp.allocate,
    incarnation: saved.incarnation + 1,
    carries: [cp.epoch, ...cp.carries].slice(0, MAX_CARRIES),
    carriedAtRisk: 1 + (cp.carriedAtRisk ?? cp.carries.length),
    recovered: true,
    inherited: cp.inherited ?? [],
    estates: cp.estates ?? []
  })
  const recovery = core.recovery as NonNullable<ClusterCore['recovery']>
  restoreCaution(core, { ...saved, transitions: cp.transitions, debts: cp.debts })
  const keys: SavedKey[] = []
  for (const [key, { base: b, delta }] of journal.books) {
    const rule = core.limiter.ruleFor(key)
    if (rule === undefined) { r.dropped++; continue }
    const initial = cp.allocate ? initialShare(rule.stock, rule.glob, key, core.node, core.seeds, core.heir.homes) : 0
    const books = (b ?? initial) + delta
    keys.push({ key, rule: rule.name, ruleHash: rule.hash, initial, held: 0, tokens: Math.max(0, books), at: recovery.horizon(rule.config), burn: Math.max(0, -books) })
  }
  restoreKeys(core, keys, r, nowMs)
  recovery.restoredTokens = r.tokens
  // What it held of each peer's tokens: it gives each peer no more than that (no relay, reclaim.ts).
  for (const [node, byEpoch] of journal.peers) core.reclaim.restored.set(node, byEpoch)
  // And which incarnation each of those accounts is: a settlement of an older one leaves a newer one's alone.
  core.journal.restoreIncs(journal.incs)
  // It tells its givers which of their grants to the crashed epoch these books hold (estate-marks.ts). Only from a
  // journal whose checkpoint has `marks`: one an older build wrote without them would read as "none applied", and
  // its givers would take back grants these books hold. (Such grants then wait out the marks and are stranded.) A
  // seed only once no heir can inherit the crashed epoch (announceOwnOnceSafe).
  if (cp.marks !== undefined) {
    if (!core.seeds.includes(core.node)) core.reclaim.marks.announceOwn(cp.epoch, journal.marks, nowMs)
    else core.reclaim.marks.announceOwnOnceSafe(cp.epoch, journal.marks)
  }
  // Its grants that had not been acked wait for their receivers' final marks, and those that never arrived come back
  // (estate-returns.ts `restarted`).
  core.reclaim.returns.restarted(cp.epoch, journal.sent)
  return finish(core, rules, r, nowMs)
}

/** Rule versions still being changed from, and burns others owed: what caution.ts reserves for. */
function restoreCaution (core: ClusterCore, saved: Pick<SavedState, 'transitions' | 'debts'>): void {
  if (saved.transitions !== undefined) core.transitions.restore(saved.transitions)
  // What others owed stays owed until they say otherwise: a cluster restarted as a whole must not forget it.
  for (const d of saved.debts ?? []) {
    if (d.node !== core.node) core.peers.restoreLegacy(d.node, d.epoch, d.inc, new Map(Object.entries(d.owed)))
  }
}

/** What a cleanly stopped node held of each peer's tokens (reclaim.ts: what it may give each back). */
function restorePeers (core: ClusterCore, peers: NonNullable<SavedState['peers']>): void {
  for (const [node, epoch, key, n] of peers) core.reclaim.restore(node, epoch, key, n)
}

function restoreKeys (core: ClusterCore, saved: readonly SavedKey[], r: Restored, nowMs: number): void {
  for (const k of saved) {
    const rule = core.limiter.rules.find(x => x.name === k.rule)
    if (rule === undefined || rule.hash !== k.ruleHash) {
      r.dropped++
      continue
    }
    const ks = core.limiter.restore(k.key, k.initial, nowMs)
    if (k.held > 0) ks.bucket.credit(k.held)
    const x = ext(ks)
    if (k.tokens > 0) (x.deferred ??= []).push([k.tokens, k.at])
    x.burn = k.burn
    // Idle is measured from now: a restored key is not sent home the moment the node starts.
    x.lastDemandAt = nowMs
    core.touch(ks)
    r.keys++
    r.tokens += k.held + k.tokens
    r.burn += k.burn
  }
}

/** Move a restored core to the file's rules (as a reload would), then materialize the exact keys. */
function finish (core: ClusterCore, rules: RuleConfig[], r: Restored, nowMs: number): { core: ClusterCore, restored: Restored } {
  const before = new Map(core.limiter.rules.map(x => [x.name, x.hash]))
  core.setRules(rules, nowMs)
  r.changed = core.limiter.rules.filter(x => before.has(x.name) && before.get(x.name) !== x.hash).map(x => x.name)
  core.init(nowMs)
  return { core, restored: r }
}
