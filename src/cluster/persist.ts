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
import { deferredTotal, ext } from './key-ext.js'
import { MAX_CARRIES } from './messages.js'

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
    keys: []
  }
  if (status === 'stopped') {
    s.stoppedAt = core.calendar.at(nowMs)
    s.rules = core.limiter.rules.map(r => r.config)
    s.transitions = core.transitions.toJSON()
    s.debts = core.peers.knownDebts()
    s.keys = snapshotKeys(core, nowMs)
  }
  return s
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
    // Spent tokens come back no earlier than their schedule (conservatively all at the last return), in calendar time.
    let at = cal + ks.bucket.resetIn(nowMs)
    for (const [, when] of x.deferred ?? []) at = Math.max(at, when)
    keys.push({ key: ks.key, rule: ks.rule.name, ruleHash: ks.rule.hash, initial: ks.initial, held, tokens, at, burn: x.burn })
  }
  return keys
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
}

export type CoreBase = Omit<ClusterCoreOptions, 'rules' | 'allocate' | 'incarnation' | 'carries'>

/**
 * Build the core for a start: first start, clean restart (restore, then move
 * to the file's rules), or unclean restart (nothing; no pre-allocation).
 */
export function startCore (base: CoreBase, rules: RuleConfig[], saved: SavedState | undefined, nowMs: number): { core: ClusterCore, restored: Restored } {
  const kind = startKind(saved)
  const clean = kind === 'clean-restart' && saved !== undefined
  const allocate = kind === 'first-start' || (clean && saved.allocate)
  const r: Restored = { kind, keys: 0, tokens: 0, burn: 0, dropped: 0, changed: [] }
  const incarnation = (saved?.incarnation ?? 0) + 1
  const core = new ClusterCore({
    ...base,
    rules: clean && saved.rules !== undefined ? saved.rules : rules,
    allocate,
    incarnation,
    carries: clean ? saved.carries : []
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
  if (saved.transitions !== undefined) core.transitions.restore(saved.transitions)
  // What others owed stays owed until they say otherwise: a cluster restarted as a whole must not forget it.
  for (const d of saved.debts ?? []) {
    if (d.node !== core.node) core.peers.restoreLegacy(d.node, d.epoch, d.inc, new Map(Object.entries(d.owed)))
  }
  for (const k of saved.keys) {
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
  const before = new Map(core.limiter.rules.map(x => [x.name, x.hash]))
  core.setRules(rules, nowMs)
  r.changed = core.limiter.rules.filter(x => before.has(x.name) && before.get(x.name) !== x.hash).map(x => x.name)
  core.init(nowMs)
  return { core, restored: r }
}
