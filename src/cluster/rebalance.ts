/**
 * A key's rebalancing step on a tick: a node without a share returns what
 * it won't use to its lenders; a glob key idle away from its home goes home;
 * otherwise, if the node expects to run out within its horizon
 * (or owes a burn), it asks the donors that can cover its deficit, together. Pure; the core calls it
 * for every active key while the node is running, not isolated and not
 * fenced (a fenced node gives nothing and asks for nothing). What it sends
 * goes into the tick's batch (tick-batch.ts), sent at the tick's end as one
 * message per peer.
 */
import type { KeyState } from '../core/limiter.js'
import { homeOf } from '../core/share.js'
import type { ClusterCore } from './cluster-core.js'
import { horizon, keepRate, needRate, type KeyExt } from './key-ext.js'
import type { Peer } from './peers.js'
import { giveCap } from './no-relay.js'
import { forwardsOwn, notAskedSmall } from './forward-pair.js'

/**
 * The least shortfall, as a fraction of its need, for which one of a glob
 * key's two deciding seeds asks the other (see `pairAsks`).
 */
export const PAIR_WANT_SHORT = 0.5

/**
 * Whether one of a glob key's two deciding seeds asks the other now
 * (forward.ts `partnerFor`): only while more than half of the window is
 * left (of its `per`, or of the horizon if shorter), and short of its need
 * by more than PAIR_WANT_SHORT of it. The split that follows the demand is
 * made early in a window; a request that finds the seed out later goes to
 * the other seed, about 7 bytes, instead of a move of a few tokens, about
 * 1.1 kB with its want, grant, ack and journal copies (keys100 at 50 nodes
 * of which 5 seeds: 2.8 moves per key per window, a third of all traffic,
 * 71% of them of 4 tokens or fewer).
 */
function pairAsks (ks: KeyState, need: number, held: number, nowMs: number, c: ClusterCore): boolean {
  const left = horizon(ks, Number.POSITIVE_INFINITY, nowMs, c.calendar)
  return left >= Math.min(ks.rule.config.perMs, c.tuning.horizonMs) / 2 && need - held > PAIR_WANT_SHORT * need
}

/** Gossip intervals without demand after which a seed returns the tokens of a key it forwards (see `rebalance`). */
const RETURN_FORWARDED_INTERVALS = 4

/**
 * Whether `p` has heard this incarnation, as far as we can tell: a voter echoes the peers it hears (lease.ts), new
 * ones first. A push to one that has not is refused, binding (grant-checks.ts: not a peer this node has heard): its
 * tokens come back a round trip later. (Sim paused-member-giver-crash: a member pushed to a seed just restarted from
 * its journal, before the seed heard the member's gossip.)
 */
function hearsUs (c: ClusterCore, p: Peer): boolean {
  return !c.tuning.leases || !c.fence.quorum.isVoter(p.name) || Number.isFinite(p.echoSentAt)
}

export function rebalance (c: ClusterCore, ks: KeyState, x: KeyExt, nowMs: number): void {
  // One round of wants at a time; a round whose answers did not all come is over after the want timeout.
  if (x.wantsOut > 0 && nowMs - x.wantSentAt < c.tuning.wantTimeoutMs) return
  x.wantsOut = 0
  // A node without a share can give back only to its lenders (no relay, reclaim.ts): it does so by itself.
  if (!c.reclaim.hasBase && returnToLenders(c, ks, x, nowMs)) return
  // A seed that sends every acquire of the key to its two seeds (forward.ts `route`) returns what it holds after
  // RETURN_FORWARDED_INTERVALS: kept, tokens it took while starting would sit there unspent, and its two would ask
  // for them, a few at a time, every window.
  const forwards = forwardsOwn(c, ks.key, nowMs)
  if (c.view.shouldReturnHome(ks, x, nowMs, forwards ? RETURN_FORWARDED_INTERVALS * c.tuning.gossipIntervalMs : c.tuning.idleReturnMs)) {
    const home = homeOf(ks.key, c.seeds, c.heir.homes) as string
    const p = c.peers.get(home)
    // Pushed at the tick's end, with the other keys this tick returns to the same peer (tick-batch.ts).
    if (p !== undefined && hearsUs(c, p)) c.batch.push(p, ks, x, Math.floor(ks.bucket.held))
    return
  }
  // Nor does it ask for any: its rate is what it decided while starting, or an owed burn its two pay off.
  if (forwards && x.burn <= 0) return
  const rate = needRate(x)
  // A burn owed is asked for too: tokens that should not exist are paid off where they sit.
  if (rate <= 0 && x.burn <= 0) return
  // After a round that got nothing, one per gap: fruitless wants are bounded by the key count, not the request rate.
  if (nowMs - x.lastWantAt < wantGap(c.tuning.wantGapMs, c.tuning.horizonMs, rate, x.burn)) return
  const s = c.view.scarcity(ks, nowMs, rate)
  const need = s * rate * horizon(ks, c.tuning.horizonMs, nowMs, c.calendar) / 1000
  const held = ks.bucket.held
  if (x.burn <= 0 && held >= need && held >= 1) return
  // Twice the need while tokens are plentiful (fewer rounds); under contention only the proportional part
  // (ClusterView.scarcity). Donors still keep their whole rate's worth: planning their keep by it too moved
  // more tokens back and forth (keys100 at 3 nodes: 1,410 messages per node per second against 1,000).
  const deficit = Math.max(1, Math.ceil((s < 1 ? 1 : 2) * need - held + x.burn))
  // One of a glob key's two deciding seeds asks the other only when short by a large part (not counting the
  // doubling above): a request that finds it out goes there instead (forward.ts `partnerFor`). Nor the seeds
  // that forward the key, which return what they hold home (above). A third seed that decides its own clients
  // (in a cluster of 3) it asks as any.
  const skip = x.burn <= 0 && !pairAsks(ks, need, held, nowMs, c) ? notAskedSmall(c, ks.key, nowMs) : null
  // The donors whose surpluses cover the deficit, asked together: each for its surplus as this node sees it, the
  // last for all that is left (its view may be stale, and a donor gives no more than it can spare).
  let donors = c.view.chooseDonors(ks, nowMs, deficit, c.tuning.maxWantFanout, x.burn > 0)
  if (skip !== null) donors = donors.filter(([p]) => !skip(p.name))
  if (donors.length === 0) return
  x.wantSentAt = nowMs
  x.lastWantAt = nowMs
  let left = deficit
  for (let i = 0; i < donors.length && left >= 1; i++) {
    const [donor, surplus] = donors[i]
    const want = i === donors.length - 1 ? left : Math.min(left, Math.max(1, Math.floor(surplus)))
    left -= want
    x.wantsOut++
    c.counters.wantsSent++
    // Sent at the tick's end, with the other keys this tick asks the same donor for (tick-batch.ts).
    c.batch.want(donor.name, ks.key, want)
  }
}

/**
 * How long after a round that got nothing the next may go: `wantGapMs`, or,
 * for a key this node expects fewer than one request of within its horizon
 * (`needRate` under one per horizon), the horizon. Such a node is the long
 * tail of a skewed load, holds under a token, and asked every `wantGapMs`
 * for one that the few nodes holding tokens mostly needed themselves: at
 * keys100 with 50 nodes 24% of the wants answered `none` came from askers
 * under one request a second. Waiting its horizon, it asks about once per
 * request it expects. keys100 (seed 1, kbit/s per node, sent + received):
 * 50 nodes 909 + 1,758 -> 773 + 1,607 at 84.0 -> 84.9% utilization, 200
 * nodes 445 + 2,574 -> 274 + 2,343 at 71.8 -> 74.2%; zipf, moving-hot and
 * uniform at 10 to 200 nodes the same or higher (uniform at 200: 90.9%,
 * its lowest seed 88.6 -> 89.1%). Scaling every asker's gap by its mean
 * gap between requests saved more (keys100 at 50 nodes 514 + 1,335) but
 * took uniform load at 200 nodes under the static split (90.4 against
 * 90.6%), as did a cut at two requests a second.
 */
export function wantGap (wantGapMs: number, horizonMs: number, rate: number, burn: number): number {
  return burn <= 0 && rate * horizonMs < 1000 ? Math.max(wantGapMs, horizonMs) : wantGapMs
}

/**
 * Under contention, a member returns a token it holds when it expects to
 * use less than RETURN_ROUND of it before the window ends (see
 * `returnToLenders`). At 200 nodes, 195 of them members, about 100 tokens
 * a window sat at as many members as remnants of one, unspent, while other
 * members' requests were denied; at the seeds, members' overflow reaches
 * them (forward-overflow.ts). Uniform, zipf and moving-hot at 200 nodes
 * (seed 1): 98.5 / 95.8 / 91.3% without it, 99.3 / 99.5 / 99.0% with 0.3;
 * 0.5 sent more requests to the seeds (54 against 50% of uniform's) for
 * under a point. Not while tokens are plentiful: there it only moved
 * tokens back and forth (zipf at 0.6 of the limit: 73 -> 94 kbit/s per node).
 */
const RETURN_ROUND = 0.3

/**
 * A node without a share may give a peer only what it holds of that peer's
 * tokens, and no one else can ask it for them (cluster-view.ts `mayAsk`). So
 * it returns what it will not use to the peers it got it from: a glob key
 * idle here, all of it (its home could not take it); any other key, what it
 * holds above what it would ask for: twice what it expects to need while
 * tokens are plentiful (a node asks for twice its need then, so this does
 * not ping-pong), its need alone under contention (it asks for no more
 * then). Twice under contention too kept tokens at members that others,
 * reachable only through the seeds, were denied for: uniform load on 5
 * seeds of 200 nodes 84.0% -> 85.0% (seed 1); returning above the need
 * always (86.0%) traded tokens back and forth while they were plentiful
 * (keys100-slow, 5 seeds of 50: 267 -> 312 messages per node per second).
 * Without the return, a hot spot that moved on left its tokens at the old
 * hot member, where no one could reach them (the simulator measured
 * moving-hot at 38% with 3 seeds of 50 nodes). At most once per
 * wantGapMs per key: once per want timeout (1 s) was the slowest step in
 * following a hot spot between members (1.35 s at 50 nodes, now 0.4 s).
 * Returns whether it gave anything.
 */
function returnToLenders (c: ClusterCore, ks: KeyState, x: KeyExt, nowMs: number): boolean {
  if (nowMs - x.lastReturnAt < c.tuning.wantGapMs) return false
  const held = Math.floor(ks.bucket.held + 1e-9)
  if (held < 1) return false
  const idleGlob = c.view.shouldReturnHome(ks, x, nowMs)
  // What it would ask for: twice its need while tokens are plentiful, its need under contention (rebalance).
  const k = idleGlob ? 0 : c.view.scarcity(ks, nowMs, needRate(x)) < 1 ? 1 : 2
  const keep = k * (keepRate(x, nowMs) * horizon(ks, c.tuning.horizonMs, nowMs, c.calendar) / 1000 + x.debt)
  // Under contention a token it expects to use less than RETURN_ROUND of goes too: a member's overflow reaches it at
  // the seeds (forward-overflow.ts), where it would have sat here unspent at the window's end.
  let surplus = Math.floor(held - keep + (k === 1 && c.tuning.overflow ? RETURN_ROUND : 0))
  if (surplus < 1) return false
  const lenders: Array<[Peer, number]> = []
  for (const p of c.peers.alive(nowMs)) {
    if (p.leaving || p.fenced || !c.agrees(p, ks) || !hearsUs(c, p)) continue
    const cap = Math.floor(giveCap(c, p, ks.key) + 1e-9)
    if (cap >= 1) lenders.push([p, cap])
  }
  if (lenders.length === 0) return false
  lenders.sort((a, b) => b[1] - a[1])
  x.lastReturnAt = nowMs
  for (const [p, cap] of lenders) {
    const n = Math.min(surplus, cap)
    c.batch.push(p, ks, x, n)
    surplus -= n
    if (surplus < 1) break
  }
  return true
}
