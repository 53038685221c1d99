/**
 * One simulation run: build the virtual cluster for a spec, drive its load
 * and faults through virtual time, and check it.
 *
 * - The oracle (oracle.ts, an exact central limiter written independently
 *   of src/core) judges every key's admissions: in hard mode any token it
 *   would have denied is overshoot and fails the run; in soft mode the
 *   overshoot must be covered by the overdraft the nodes reported.
 * - The audit (token-audit.ts) checks conservation every 100 ms and at the
 *   end: held + transit + saved + stranded = stock. Any token created, or
 *   lost without being accounted for, fails the run.
 * - The same arrivals go to the two baselines (central, static split).
 * - Scenarios that ask for it: each live node's shortfall against the
 *   audit, after an idle tail (shortfall-check.ts).
 *
 * Randomness: the load, the faults and the network each draw from their own
 * stream derived from the seed, so a run replays exactly from its seed.
 */
import { DEFAULT_LIMITS, type LimitsConfig, type Mode, type RuleConfig } from '../config/types.js'
import { ext } from '../cluster/key-ext.js'
import type { Decision } from '../core/types.js'
import type { ClusterTuning } from '../cluster/tuning.js'
import { central, staticSplit } from './baselines.js'
import { generateLoad } from './load.js'
import { figures, type Figures } from './metrics.js'
import { checkKey } from './oracle.js'
import { Rng } from './rng.js'
import type { Scenario } from './scenario.js'
import type { Admission, Arrival, HotMove, OracleRule } from './types.js'
import { VirtualCluster } from './virtual-cluster.js'
import { scheduleFaults, type Cut } from './faults.js'
import { SETTLE_LIMIT_MS, SettleProbe, type SettleFigures } from './settle.js'
import { checkShortfall } from './shortfall-check.js'
import { fmix32 } from '../core/hash.js'

export interface SimSpec {
  scenario: Scenario
  /** Nodes at the start, listed in the cluster file (joiners come on top). */
  nodes: number
  /**
   * Of `nodes`, how many are seeds (pre-allocated shares): the first ones by
   * name. The rest are members listed from the start: they hold nothing of
   * their own and get tokens only from peers (a member-heavy cluster).
   * @default nodes (every node a seed)
   */
  seedNodes?: number
  seed: number
  mode: Mode
  rule: RuleConfig
  durationMs: number
  gossipIntervalMs: number
  limits?: LimitsConfig
  /** Replaces the scenario's generated load (times relative to the run's start). */
  trace?: Arrival[]
  /** For the replay line: the cluster file the rule came from, and the trace file. */
  configPath?: string
  tracePath?: string
  /**
   * Called once the cluster is built, to break it on purpose: the checker's
   * own tests use it to show that a created token or an overshoot fails the run.
   */
  sabotage?: (vc: VirtualCluster, startMs: number) => void
  /**
   * Every request's own `waitMs`, as a client sets it: one the node cannot
   * admit at once waits up to this long for tokens (a forwarded one, at the
   * seed). The baselines do not wait. @default 0
   */
  waitMs?: number
  /** Tunables over the run's defaults (an experiment: e.g. firstUseWaitMs 0 to see the cluster without first-use waits). */
  tuning?: Partial<ClusterTuning>
}

export interface SimResult extends Figures {
  scenario: string
  nodes: number
  /** Of `nodes`, the seeds. */
  seedNodes: number
  seed: number
  mode: Mode
  rule: string
  algorithm: string
  ok: boolean
  /** Why the run failed (empty when ok). */
  failures: string[]
  replay: string
  /** How grants settled after the last heal (scenarios with a calm point: settle.ts). */
  settle?: SettleFigures
}

/** A run starts this far into a window, so windows and the run's start don't line up. */
const T0 = 1_800_000_000_000

/** Derive an independent stream from a seed (a splitmix-style mix). */
export function stream (seed: number, salt: number): Rng {
  return new Rng(fmix32((seed ^ Math.imul(salt + 1, 0x9e3779b9)) >>> 0))
}

export function nodeNames (n: number): string[] {
  const w = String(n).length
  return Array.from({ length: n }, (_, i) => `n${String(i + 1).padStart(w, '0')}`)
}

/** The names of the nodes that join during a run of `scenario`: j1, j2, ... */
export function joinerNames (scenario: Scenario): string[] {
  return Array.from({ length: scenario.faults.joins ?? 0 }, (_, i) => `j${i + 1}`)
}

/** The keys a run uses: the rule's exact key, or `scenario.keys` keys matching its glob. */
export function keysFor (rule: RuleConfig, count: number): string[] {
  if (!rule.match.includes('*')) return [rule.match]
  return Array.from({ length: count }, (_, i) => rule.match.replace(/\*/g, `k${i}`))
}

export function replayCommand (spec: SimSpec): string {
  const parts = ['quotad simulate', `--scenario ${spec.scenario.name}`, `--nodes ${spec.nodes}`, `--seed ${spec.seed}`, `--mode ${spec.mode}`,
    `--seconds ${spec.durationMs / 1000}`, `--gossip-ms ${spec.gossipIntervalMs}`]
  if (spec.seedNodes !== undefined && spec.seedNodes !== spec.nodes) parts.push(`--seed-nodes ${spec.seedNodes}`)
  if (spec.tuning?.voters !== undefined) parts.push(`--voters ${spec.tuning.voters}`)
  if (spec.tracePath !== undefined) parts.push(`--trace ${spec.tracePath}`)
  if (spec.configPath !== undefined) parts.push(`--config ${spec.configPath}`, `--rule ${spec.rule.name}`)
  else {
    parts.push(`--algorithm ${spec.rule.algorithm}`, `--limit ${spec.rule.limit}`, `--per-ms ${spec.rule.perMs}`)
    if (spec.rule.match !== 'api') parts.push(`--match '${spec.rule.match}'`)
  }
  if (spec.rule.decide === 'seeds') parts.push('--decide seeds')
  if (spec.rule.creditMs !== undefined) parts.push(`--credit-ms ${spec.rule.creditMs}`)
  return parts.join(' ')
}

export function runSim (spec: SimSpec): SimResult {
  const sc = spec.scenario
  const limits = spec.limits ?? DEFAULT_LIMITS
  const glob = sc.match !== undefined && spec.configPath === undefined && spec.rule.match === 'api'
  const rule: RuleConfig = { ...spec.rule, mode: spec.mode, ...(glob ? { match: sc.match } : {}) }
  // The file's nodes: the seeds first, then the members listed with them.
  const listed = nodeNames(spec.nodes)
  const seedNodes = spec.seedNodes ?? spec.nodes
  if (!Number.isInteger(seedNodes) || seedNodes < 1 || seedNodes > spec.nodes) throw new Error(`seedNodes must be a whole number from 1 to nodes (${spec.nodes}), got ${seedNodes}`)
  const seeds = listed.slice(0, seedNodes)
  const joiners = joinerNames(sc)
  // The audited keys: the trace's own, or the scenario's.
  const keys = spec.trace !== undefined ? [...new Set(spec.trace.map(a => a.key))] : keysFor(rule, sc.keys)
  const startMs = T0 + Math.floor(stream(spec.seed, 0).next() * rule.perMs)
  const durationMs = Math.max(spec.durationMs, (sc.minGossips ?? 0) * spec.gossipIntervalMs)
  const endMs = startMs + durationMs
  const lease = simLease(spec.gossipIntervalMs)

  // Load: generated, or the user's trace shifted to the run's start.
  let arrivals: Arrival[]
  let moves: HotMove[] = []
  if (spec.trace !== undefined) {
    arrivals = spec.trace.map(a => ({ ...a, at: a.at + startMs })).filter(a => a.at < endMs)
  } else {
    const ratePerKey = sc.demand * rule.limit * 1000 / Math.min(rule.perMs, durationMs)
    const load = generateLoad({ kind: sc.load, nodes: [...listed, ...joiners], keys, ratePerKey, startMs, durationMs }, stream(spec.seed, 1))
    arrivals = load.arrivals
    moves = load.moves
  }
  const allNodes = [...new Set([...listed, ...joiners, ...arrivals.map(a => a.node)])]

  const skewRng = stream(spec.seed, 2)
  const skewMs: Record<string, number> = {}
  for (const n of allNodes) skewMs[n] = sc.skewMs === 0 ? 0 : (skewRng.next() * 2 - 1) * sc.skewMs
  const skewed = sc.skewedNodePeriods === undefined ? null : seeds[seeds.length - 1]
  if (skewed !== null) skewMs[skewed] = (sc.skewedNodePeriods ?? 0) * rule.perMs
  // Each node's monotonic clock starts near zero, far from its wall clock (as performance.now does): mixing them would show.
  const monoOffsetMs = (n: string): number => -startMs + 100_003 * (1 + allNodes.indexOf(n))
  const vc = new VirtualCluster({
    nodes: listed, seeds, listed, rules: [rule], limits, seed: stream(spec.seed, 3).int(0, 0xffffffff), startMs, network: sc.network, skewMs, monoOffsetMs,
    tuning: { gossipIntervalMs: spec.gossipIntervalMs, aliveTimeoutMs: Math.max(1000, 4 * spec.gossipIntervalMs), tickMs: Math.min(50, spec.gossipIntervalMs), ...lease, ...sc.tuning, ...spec.tuning }
  })
  if (skewed !== null && (sc.skewedNodeUnheardBy ?? 0) > 0) vc.cuts.split([skewed], seeds.filter(n => n !== skewed).slice(0, sc.skewedNodeUnheardBy), true)
  const deaf = skewed === null ? undefined : sc.skewedNodeDeaf
  if (deaf !== undefined && skewed !== null) {
    const mute = (on: boolean) => () => { for (const n of seeds) if (n !== skewed) vc.cuts.muteGossip(n, skewed, on) }
    for (let t = startMs + deaf.everyMs; t < endMs; t += deaf.everyMs) {
      vc.at(t, mute(true))
      vc.at(t + deaf.gapMs, mute(false))
    }
  }
  spec.sabotage?.(vc, startMs)
  const sched = scheduleFaults(vc, sc.faults, listed, joiners, startMs, durationMs, stream(spec.seed, 4), lease.reclaimMs, spec.seed)
  const { joinAt, change, cut } = sched
  const probe = new SettleProbe(vc, sched, startMs, endMs)

  // Conservation, every 100 ms and at the end.
  const failures: string[] = []
  let worstCreated = 0
  let worstLost = 0
  // Positions (positions.ts) against the live accounts' books, at the same moments.
  const positionErrors: string[] = []
  const positionSeen = new Set<string>()
  const audit = (): void => {
    for (const k of keys) {
      const a = vc.audit.account(k)
      if (a.error > worstCreated) worstCreated = a.error
      if (a.error < worstLost) worstLost = a.error
    }
    for (const d of vc.positions.check(keys)) {
      // The first time each account and key goes wrong: it usually stays wrong.
      const where = `${d.epoch} ${d.key}`
      if (positionSeen.has(where)) continue
      positionSeen.add(where)
      if (positionErrors.length < 3) positionErrors.push(`positions: ${d.node} (${d.epoch}) on ${d.key} at +${vc.now - startMs} ms: others' positions say ${fmt(d.positions)}, its books ${fmt(d.books)}`)
    }
  }
  for (let t = startMs + 100; t < endMs; t += 100) vc.at(t, audit)

  // Drive the load: advance the network to each arrival, then decide it locally.
  const admitted = new Uint8Array(arrivals.length)
  const admissions: Admission[] = []
  const unleased: string[] = []
  // An admission, as the oracle counts it: by the node that decided, on its calendar, at that moment.
  const record = (node: string, key: string, count: number, credit = false): void => {
    admissions.push({ at: vc.now, local: vc.calendar(node), node, key, count })
    // Judged from what the network carried, not from the node's own word (lease-check.ts). A token of credit
    // was spent at the seed when it gave it, and its lease judged then (that answer's own admission).
    const core = vc.cores.get(node)
    if (rule.mode === 'hard' && !credit && core !== undefined && vc.leases !== null && !vc.leases.holds(core, vc.now)) unleased.push(`${node} at +${Math.round(vc.now - startMs)} ms`)
  }
  // Forwarded (forward.ts): decided at a seed when it arrives there (recorded then, by the seed's interpreter), allowed
  // for the client when the answer is back; a token of a seed's credit, when the member hands it out.
  vc.onDecided = (seed, key, count, d, credit) => { if (d.allowed) record(seed, key, count, credit) }
  for (let i = 0; i < arrivals.length; i++) {
    const a = arrivals[i]
    if ((joinAt.get(a.node) ?? -Infinity) > a.at) continue
    vc.runUntil(a.at)
    // Decided now, or (a first use, first-use.ts) when tokens come or its short wait ends: admitted at that moment.
    let forwarded = false
    const admit = (d: Decision | 'waiting' | 'forwarded' | undefined): void => {
      if (d === 'forwarded') { forwarded = true; return }
      if (d === undefined || d === 'waiting' || !d.allowed) return
      admitted[i] = 1
      if (!forwarded) record(a.node, a.key, a.count)
    }
    admit(vc.acquire(a.node, a.key, a.count, admit, spec.waitMs ?? 0))
  }
  vc.runUntil(endMs)
  audit()
  // (After the run: a first-use wait may be answered after the last arrival.)
  if (vc.replicaWitness.violations.length > 0) failures.push(`grants that left before their give was at a quorum of seeds: ${vc.replicaWitness.violations.length} (first ${vc.replicaWitness.violations[0]})`)
  if (unleased.length > 0) failures.push(`hard admission without a lease: ${unleased.length} (first ${unleased.slice(0, 3).join(', ')})`)
  if (cut !== null) failures.push(...cutPromises(cut, admissions, vc, lease, rule.mode, startMs, endMs))

  // The oracle, per key. A rule change applies in true time, from its first node to its last.
  const oracleRule: OracleRule = { algorithm: rule.algorithm, limit: rule.limit, perMs: rule.perMs, burst: rule.burst }
  const changed = change !== null && change.to >= change.from ? change : null
  if (changed !== null) oracleRule.changes = [{ from: changed.from, to: changed.to, limit: changed.rules[0].limit, burst: changed.rules[0].burst }]
  if (sched.reloads.length > 0) oracleRule.changes = sched.reloads.map(c => ({ from: c.from, to: c.to, limit: c.rules[0].limit, burst: c.rules[0].burst }))
  // Calendars may stray from true time by more than the configured skew (a wall-clock step, slewed): allow what was seen.
  let maxSkewMs = sc.skewMs
  for (const a of admissions) if (a.node !== skewed) maxSkewMs = Math.max(maxSkewMs, Math.abs(a.local - a.at))
  const byKey = new Map<string, Admission[]>()
  // A node skewed far beyond maxClockSkewMs is judged by true time, not by its own windows (scenario.ts skewedNodePeriods).
  const byTrueTime = (x: Admission): boolean => x.node === skewed || sc.trueTimeWindows === true
  for (const a of admissions.map(x => byTrueTime(x) ? { ...x, local: x.at } : x)) {
    let l = byKey.get(a.key)
    if (l === undefined) byKey.set(a.key, l = [])
    l.push(a)
  }
  let overshoot = 0
  for (const [key, list] of byKey) {
    const c = checkKey(oracleRule, list, { maxSkewMs })
    overshoot += c.overshoot
    for (const v of c.violations.slice(0, 2)) if (failures.length < 6 && spec.mode === 'hard') failures.push(`overshoot on ${key} at +${Math.round(v.at - startMs)} ms (${v.node}): ${v.detail}`)
  }
  // A node that far off must fence itself once it hears a quorum (fence.ts `judgeSkew`), whatever the load: the
  // oracle finds its overshoot only where load saturates its shifted windows, and this finds it everywhere.
  if (skewed !== null && spec.mode === 'hard' && Math.abs(skewMs[skewed]) > lease.maxClockSkewMs) {
    const late = admissions.filter(a => a.node === skewed && a.at > startMs + 2 * lease.leaseMs)
    if (late.length > 0) failures.push(`skewed node ${skewed} spent ${late.reduce((s, a) => s + a.count, 0)} hard token(s) after +${2 * lease.leaseMs} ms (first at +${Math.round(late[0].at - startMs)} ms): it must fence itself`)
  }
  // Every incarnation's overdraft, crashed and stopped ones included.
  let overdraft = 0
  for (const core of vc.incarnations) for (const ks of core.limiter.states()) overdraft += ks.ext === null ? 0 : ext(ks).overdraft
  if (spec.mode === 'hard' && overshoot > 0) failures.unshift(`hard-mode overshoot: ${overshoot} token(s) over the exact limiter`)

  if (spec.mode === 'soft' && overshoot > overdraft + 1e-6) failures.push(`soft overshoot ${overshoot} exceeds the reported overdraft ${overdraft}`)
  const settle = probe.figures(startMs)
  if (settle !== null && settle.maxAgeMs > SETTLE_LIMIT_MS) {
    failures.push(`settle: a grant to a node that is up stayed unacked ${Math.round(settle.maxAgeMs)} ms after the last heal (limit ${SETTLE_LIMIT_MS} ms)`)
  }
  if (worstCreated > 1e-6) failures.push(`conservation: ${fmt(worstCreated)} token(s) created`)
  // Every node here is honest: a refused grant is a check that misjudged one (transfers.ts `implausible`). Not
  // when a stopping node's gossip is muted (its peers never hear what it received since, and refuse by design).
  // A rule change is judged too: a grant over a lowered stock is honest while burns are owed (caution.ts
  // `mostTokens`), and refusing one lost its tokens for good.
  const judged = sc.faults.muteDuringStop !== true
  for (const core of judged ? vc.incarnations : []) {
    if (core.counters.grantsRefused > 0 && failures.length < 6) failures.push(`refused: ${core.node} refused ${core.counters.grantsRefused} honest grant(s), last: ${core.lastRefusal}`)
  }
  if (worstLost < -1e-6) failures.push(`conservation: ${fmt(-worstLost)} token(s) lost without being accounted for`)
  failures.push(...positionErrors)

  const f = figures({
    arrivals, admitted, central: central(rule, limits, arrivals, changed), static: staticSplit(rule, limits, listed, arrivals, changed),
    moves, startMs, endMs, vc, keys, overshoot, overdraft, gossipIntervalMs: spec.gossipIntervalMs
  })
  // Last: it runs the cluster on past the end (idle), after every figure above was taken.
  if (sc.shortfallCheckMs !== undefined) failures.push(...checkShortfall(vc, keys, sc.shortfallCheckMs, sc).slice(0, 4))
  return {
    ...f,
    scenario: sc.name,
    nodes: spec.nodes,
    seedNodes,
    seed: spec.seed,
    mode: spec.mode,
    rule: rule.name,
    algorithm: rule.algorithm,
    ok: failures.length === 0,
    failures,
    replay: replayCommand(spec),
    ...(settle === null ? {} : { settle })
  }
}

/**
 * The sim's lease settings: the shipped defaults' proportions to the gossip
 * interval (3000, 5000 and 500 ms at 250 ms), so short runs see leases
 * lapse and come back.
 */
export function simLease (gossipIntervalMs: number): { leaseMs: number, reclaimMs: number, maxClockSkewMs: number } {
  return { leaseMs: 12 * gossipIntervalMs, reclaimMs: 20 * gossipIntervalMs, maxClockSkewMs: Math.max(50, 2 * gossipIntervalMs) }
}

/**
 * What a long cut promises (FaultSpec.cut), judged from the cut alone: in
 * hard mode, a side that is no quorum admits nothing from leaseMs +
 * maxClockSkewMs after the cut until it heals; after the heal, the
 * cluster admits again.
 */
function cutPromises (cut: Cut, admissions: readonly Admission[], vc: VirtualCluster, lease: ReturnType<typeof simLease>, mode: Mode, startMs: number, endMs: number): string[] {
  const out: string[] = []
  if (vc.leases === null) return out
  const fencedFrom = cut.from + lease.leaseMs + lease.maxClockSkewMs
  if (mode === 'hard') {
    for (const side of cut.sides) {
      if (vc.leases.isQuorum(side)) continue
      const n = admissions.filter(a => side.includes(a.node) && a.at >= fencedFrom && a.at < cut.to).reduce((s, a) => s + a.count, 0)
      if (n > 0) out.push(`cut side ${side.join(',')} has no quorum but admitted ${n} between +${Math.round(fencedFrom - startMs)} and +${Math.round(cut.to - startMs)} ms`)
    }
  }
  const after = cut.to + 2 * lease.leaseMs
  if (after < endMs && !admissions.some(a => a.at >= after)) out.push(`nothing admitted after the heal (from +${Math.round(after - startMs)} ms)`)
  return out
}

function fmt (n: number): string {
  return String(Math.round(n * 1e6) / 1e6)
}
