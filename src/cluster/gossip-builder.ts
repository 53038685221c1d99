/**
 * Builds one gossip message: the batched delta for this interval.
 *
 * A key is included when what peers know of it is stale enough to matter
 * for their decisions (which donor to ask, how much the cluster has left):
 * its held moved by half a token and by a quarter of what was last said, or
 * its rate by a quarter. Its custody (held + outstanding + deferred + tokens
 * in transit out: what peers' shortfall sums, shortfall.ts) is sent when it
 * moved by half a token at all: it changes only when tokens move between
 * nodes, are burned or a rule changes, never by spending, so this adds at
 * most one line per key per interval in which a transfer touched it (the
 * ledger names keys whose grants settled, gossip-schedule.ts, so a quiet
 * key is announced again too). A full sync marks keys stale as its cursor
 * reaches them, so every view is refreshed every `fullSyncEvery` gossips.
 * Values are rounded so msgpack sends small integers rather than float64s.
 * A key whose owed burn changed is always sent (caution.ts relies on it).
 *
 * At most `maxGossipKeys` keys, and at most GOSSIP_BYTE_BUDGET bytes, go in
 * one message; the rest stay stale and spill into the next one. So a
 * message's size is bounded whatever the request rate, and traffic grows
 * with the number of changing keys, not with requests. (The simulator's
 * keys100 scenarios measure it.)
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { DECAY_QUIET_INTERVALS, decayed, deferredTotal, ext, keepRate, rateDecays } from './key-ext.js'
import { heardEntryBytes, type Echoable } from './lease.js'
import { needsLease } from './member-gossip.js'
import { CLUSTER_VERSION, type Gossip, type GossipKey } from './messages.js'

/** Integers from 8 up, one decimal below: what a peer's decisions can use, in few bytes. */
export function compact (n: number): number {
  return Math.abs(n) >= 8 ? Math.round(n) : Math.round(n * 10) / 10
}

/** Whether a value said as `sent` is worth saying again as `now`: moved by `floor` and by a quarter (never said: NaN). */
export function stale (sent: number, now: number, floor: number): boolean {
  return Number.isNaN(sent) || Math.abs(sent - now) >= Math.max(floor, 0.25 * Math.abs(sent))
}

/** Bytes a gossip may take: under the transport's 64 KiB message bound, with room for the envelope. */
export const GOSSIP_BYTE_BUDGET = 56 * 1024

export interface Built {
  msg: Gossip
  /** A candidate taken from the source but not sent (over the byte budget): the caller offers it first next time. */
  leftover: KeyState | null
}

export function buildGossip (core: ClusterCore, candidates: Iterable<KeyState>, nowMs: number): Built {
  const keys: GossipKey[] = []
  const decay: number[] = []
  const max = core.tuning.maxGossipKeys
  const rules: Record<string, string> = {}
  // Estimated msgpack size: strings plus a few bytes of framing each; numbers as float64.
  let bytes = 64
  for (const r of core.limiter.rules) { rules[r.name] = r.hash; bytes += r.name.length + r.hash.length + 4 }
  const acks = core.gossip.acks()
  for (const [n, e] of acks) bytes += n.length + e.length + 14
  const pending = core.gossip.pendingRules()
  for (const r of pending) bytes += r.length + 2
  const sync = core.gossip.syncMark()
  const wg = Math.round(core.calendar.wallGapMs)
  for (const e of core.carries) bytes += e.length + 2
  // A voter's echoes of part of its peers (lease.ts): alive ones of our cluster, by their newest gossip applied.
  const heard = core.fence.echoes === null ? undefined : core.fence.echoes.take(echoable(core, nowMs), nowMs)
  for (const [n] of heard ?? []) bytes += heardEntryBytes(n)
  const attest = core.reclaim.list(nowMs)
  for (const [n] of attest ?? []) bytes += n.length + 12
  const estates = core.heir.list()
  for (const [n] of estates) bytes += n.length + 12
  const estateMarks = core.reclaim.marks.take(nowMs)
  for (const m of estateMarks) bytes += m[0].length + m[1].length + m[2].length + m[3].length + 14
  const deadApplied = core.reclaim.returns.take(nowMs)
  for (const m of deadApplied) bytes += m[0].length + m[1].length + 12
  // A seed's member list, when it goes (at most 300 entries of about 70 bytes; see membership.ts).
  if (core.gossip.membersDue()) bytes += core.membership.members().reduce((n, [m, id]) => n + m.length + id.length + 6, 0)
  let leftover: KeyState | null = null
  for (const ks of candidates) {
    // The key's string header, seven numbers (9 bytes each as float64, at worst) and the array's header.
    const cost = Buffer.byteLength(ks.key) + 68
    if (bytes + cost > GOSSIP_BYTE_BUDGET) { leftover = ks; break }
    const x = ext(ks)
    ks.bucket.advance(nowMs)
    const held = ks.bucket.held
    const outstanding = ks.bucket.outstanding(nowMs)
    const rate = keepRate(x, nowMs)
    const deferred = deferredTotal(x)
    const transit = core.ledger.inTransitOf(ks.key)
    // As peers will read it (held goes out as at least 0), so a soft-mode overdraft does not show as a loss.
    const custody = Math.max(0, held) + outstanding + deferred + transit
    // A key gone quiet gets one exact last word, so idle views are exact (and the key can leave the active set).
    // An owed burn is exact: peers keep that much of their own holdings unspent while it is unpaid.
    // Custody: any whole token that moved (NaN, never sent, compares false and is sent).
    // A rate said to decay is compared with where peers now read it (key-ext.ts `decayed`), not with what was said.
    const peersRead = decayed(x.sentRate, x.sentDecays === 1, nowMs - x.sentAt, core.tuning.rateHalfLifeMs)
    // A rate said to decay that has had demand since is off its curve, however little: said again.
    const changed = stale(x.sentHeld, held, 0.5) || stale(peersRead, rate, 0.05) || (rate === 0 && held !== x.sentHeld) ||
      (x.sentDecays === 1 && x.lastDemandAt > x.sentAt) ||
      x.burn !== x.sentOwed || x.debts !== x.sentDebts || !(Math.abs(custody - x.sentCustody) < 0.5) || (rate === 0 && custody !== x.sentCustody)
    if (!changed) continue
    x.sentHeld = held
    x.sentOutstanding = outstanding
    // The rate peers plan with is the one this node keeps tokens for.
    x.sentRate = rate
    x.sentAt = nowMs
    x.sentDecays = rateDecays(x, rate, nowMs, DECAY_QUIET_INTERVALS * core.tuning.gossipIntervalMs) ? 1 : 0
    if (x.sentDecays === 1) decay.push(keys.length)
    x.sentOwed = x.burn
    x.sentDebts = x.debts
    x.sentCustody = custody
    // Rounding owed or debts down would understate them: up to a tenth (they are whole in practice); Infinity as -1.
    const up = (n: number): number => n === Infinity ? -1 : Math.ceil(n * 10) / 10
    keys.push([ks.key, compact(Math.max(0, held)), compact(outstanding), compact(rate), up(x.burn), up(x.debts), compact(deferred), compact(transit)])
    bytes += cost
    // Stop right after the last one taken, so a resumable candidate source loses nothing.
    if (keys.length >= max) break
  }
  // A seed's sums of the members' lines (member-sums.ts), in what room is left.
  const msums = core.msums.build(nowMs, core.gossip.syncStarts(), max, GOSSIP_BYTE_BUDGET - bytes).lines
  const seq = core.gossip.nextSeq()
  // Its send time, for the echoes that will name it (lease.ts): recorded no later than it leaves.
  core.fence.lease.sent(seq, nowMs)
  const msg: Gossip = {
    v: CLUSTER_VERSION,
    t: 'gossip',
    node: core.node,
    epoch: core.epoch,
    inc: core.incarnation,
    seq,
    now: core.limiter.calendar.at(nowMs),
    pending,
    ...(sync > 0 ? { sync } : {}),
    ...(wg !== 0 ? { wg } : {}),
    carries: [...core.carries],
    cfg: core.clusterHash,
    ...(core.gossip.sendMembers() ? membership(core) : {}),
    rules,
    keys,
    ...(decay.length === 0 ? {} : { decay }),
    acks,
    ...(core.leaving ? { leaving: true } : {}),
    ...(core.fence.fenced ? { fenced: true } : {}),
    ...(needsLease(core, nowMs) ? {} : { nolease: true }),
    ...(heard === undefined || heard.length === 0 ? {} : { heard }),
    ...(core.reclaim.hasBase ? {} : { alloc: false as const }),
    ...(attest === undefined || attest.length === 0 ? {} : { attest }),
    ...(estates.length === 0 ? {} : { estates }),
    ...(estateMarks.length === 0 ? {} : { estateMarks }),
    ...(deadApplied.length === 0 ? {} : { deadApplied }),
    ...(msums.length === 0 ? {} : { msums })
  }
  return { msg, leftover }
}

/** A seed's member list, and its recent refusals if any (both sent when either changed, and on full syncs). */
function membership (core: ClusterCore): Pick<Gossip, 'members' | 'refused'> {
  const refused = core.membership.refusals()
  return { members: core.membership.members(), ...(refused.length > 0 ? { refused } : {}) }
}

/** The peers a voter may echo: alive and in our cluster (their echo would mean nothing to another). */
function echoable (core: ClusterCore, nowMs: number): Echoable[] {
  const out: Echoable[] = []
  // Never an incarnation this voter attests (reclaim.ts): it must never hold a lease again.
  // Nor a member that needs no lease (member-gossip.ts): its echoes were most of a seed's gossip at 1000 nodes.
  for (const p of core.peers.all()) if (p.sameCluster && !p.nolease && core.peers.isAlive(p, nowMs) && !core.reclaim.attestedByMe(p.name, p.inc)) out.push(p)
  return out
}
