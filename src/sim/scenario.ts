/**
 * The named scenarios: a load, a network, faults and clock skew. A scenario
 * says what happens, not how big: node count, rule, seed, mode and duration
 * come from the run's SimSpec, so the same scenario runs at N = 3 or 200.
 */
import type { LoadKind } from './load.js'
import type { NetworkModel } from './network.js'
import type { ClusterTuning } from '../cluster/tuning.js'

export interface FaultSpec {
  /** Random partitions: one starts on average every `everyMs`, lasts about `durationMs`; `oneWay` of them are one-way. */
  partitions?: { everyMs: number, durationMs: number, oneWay: number }
  /** Crashes (kill -9) per run, each restarted with nothing after `restartAfterMs` (Infinity: never). */
  crashes?: number
  /** Graceful stops per run, each restarted from its saved state after `restartAfterMs`. */
  stops?: number
  /** During each stop, one peer does not hear the stopping node's gossip (but its requests and replies pass). */
  muteDuringStop?: boolean
  /** Nodes that are not seeds and join mid-run (they start with nothing). */
  joins?: number
  /** Of the joiners, how many crash (kill -9) a while after joining, restarted after `restartAfterMs`. */
  crashJoiners?: number
  restartAfterMs?: number
  /**
   * The rule's limit (and burst) changes to round(limit * factor), on every
   * node, around `atFraction` of the run: by SIGHUP (`reload`, the nodes
   * reloading over `spreadMs`), or by stopping every node (SIGTERM) and
   * starting them again with the changed file (`restart`, started over
   * `spreadMs` once all have stopped). `afterJoinerCrashMs`: instead of
   * at `atFraction`, this long after the first joiner's crash (a change
   * while a member is dead and not yet settled).
   */
  ruleChange?: { how: 'reload' | 'restart', factor: number, atFraction: number, spreadMs: number, afterJoinerCrashMs?: number }
  /** One node's wall clock steps by each of these multiples of the rule's period, spread over the run. */
  wallSteps?: number[]
  /**
   * Replay the real-process harness's plan (bench/chaos.ts; fault-plan.ts)
   * drawn for the run's seed over the nodes listed at the start (a, b, c,
   * m1, m2 there are n1..n5 here), its faults over the run less `quietMs`:
   * kill -9 and SIGTERM with their restarts, SIGSTOP, reloads (the run's
   * rule scaled as the plan scales `api`), partitions and wall-clock steps.
   * A lossy link there is TCP: its losses come back as retransmissions, so
   * here each message on it is late (200-1200 ms) with the plan's
   * probability; TCP drops duplicated packets, so those are nothing here.
   * `reclaimMs`: the harness's, which the plan draws pauses against.
   */
  chaos?: { quietMs: number, reclaimMs: number }
  /**
   * The stepped node is stopped (SIGTERM) and started again this long after
   * its first step, while its wall clock is still off: its new process's
   * calendar starts from the wrong wall clock (chaos seed 8).
   */
  wallStepRestartMs?: number
  /** Every node stops (SIGTERM) at this fraction of the run and starts again with the same file once all have stopped. */
  restartAllAt?: number
  /**
   * From this fraction of the run on, nothing fails: the last partition
   * heals then, the network turns LAN, and every crash and stop has
   * restarted before it (the settle probe, settle.ts, measures from here).
   */
  calmAt?: number
  /** Crashes of nodes that never come back (their tokens wait for reclaim). */
  crashesForever?: number
  /** Crashes of seeds that never come back, early in the run (10-25%): their heirs inherit them (heir.ts). */
  seedCrashesForever?: number
  /** Those seeds do come back after all, this long after the crash (from their journals, after their inheritance). */
  seedReturnAfterMs?: number
  /**
   * The heir crashes (kill -9) while it reads a dead seed's copies (heir.ts),
   * and restarts from its journal this long after (Infinity: never; the
   * heir's own heir then inherits both).
   */
  heirCrashRestartMs?: number
  /**
   * The first heir to inherit a dead seed crashes (kill -9) `afterMs` after
   * it inherited and restarts from its journal `restartMs` after that (past
   * reclaimMs: its own heir inherits it, the dead seed's estate included).
   * `stop`: stopped cleanly (SIGTERM) instead, and started again from its
   * snapshot once stopped (`restartMs` unused): its restart must not inherit
   * or settle again what it did before (chaos 5 seeds, seed 2).
   */
  inheritedCrash?: { afterMs: number, restartMs: number, stop?: boolean }
  /**
   * Crashes (kill -9) of nodes caught in the middle of a transfer: each at
   * the first moment, at least a second after the last, that some node has
   * a grant out and not yet acknowledged; restarted after `restartAfterMs`.
   */
  crashMidTransfer?: number
  /**
   * Crashes (kill -9) of members caught while a grant to them is
   * unacknowledged at its giver (in flight, or applied and not yet acked);
   * restarted from their journals after `restartAfterMs`.
   */
  crashReceiverMidTransfer?: number
  /**
   * Crashes (kill -9) of seeds, for good, caught while credits they applied
   * are not yet at a quorum of their journal copies (durable-acks.ts): their
   * heirs inherit them.
   */
  seedCrashReceiving?: number
  /**
   * One long cut, from `atFraction` of the run for `reclaims` x reclaimMs:
   * `minority`, the last seed in name order (never the tie-breaker) and
   * every joiner against the other seeds; `no-quorum`, the seeds in three
   * groups none of which is a quorum (or each alone, where three groups
   * can't be), joiners spread over them.
   */
  cut?: { sides: 'minority' | 'no-quorum', atFraction: number, reclaims: number }
  /**
   * The last seed paused (SIGSTOP) from `atFraction` of the run for
   * `reclaims` x reclaimMs, then resumed (SIGCONT); `restartAfterMs` after
   * the resume it is stopped cleanly (SIGTERM) and started again at once.
   * Past reclaimMs a quorum attests it and its heir inherits it: it comes
   * back as a new incarnation without a share, and the clean restart after
   * that carries that incarnation's books, its own (chaos seed 8).
   */
  pause?: {
    atFraction: number
    reclaims: number
    restartAfterMs?: number
    /** How many seeds, the last in name order, are paused together (at most a minority). @default 1 */
    seeds?: number
    /**
     * Pause a joiner instead, the first one a seed's grant is in flight to
     * (from `atFraction` of the run, once the joiners have had time to take
     * grants): a member settled while that grant never reaches it.
     */
    member?: boolean
    /**
     * After the resume, in order, each this long after the one before: a
     * seed is killed (kill -9) or stopped (SIGTERM), and started again
     * `restartMs` after it is down (absent: for good). `seed`: its index in
     * name order, or `giver`, the seed whose grant to the paused member was
     * in flight. A kill of the first seed, for good: its heir reads its
     * journal copies from a group that holds seeds inherited before, now
     * back without a share (chaos 5 seeds, seed 2). The giver, killed and
     * back: it settled the member and recovers from its journal (chaos 3+2
     * seed 10). `cut`: the seed is cut off from every other node for
     * `restartMs` (it lives on), then healed.
     */
    then?: ReadonlyArray<{ afterMs: number, seed: number | 'giver', how?: 'kill' | 'stop' | 'cut', restartMs?: number }>
  }
  /**
   * A seed killed (kill -9) the moment a grant of its is applied at another
   * seed and not yet acked back; it restarts from its journal `restartMs`
   * later, and `stopAfterMs` after that the receiver, which has heard the
   * restart by then, is stopped (SIGTERM) and started again: its restart
   * must still know its final mark of the crashed giver's grants (chaos 3+2
   * seed 20).
   */
  giverCrashReceiverStop?: { restartMs: number, stopAfterMs: number }
  /**
   * A rogue insider (the swarm key, no name) speaks for `names` made-up
   * member names from `ids` peer ids on one host, at `from` of the run and
   * again every `everyMs` until `to` (VirtualCluster.flood), while the
   * joiners join.
   */
  flood?: { names: number, ids: number, from: number, to: number, everyMs: number }
}

export interface Scenario {
  name: string
  summary: string
  load: LoadKind
  /** Total demand per key, in multiples of the rule's limit. */
  demand: number
  network: NetworkModel
  faults: FaultSpec
  /** Each node's clock is off by a uniform amount in [-skewMs, +skewMs]. */
  skewMs: number
  /**
   * The last seed's clock is off by this many periods of the rule for the
   * whole run (far beyond maxClockSkewMs, unless a fraction of a period:
   * then it need not fence itself). The oracle grants the other
   * nodes' calendars their skew, not that one's: a node that far off must
   * fence itself (fence.ts `judgeSkew`), not be judged by its own calendar.
   */
  skewedNodePeriods?: number
  /**
   * With `skewedNodePeriods`: this many of the other seeds (the first in
   * name order) never hear the skewed node, a one-way cut for the whole run,
   * while it hears them. They never echo it, so what it knows of their
   * offsets has no upper bound: the voters that lease it and the voters it
   * cannot rule out agreeing with are different sets (skew-procs under a
   * busy core: one voter's echoes never came).
   */
  skewedNodeUnheardBy?: number
  /**
   * With `skewedNodePeriods`: the skewed node hears no gossip from the other
   * seeds for `gapMs` out of every `everyMs` (a starved process reads its
   * peers' gossip late, in bursts): longer than aliveTimeoutMs, shorter than
   * leaseMs. Its lease holds through each gap on the echoes before it, so its
   * judgement of the voters' offsets must too (skew-procs in CI: it admitted
   * 18 of 50 after it was judged skewed).
   */
  skewedNodeDeaf?: { gapMs: number, everyMs: number }
  /**
   * The oracle places fixed-window admissions in windows of true time (an
   * exact central limiter's, as the chaos checker counts them), not of the
   * deciding node's calendar: for scenarios whose clocks all start right
   * (skewMs 0), where a calendar that strays from true time is the bug.
   */
  trueTimeWindows?: boolean
  /** Active keys for a glob rule (an exact rule has one key). */
  keys: number
  /** The built-in rule's match for this scenario (a glob, to run on a glob rule's keys); a --config or --match rule keeps its own. */
  match?: string
  /** The property test's run length, when the scenario needs more than its 3 s (a calm tail to measure). */
  propertyMs?: number
  /**
   * After the run, let the cluster idle for this long (no load) and check
   * each live node's shortfall (shortfall.ts) against the audit (run.ts).
   */
  shortfallCheckMs?: number
  /**
   * Why the shortfall check does not also require every token back (the
   * capacity check, shortfall-check.ts): a known loss, not yet fixed.
   */
  capacityLoss?: string
  /** A run lasts at least this many gossip intervals (a cut of several reclaim periods needs room). */
  minGossips?: number
  /**
   * Why the CI property sweep (property.ts) leaves this scenario out: its
   * seeds still find failures not yet fixed. `quotad simulate --scenario`
   * runs it all the same.
   */
  outOfSweep?: string
  /** Tuning this scenario runs with (over the run's own), e.g. `inheritSeeds`. */
  tuning?: Partial<ClusterTuning>
}

/** A datacenter network: 1 ms floor, 2 ms mean, rare 50 ms stragglers. */
export const LAN: NetworkModel = { minLatencyMs: 1, meanLatencyMs: 2, maxLatencyMs: 50, loss: 0, duplicate: 0 }
/** A bad network: a long latency tail, loss, duplicates and reordering. */
export const LOSSY: NetworkModel = { minLatencyMs: 1, meanLatencyMs: 20, maxLatencyMs: 500, loss: 0.1, duplicate: 0.05, reorder: 0.2, reorderMs: 200 }

const base = { network: LAN, faults: {}, skewMs: 0, keys: 1, demand: 1.2 }

export const SCENARIOS: readonly Scenario[] = [
  { ...base, name: 'uniform', summary: 'even steady load at 1.2x the limit', load: 'steady' },
  { ...base, name: 'bursty', summary: 'on/off bursts per node, 1.2x the limit on average', load: 'bursty' },
  { ...base, name: 'zipf', summary: 'Zipf-skewed load across nodes (s=1.1), 1.2x the limit', load: 'zipf' },
  { ...base, name: 'moving-hot', summary: '80% of the load on one node, which changes every 2 s', load: 'moving-hot' },
  { ...base, name: 'over', summary: 'Zipf-skewed load at 3x the limit', load: 'over', demand: 3 },
  { ...base, name: 'lossy', summary: 'Zipf load; 10% loss, 5% duplicates, 20% reordered, 20 ms mean latency', load: 'zipf', network: LOSSY },
  {
    ...base,
    name: 'partition',
    summary: 'Zipf load; random partitions (a third one-way) every ~2 s for ~1.5 s',
    load: 'zipf',
    faults: { partitions: { everyMs: 2000, durationMs: 1500, oneWay: 0.33 } }
  },
  {
    ...base,
    name: 'churn',
    summary: 'Zipf load; a crash, a graceful stop (both restart 1.5 s later) and a join',
    load: 'zipf',
    faults: { crashes: 1, stops: 1, joins: 1, restartAfterMs: 1500 }
  },
  {
    ...base,
    name: 'crash-restart',
    summary: 'Zipf load; two seeds and two joined members are killed (kill -9) and restart 1.5 s later, recovering their books from the journal',
    load: 'zipf',
    faults: { crashes: 2, joins: 2, crashJoiners: 2, restartAfterMs: 1500 },
    // Long enough for a full-sync pass (fullSyncEvery gossips): a member that created a key late has dropped
    // the lines its peers sent before (peers.ts keeps lines only for keys it has), and learns them again then.
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'member-flood',
    summary: 'Zipf load; an insider speaks for 300 made-up member names from 4 peer ids every second while three members join: each id holds one slot, the members are admitted and served, and the made-up names\' slots are freed once they fall silent',
    load: 'zipf',
    faults: { joins: 3, flood: { names: 300, ids: 4, from: 0.05, to: 0.65, everyMs: 1000 } },
    // The flood outlasts the joins (10-60% of the run); then its names' slots need reclaimMs and a settlement.
    minGossips: 180
  },
  {
    ...base,
    name: 'member-crash-forever',
    summary: 'Zipf load; three members join and two are killed (kill -9) for good: once a quorum of voters attests them, each survivor settles what it lent them',
    load: 'zipf',
    faults: { joins: 3, crashJoiners: 2, restartAfterMs: Infinity },
    shortfallCheckMs: 2000,
    minGossips: 90
  },
  {
    ...base,
    name: 'member-lower-settle',
    summary: 'Zipf load; three members join and two are killed for good; the limit is lowered to 40% by SIGHUP while they are dead, before they are settled: what the survivors lent them comes back under the lowered rule',
    load: 'zipf',
    faults: { joins: 3, crashJoiners: 2, restartAfterMs: Infinity, ruleChange: { how: 'reload', factor: 0.4, atFraction: 0.5, spreadMs: 300, afterJoinerCrashMs: 500 } },
    shortfallCheckMs: 2000,
    minGossips: 90
  },
  {
    ...base,
    name: 'member-lower',
    summary: 'Zipf load; three members join and hold tokens; the limit is lowered to 40% by SIGHUP to every node: what the members hold over the lowered stock goes back to the seeds and pays their burns',
    load: 'zipf',
    faults: { joins: 3, ruleChange: { how: 'reload', factor: 0.4, atFraction: 0.5, spreadMs: 300 } },
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'seed-crash-forever',
    summary: 'Zipf load; a seed is killed (kill -9) early and never comes back: once a quorum attests it, its heir reads its journal copies and credits its books',
    load: 'zipf',
    faults: { seedCrashesForever: 1 },
    tuning: { inheritSeeds: true },
    // Nothing lost after the idle tail but what the heir's copy left of the dead seed's reservations (shortfall-check.ts).
    minGossips: 80,
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'seed-crash-receiving',
    summary: 'Zipf load; a seed is killed (kill -9) for good while credits it applied are not yet in a quorum of its journal copies: their givers still hold those grants, and its heir\'s copy says which to take back',
    load: 'zipf',
    faults: { seedCrashReceiving: 1, restartAfterMs: Infinity },
    tuning: { inheritSeeds: true },
    minGossips: 80,
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'seed-crash-forever-glob',
    summary: 'The same with 20 keys of a glob rule (k:*): the dead seed\'s keys are homed at its heir from then on',
    load: 'zipf',
    keys: 20,
    match: 'k:*',
    faults: { seedCrashesForever: 1 },
    tuning: { inheritSeeds: true },
    minGossips: 80,
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'seed-crash-return',
    summary: 'A seed is killed early, inherited, and restarted from its journal 15 s after the crash: it must drop what it recovers and stop allocating',
    load: 'zipf',
    faults: { seedCrashesForever: 1, seedReturnAfterMs: 15_000 },
    tuning: { inheritSeeds: true },
    minGossips: 120
  },
  {
    ...base,
    name: 'inherit-lower-return',
    summary: 'A seed is killed early and inherited; the limit is lowered to a third by SIGHUP while it is dead; then it restarts from its journal with the new file',
    load: 'zipf',
    faults: { seedCrashesForever: 1, seedReturnAfterMs: 7000, ruleChange: { how: 'reload', factor: 0.33, atFraction: 0.5, spreadMs: 300 } },
    tuning: { inheritSeeds: true },
    minGossips: 150
  },
  {
    ...base,
    name: 'inherit-return-lower',
    summary: 'A seed is killed early and inherited; it restarts from its journal; then the limit is lowered by an eighth by SIGHUP (the sequence of chaos 5 seeds seed 1, 204 on 200 after such a reload; not reproduced here)',
    load: 'zipf',
    faults: { seedCrashesForever: 1, seedReturnAfterMs: 7000, ruleChange: { how: 'reload', factor: 0.88, atFraction: 0.85, spreadMs: 300 } },
    tuning: { inheritSeeds: true },
    minGossips: 150
  },
  {
    ...base,
    name: 'inherit-chain',
    summary: 'A seed is killed early and inherited; its heir is killed too, inherited by its own heir, and restarts from its journal (chaos 5 seeds, seed 1, without its reload)',
    load: 'zipf',
    faults: { seedCrashesForever: 1, inheritedCrash: { afterMs: 500, restartMs: 3000 } },
    tuning: { inheritSeeds: true },
    minGossips: 150
  },
  {
    ...base,
    name: 'inherit-chain-lower',
    summary: 'A seed is killed early and inherited; its heir is killed too, inherited by its own heir, and restarts from its journal; then the limit is lowered by an eighth by SIGHUP (chaos 5 seeds, seed 1: 204 on 200)',
    load: 'zipf',
    faults: { seedCrashesForever: 1, inheritedCrash: { afterMs: 500, restartMs: 3000 }, ruleChange: { how: 'reload', factor: 0.88, atFraction: 0.85, spreadMs: 300 } },
    tuning: { inheritSeeds: true },
    minGossips: 150
  },
  {
    ...base,
    name: 'inherit-stop',
    summary: 'A seed is killed early and inherited; its heir is stopped cleanly 1 s later and started again from its snapshot, while the dead seed comes back from its journal (chaos 5 seeds, seed 2)',
    load: 'zipf',
    faults: { seedCrashesForever: 1, seedReturnAfterMs: 7000, inheritedCrash: { afterMs: 1000, restartMs: 0, stop: true } },
    tuning: { inheritSeeds: true },
    minGossips: 150
  },
  {
    ...base,
    name: 'heir-crash',
    summary: 'A seed is killed early for good; its heir is killed while it reads the dead seed\'s copies and restarts from its journal 2 s later: it must learn the death again and inherit once',
    load: 'zipf',
    faults: { seedCrashesForever: 1, heirCrashRestartMs: 2000 },
    tuning: { inheritSeeds: true },
    // No idle tail yet (issue 43, open): with one (shortfallCheckMs: 2000) seeds 3 (soft), 13, 18, 19 and 23 end with
    // the restarted heir fenced for good. Its carried books (carrier.ts) wait for a quorum of voters either attesting
    // the crashed incarnation or echoing this one; the voters that attested it before it came back and the dead seed
    // (a voter, silent for good) weigh enough together that neither side can ever be a quorum (seed 19: n1+n5 attest,
    // n3+n4+n6 echo, n2 dead; 6 voters, quorum > 3.25). Fenced, the heir never reads the dead seed's copies: its books
    // (24 of 190 there) are lost with the lease.
    minGossips: 100
  },
  {
    ...base,
    name: 'crash-mid-transfer',
    summary: 'Zipf load; two nodes killed (kill -9) while a grant of theirs is unacknowledged, each restarted from its journal 1.5 s later',
    load: 'zipf',
    faults: { crashMidTransfer: 2, restartAfterMs: 1500 },
    // Nothing lost after the idle tail: the crashed giver's restart takes back what its unacked grants never delivered
    // (estate-returns.ts restarted); before, seed 11 lost 47 of 240.
    shortfallCheckMs: 2000,
    minGossips: 60
  },
  {
    ...base,
    name: 'member-crash-receiving',
    summary: 'Zipf load; three members join, and two are killed (kill -9) while a grant to them is on its way, each restarted from its journal 1.5 s later: the givers settle those grants by its journal\'s marks',
    load: 'zipf',
    faults: { joins: 3, crashReceiverMidTransfer: 2, restartAfterMs: 1500 },
    shortfallCheckMs: 6000,
    minGossips: 60
  },
  {
    ...base,
    name: 'skew-reclaim',
    summary: 'Zipf load; clocks skewed up to +-250 ms (500 ms between two nodes: maxClockSkewMs); a seed and a joined member killed for good, attested, settled and inherited on those clocks',
    load: 'zipf',
    skewMs: 250,
    faults: { seedCrashesForever: 1, joins: 2, crashJoiners: 1, restartAfterMs: Infinity },
    tuning: { inheritSeeds: true },
    minGossips: 100
  },
  {
    ...base,
    name: 'crash-forever',
    summary: 'Zipf load; a seed crashes (kill -9) and never comes back: the survivors\' shortfall shows what it had',
    load: 'zipf',
    faults: { crashes: 1, restartAfterMs: Infinity },
    shortfallCheckMs: 2000
  },
  { ...base, name: 'skew', summary: 'moving hot spot with clocks skewed up to +-50 ms', load: 'moving-hot', skewMs: 50 },
  { ...base, name: 'skewed-node', summary: 'moving hot spot; one seed\'s clock 2.5 periods ahead all run (it must fence itself)', load: 'moving-hot', skewedNodePeriods: 2.5 },
  {
    ...base,
    name: 'skewed-node-unheard',
    summary: 'moving hot spot; one seed\'s clock 2.5 periods ahead all run, and the first seed never hears it (a one-way cut): its lease comes from voters that disagree, its doubt from one that never echoes it, and it must still fence itself; steady load at 3x the limit, so a node that spends unfenced overshoots',
    load: 'steady',
    demand: 3,
    skewedNodePeriods: 2.5,
    skewedNodeUnheardBy: 1
  },
  {
    ...base,
    name: 'skewed-node-deaf',
    summary: 'moving hot spot; one seed\'s clock 2.5 periods ahead all run, and it hears no gossip from the others for 1.5 s of every 2.5 s (past aliveTimeoutMs, within leaseMs): it must stay fenced through each gap; steady load at 3x the limit for 9 s',
    load: 'steady',
    demand: 3,
    propertyMs: 9000,
    skewedNodePeriods: 2.5,
    skewedNodeDeaf: { gapMs: 1500, everyMs: 2500 }
  },
  {
    ...base,
    name: 'stops',
    summary: 'Zipf load; three graceful stops (each restarted 0.5 s later), unheard by the peers, whose wants keep reaching it',
    load: 'zipf',
    faults: { stops: 3, restartAfterMs: 500, muteDuringStop: true },
    // Nothing lost after the idle tail (issue 43): a stopping node's handoff to a peer that has not heard it is refused
    // for good (ledger-marks.ts), so taken back before the snapshot; its grants to a peer that restarted meanwhile wait
    // for that restart's marks (lifecycle.ts), asked for by a probe when its gossip does not list us (estate-marks.ts
    // probes, Ack.ended). Before, seeds 6, 15, 24, 95 and 102 of 200 lost up to 233 of 240.
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'slow-streams',
    summary: 'Zipf load; direct messages 300 ms slower than gossip (a later gossip overtakes a grant); two graceful stops, restarted 1 s later',
    load: 'zipf',
    network: { ...LAN, directExtraMs: 300 },
    faults: { stops: 2, restartAfterMs: 1000 }
  },
  {
    ...base,
    name: 'reload-lower',
    summary: 'Zipf load; every node reloads (SIGHUP, over 300 ms) a limit lowered to 40%',
    load: 'zipf',
    faults: { ruleChange: { how: 'reload', factor: 0.4, atFraction: 0.35, spreadMs: 300 } }
  },
  {
    ...base,
    name: 'reload-lower-lossy',
    summary: 'reload-lower on the lossy network: a debtor\'s line at the new version can be lost, in its change\'s pass and in full syncs',
    load: 'zipf',
    network: LOSSY,
    faults: { ruleChange: { how: 'reload', factor: 0.4, atFraction: 0.35, spreadMs: 300 } }
  },
  {
    ...base,
    name: 'reload-lower-restart',
    summary: 'Zipf load; a limit lowered to 40% by SIGHUP, then every node stops and starts again while burns are still owed',
    load: 'zipf',
    faults: { ruleChange: { how: 'reload', factor: 0.4, atFraction: 0.3, spreadMs: 100 }, restartAllAt: 0.34 }
  },
  {
    ...base,
    name: 'chaos',
    summary: 'Zipf load; the real-process harness\'s fault plan for the run\'s seed (bench/chaos.ts: kill -9, SIGSTOP, SIGTERM, reloads, partitions, lossy links, clock steps) over the listed nodes, then 15 s quiet; the daemon\'s lease settings, reclaimMs 5000 as the harness runs',
    load: 'zipf',
    faults: { chaos: { quietMs: 15_000, reclaimMs: 5000 }, calmAt: 0.8 },
    // The plan steps wall clocks by seconds, as the harness's checker does, admissions count in windows of true time.
    trueTimeWindows: true,
    propertyMs: 75_000,
    shortfallCheckMs: 6000,
    outOfSweep: 'stop 55: 2 of the property\'s hard seeds 1-40 still fail (seed 6 on 3 seeds: every seed in turn paused past reclaimMs, the last with a share has no heir, and its share is lost; seed 14: 2 created), 1 of 40 soft (bench/README.md "Stop 55")',
    tuning: { gossipIntervalMs: 250, leaseMs: 3000, reclaimMs: 5000, maxClockSkewMs: 500 }
  },
  {
    ...base,
    name: 'reload-raise',
    summary: 'moving hot spot; every node reloads (SIGHUP, over 300 ms) a limit raised to 150%',
    load: 'moving-hot',
    faults: { ruleChange: { how: 'reload', factor: 1.5, atFraction: 0.35, spreadMs: 300 } }
  },
  {
    ...base,
    name: 'restart-changed',
    summary: 'Zipf load; every node stops (SIGTERM) and starts again with the limit raised by a third',
    load: 'zipf',
    faults: { ruleChange: { how: 'restart', factor: 1.33, atFraction: 0.3, spreadMs: 200 } }
  },
  {
    ...base,
    name: 'restart-lowered',
    summary: 'Zipf load; every node stops (SIGTERM) and starts again with the limit lowered to 60%',
    load: 'zipf',
    faults: { ruleChange: { how: 'restart', factor: 0.6, atFraction: 0.3, spreadMs: 200 } }
  },
  {
    ...base,
    name: 'clock-step',
    summary: 'moving hot spot; one node\'s wall clock steps 2.5 periods forward, then 3.5 back',
    load: 'moving-hot',
    faults: { wallSteps: [2.5, -3.5] }
  },
  {
    ...base,
    name: 'slow-links',
    summary: 'Zipf load; every message takes 1.1-1.5 x maxClockSkewMs to arrive (a starved machine, chaos seed 2): delay alone never makes a node look skewed, so nothing is fenced for it',
    load: 'zipf',
    network: { minLatencyMs: 220, meanLatencyMs: 250, maxLatencyMs: 300, loss: 0, duplicate: 0 },
    shortfallCheckMs: 2000
  },
  {
    ...base,
    name: 'clock-step-back',
    summary: 'moving hot spot; one node\'s wall clock steps 4 periods back, then forward again to true time: once it agrees again nothing is fenced or missing',
    load: 'moving-hot',
    faults: { wallSteps: [-4, 4] },
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'clock-step-back-lower',
    summary: 'moving hot spot; one node\'s wall clock steps 4 periods back (then forward again), and the limit is lowered by 40% by SIGHUP between: admissions counted in windows of true time (chaos 3+2 seed 20: a calendar that followed its wall clock back ended windows late and spent a lowered window\'s tail in the next)',
    load: 'moving-hot',
    faults: { wallSteps: [-4, 4], ruleChange: { how: 'reload', factor: 0.6, atFraction: 0.3, spreadMs: 100 } },
    trueTimeWindows: true,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'clock-behind-lower',
    summary: 'moving hot spot; one seed\'s clock 0.15 periods behind all run (within maxClockSkewMs, past its half), and the limit lowered by 40%: windows of true time (a calendar held behind ended its windows late: chaos 3+2 seed 20)',
    load: 'moving-hot',
    skewedNodePeriods: -0.15,
    faults: { ruleChange: { how: 'reload', factor: 0.6, atFraction: 0.3, spreadMs: 100 } },
    trueTimeWindows: true
  },
  {
    ...base,
    name: 'clock-restart-behind',
    summary: 'moving hot spot; one node\'s wall clock steps 4 periods back, the node restarts (SIGTERM) on that clock, then its clock is set right (chaos seed 8): its calendar realigns, nothing stays fenced or missing',
    load: 'moving-hot',
    faults: { wallSteps: [-4, 4], wallStepRestartMs: 200 },
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'clock-restart-ahead',
    summary: 'moving hot spot; one node\'s wall clock steps 4 periods forward, the node restarts (SIGTERM) on that clock, then its clock is set right: its calendar realigns, nothing stays fenced or missing',
    load: 'moving-hot',
    faults: { wallSteps: [4, -4], wallStepRestartMs: 200 },
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'heal-settle',
    summary: 'Zipf load; lossy links, partitions, crashes and stops (restarted), one crash for good; all healed at 60%',
    load: 'zipf',
    network: LOSSY,
    faults: { partitions: { everyMs: 1500, durationMs: 1500, oneWay: 0.33 }, crashes: 2, stops: 1, crashesForever: 1, restartAfterMs: 1000, calmAt: 0.6 },
    propertyMs: 10_000
  },
  {
    ...base,
    name: 'partition-minority',
    summary: 'Zipf load; one seed and two joining members cut from the other seeds for 3 x reclaimMs: fenced after leaseMs',
    load: 'zipf',
    faults: { joins: 2, cut: { sides: 'minority', atFraction: 0.15, reclaims: 3 } },
    minGossips: 90
  },
  {
    ...base,
    name: 'cut-inherit-lower',
    summary: 'Zipf load at 2x the limit; one seed and two joining members cut from the other seeds for 2 x reclaimMs: the seed is inherited and the members settled, and the limit is lowered by 30% by SIGHUP just after, while the cut lasts (chaos 3+2 seed 20)',
    load: 'zipf',
    demand: 2,
    faults: { joins: 2, cut: { sides: 'minority', atFraction: 0.15, reclaims: 2 }, ruleChange: { how: 'reload', factor: 0.7, atFraction: 0.29, spreadMs: 300 } },
    tuning: { inheritSeeds: true },
    minGossips: 200,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'paused-inherited-restart',
    summary: 'Zipf load; a seed paused (SIGSTOP) for 2 x reclaimMs is attested and inherited, comes back without a share, and is restarted cleanly 2 s later: the restart keeps what it holds',
    load: 'zipf',
    faults: { pause: { atFraction: 0.1, reclaims: 2, restartAfterMs: 2000 } },
    tuning: { inheritSeeds: true },
    minGossips: 120,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'heir-reads-returned',
    summary: 'Zipf load; the last two seeds paused for 2 x reclaimMs are attested and inherited, and come back without a share; 2 s later the first seed dies for good: its heir reads its copies from a group that holds the two',
    load: 'zipf',
    faults: { pause: { atFraction: 0.05, reclaims: 2, seeds: 2, then: [{ afterMs: 2000, seed: 0 }] } },
    tuning: { inheritSeeds: true },
    minGossips: 160,
    shortfallCheckMs: 6000
  },
  returnedHeirs('returned-heirs-restarts', 'Zipf load; the last two seeds paused for 2 x reclaimMs are inherited and come back without a share; then the first seed is killed and back, the second too, the first killed again past reclaimMs (its heir, the second, inherits it), that heir stopped and started again, and the fourth seed killed past reclaimMs and back (chaos 5 seeds, seed 2: capacity lost for good)', [
    { afterMs: 1000, seed: 0, restartMs: 1000 },
    { afterMs: 1500, seed: 1, restartMs: 1000 },
    { afterMs: 1500, seed: 0, restartMs: 7000 },
    { afterMs: 6500, seed: 1, how: 'stop', restartMs: 1500 },
    { afterMs: 4500, seed: 3, restartMs: 6000 }
  ]),
  returnedHeirs('returned-heirs-chain', 'As returned-heirs-restarts, on chaos 5 seeds seed 2\'s timing scaled to reclaimMs: after the two returned seeds, the first seed killed and back at once, the second too, the first killed past reclaimMs (inherited by the second, whose copy of a recovered journal names no key at its own share), the heir stopped and back, and the fourth seed killed and back', [
    { afterMs: 3000, seed: 0, restartMs: 700 },
    { afterMs: 850, seed: 1, restartMs: 850 },
    { afterMs: 1300, seed: 0, restartMs: 3700 },
    { afterMs: 3500, seed: 1, how: 'stop', restartMs: 900 },
    { afterMs: 1800, seed: 3, restartMs: 900 }
  ]),
  {
    ...base,
    name: 'cut-heirs-chain',
    summary: 'Zipf load, two joiners; the first seed is cut off past reclaimMs (inherited by the second), the third killed and back, then the second cut off past reclaimMs (inherited by the third, the first seed\'s estate with it; the steps follow a 0.1 s pause of the last seed): chaos 3+2 seed 24\'s chain, which lost a seed\'s share on real processes (not reproduced here)',
    load: 'zipf',
    faults: {
      joins: 2,
      pause: {
        atFraction: 0.03,
        reclaims: 0.05,
        then: [
          { afterMs: 1500, seed: 0, how: 'cut', restartMs: 2800 },
          { afterMs: 3700, seed: 2, restartMs: 1000 },
          { afterMs: 3500, seed: 1, how: 'cut', restartMs: 2400 }
        ]
      }
    },
    tuning: { inheritSeeds: true },
    minGossips: 400,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'returned-seed-dies',
    summary: 'Zipf load; the last two seeds paused for 2 x reclaimMs are inherited (one heir takes both, which had traded tokens) and come back without a share; then the first of them is killed past reclaimMs and back: its settlement credits only what its new incarnation held',
    load: 'zipf',
    faults: { pause: { atFraction: 0.03, reclaims: 2, seeds: 2, then: [{ afterMs: 4000, seed: 3, restartMs: 6000 }] } },
    tuning: { inheritSeeds: true },
    minGossips: 250,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'paused-member-giver-crash',
    summary: 'Moving hot spot, two joiners; one, paused (SIGSTOP) for 2 x reclaimMs with a grant in flight to it, is settled; 1 s after it resumes, that grant\'s giver is killed (kill -9) and recovers from its journal 1.5 s later: it credits the grant once',
    load: 'moving-hot',
    faults: { joins: 2, pause: { atFraction: 0.1, reclaims: 2, member: true, then: [{ afterMs: 1000, seed: 'giver', restartMs: 1500 }] } },
    minGossips: 160,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'giver-crash-receiver-stop',
    summary: 'moving hot spot; a seed killed (kill -9) while a grant of its is applied and unacked at another seed, back from its journal 1 s later; 0.15 s after, the receiver stops (SIGTERM) and starts again: the giver takes back only what was never applied',
    load: 'moving-hot',
    faults: { giverCrashReceiverStop: { restartMs: 1000, stopAfterMs: 150 } },
    minGossips: 80,
    shortfallCheckMs: 6000
  },
  {
    ...base,
    name: 'partition-majority',
    summary: 'Zipf load; the seeds cut into groups none of which is a quorum for 3 x reclaimMs: everyone fenced',
    load: 'zipf',
    faults: { cut: { sides: 'no-quorum', atFraction: 0.15, reclaims: 3 } },
    minGossips: 90
  },
  {
    ...base,
    name: 'partition-heals-early',
    summary: 'Zipf load; one seed and two joining members cut from the other seeds for 0.9 x reclaimMs: fenced after leaseMs, healed just before any voter attests them',
    load: 'zipf',
    faults: { joins: 2, cut: { sides: 'minority', atFraction: 0.15, reclaims: 0.9 } },
    minGossips: 60
  },
  { ...base, name: 'keys100', summary: '100 active keys of a glob rule, Zipf load at 1.2x each', load: 'zipf', keys: 100 },
  { ...base, name: 'keys100-slow', summary: 'the same 100 keys at a quarter of the request rate', load: 'zipf', keys: 100, demand: 0.3 }
]

/** The last two seeds paused past reclaimMs (inherited, back without a share), then `then` (FaultSpec.pause.then). */
function returnedHeirs (name: string, summary: string, then: NonNullable<NonNullable<FaultSpec['pause']>['then']>): Scenario {
  return { ...base, name, summary, load: 'zipf', faults: { pause: { atFraction: 0.03, reclaims: 2, seeds: 2, then } }, tuning: { inheritSeeds: true }, minGossips: 400, shortfallCheckMs: 6000 }
}

export function scenario (name: string): Scenario {
  const s = SCENARIOS.find(x => x.name === name)
  if (s === undefined) throw new Error(`unknown scenario "${name}" (one of: ${SCENARIOS.map(x => x.name).join(', ')})`)
  return s
}
