/**
 * The two seeds that decide a glob key of a `decide: "seeds"` rule (forward.ts
 * `route`: its home and the seed after it), and what passes between them
 * (protocol version 15). Pure, like the core: time comes in as an argument.
 *
 * Why: the two used to trade a key's tokens ahead of its requests
 * (rebalance.ts), and each move is a want, a grant, an ack and their journal
 * copies at both ends, about 1.1 kB for 5 tokens on average. At keys100 on
 * 50 nodes of which 5 seeds that was 2.8 moves per key per window, 71% of
 * them of 4 tokens or fewer, and with their journal copies a third of all
 * traffic. Now:
 * - one of the two, out of tokens, sends a request on to the other while the
 *   other says it holds some (`partnerFor`): about 7 bytes, decided there as
 *   the other's own. So the last tokens of a window are reachable wherever
 *   they are, as at a central limiter;
 * - they ask each other only early in a window, and for a large part
 *   (rebalance.ts `pairAsks`): the split that follows each one's demand. A
 *   spent token returns to its spender, so what one spends for the other's
 *   requests comes back to it next window, and the asking evens it out;
 * - a seed that forwards a key (one of neither, `forwardsOwn`) asks for none
 *   of it and returns what it holds home, and the two do not ask it for a
 *   small part (`notAskedSmall`).
 *
 * Invariants:
 * - A request is sent on once: never one that was sent on (`moved`), nor one
 *   a seed sent (that is a seed's own client's, decided where it went).
 * - The seed that sends it on counts it in its own demand (its members' and
 *   clients'), the other does not (only from a seed: a member cannot mark
 *   its own acquires so): each one's rate is its own side's, and asks for
 *   its part of the next windows by it.
 * - Sending on moves no token: hard mode's guarantee is the deciding seed's.
 */
import { homeOf } from '../core/share.js'
import type { CompiledRule } from '../core/rules.js'
import type { ClusterCore } from './cluster-core.js'
import type { KeyState } from '../core/limiter.js'
import type { Fans, Fwd } from './forward-messages.js'
import { windowStart } from './key-ext.js'

/** A glob key's members go to its home and the seeds after it, this many in all (forward.ts `route`). */
export const PAIR = 2

/**
 * A seed sends its own clients' acquires of a glob key it does not decide to
 * the two that do (`route`) only in a cluster of at least this many seeds.
 * With 3, it saved 4% of keys100's traffic at 50 nodes, and while one of a
 * key's two seeds was dead before its heir inherited, the third held none
 * of the key's stock: 5 to 15 points of utilization lost at 10 nodes
 * (seed-crash-forever, heir-crash). With 5, 17% saved and nothing lost
 * (cluster-protocol.md, "Members and forwarding").
 */
export const SEEDS_TO_FORWARD = 4

/** A key's other seed is sent requests (`partnerFor`) only while this node heard it within this many gossip intervals. */
const FRESH_INTERVALS = 2

/**
 * The seeds a key of `rule` may go to now, in seed order (this node among
 * them if a seed): alive, agreeing on the rule, not leaving and not fenced
 * in this node's view, and not one `skip` says to route around.
 */
export function upSeeds (c: ClusterCore, rule: CompiledRule, nowMs: number, skip?: (seed: string, heardMs: number) => boolean): { seeds: string[], around: boolean } {
  const seeds: string[] = []
  let around = false
  for (const s of c.seeds) {
    if (s === c.node) { seeds.push(s); continue }
    const p = c.peers.get(s)
    if (p === undefined || !c.peers.isAlive(p, nowMs) || p.leaving || p.fenced || !p.sameCluster || p.rules[rule.name] !== rule.hash) continue
    if (skip?.(s, p.lastHeard) === true) { around = true; continue }
    seeds.push(s)
  }
  return { seeds, around }
}

/**
 * The seeds that decide a glob key whose home is `home`, of the seeds `up`
 * (those a node may send to now, in seed order): the home and the next of
 * them after it; or, while the home is not up, the next one after it
 * alone, which holds the rest of the key's stock until the heir inherits
 * the home's (the others hold none). Empty when none is up, or the key has
 * no home among `all`.
 */
export function deciders (home: string | undefined, all: readonly string[], up: readonly string[]): string[] {
  const i = home === undefined ? -1 : all.indexOf(home)
  if (i < 0) return []
  const want = up.includes(all[i]) ? PAIR : 1
  const out: string[] = []
  for (let j = 0; j < all.length && out.length < want; j++) {
    const s = all[(i + j) % all.length]
    if (up.includes(s)) out.push(s)
  }
  return out
}

/** The two seeds of glob key `key` of `rule` in this node's view now (fewer while its home is down). */
function pairOf (c: ClusterCore, key: string, rule: CompiledRule, nowMs: number): string[] {
  return deciders(homeOf(key, c.seeds, c.view.homes), c.seeds, upSeeds(c, rule, nowMs).seeds)
}

/** A glob key of a fixed-window `decide: "seeds"` rule, at a seed: where the two send requests rather than small moves. */
function paired (c: ClusterCore, rule: CompiledRule | undefined): rule is CompiledRule {
  return rule !== undefined && rule.glob && rule.config.decide === 'seeds' && rule.config.algorithm === 'fixed-window' && c.seeds.includes(c.node)
}

/**
 * At one of the two seeds of a glob key (`pair`), of a fixed-window rule:
 * the other one, if this seed holds fewer than `count` tokens of it and the
 * other, heard lately, says it holds `count`; else null.
 */
export function partnerFor (c: ClusterCore, key: string, count: number, rule: CompiledRule, pair: readonly string[], nowMs: number): string | null {
  if (pair.length !== PAIR || !pair.includes(c.node) || rule.config.algorithm !== 'fixed-window' || shortOf(c, key, count, nowMs) === null) return null
  const other = pair[0] === c.node ? pair[1] : pair[0]
  const p = c.peers.get(other)
  // Heard within FRESH_INTERVALS gossips (a seed gossips to the seeds every interval): one that died is not sent to.
  if (p === undefined || nowMs - p.lastHeard > FRESH_INTERVALS * c.tuning.gossipIntervalMs) return null
  const line = p.keys.get(key)
  // Never announced: its pre-allocated share, which for a glob key is the whole stock at its home.
  const there = line !== undefined ? line.held : homeOf(key, c.seeds, c.view.homes) === other ? rule.stock : 0
  return there >= count ? other : null
}

/**
 * The key's state when this node may spend fewer than `count` tokens of
 * `key`, as an acquire here would find it; else null. A home creates a key
 * new here with its whole stock (and then counts its demand). One it
 * cannot create (the key table full) it decides here, and answers that
 * error: null. `lessReserve`: what it may spend is its held less its
 * reserve (caution.ts: all of a hard key while it is fenced), as the last
 * acquire here left it.
 */
export function shortOf (c: ClusterCore, key: string, count: number, nowMs: number, lessReserve = false): KeyState | null {
  try {
    const ks = c.limiter.keyState(key, count, nowMs)
    ks.bucket.advance(nowMs)
    return ks.bucket.held - (lessReserve ? ks.reserve : 0) + 1e-9 < count ? ks : null
  } catch {
    return null
  }
}

/**
 * At a seed: whether member `m`'s acquire goes on to the key's other seed
 * (`partnerFor`). Never one that was sent on, nor one a seed sent. Asked of
 * every member's acquire, so what it holds is looked at first: the seeds'
 * view is read only for one this seed is short of.
 */
export function sendsOn (c: ClusterCore, m: Fwd, nowMs: number): boolean {
  const rule = c.limiter.ruleFor(m.key)
  if (!paired(c, rule) || m.moved === true || c.seeds.includes(m.node) || shortOf(c, m.key, m.count, nowMs) === null) return false
  return partnerFor(c, m.key, m.count, rule, pairOf(c, m.key, rule, nowMs), nowMs) !== null
}

/**
 * Whether this seed sends its own clients' acquires of glob key `key` to
 * the key's two seeds (`route`: in a cluster of SEEDS_TO_FORWARD seeds or
 * more, not one of the two, both up), so it spends none of the key itself.
 */
export function forwardsOwn (c: ClusterCore, key: string, nowMs: number): boolean {
  const rule = c.limiter.ruleFor(key)
  if (rule === undefined || !rule.glob || rule.config.decide !== 'seeds' || !c.seeds.includes(c.node) || c.seeds.length < SEEDS_TO_FORWARD) return false
  const pair = pairOf(c, key, rule, nowMs)
  return pair.length === PAIR && !pair.includes(c.node)
}

/**
 * When this seed is one of the two that decide glob key `key` now, the other
 * up: the peers it does not ask for a small part (rebalance.ts): that other,
 * which it sends requests instead (`partnerFor`), and, with
 * SEEDS_TO_FORWARD seeds or more, the seeds that forward the key
 * (`forwardsOwn`), which return what they hold home. Null when not one of
 * two.
 */
export function notAskedSmall (c: ClusterCore, key: string, nowMs: number): ((peer: string) => boolean) | null {
  const rule = c.limiter.ruleFor(key)
  if (!paired(c, rule)) return null
  const pair = pairOf(c, key, rule, nowMs)
  if (pair.length !== PAIR || !pair.includes(c.node)) return null
  const forwarding = c.seeds.length >= SEEDS_TO_FORWARD
  return peer => pair.includes(peer) || (forwarding && c.seeds.includes(peer))
}

/**
 * At a seed, `answer` to an acquire of `key` it sent on, as decided by the
 * key's other seed: with its window's end as this seed's own (the same
 * calendar window, read on this clock), so that it goes as short as this
 * seed's own answers (forward-names.ts: a window end told that differs by
 * more than its slack is told again, whole).
 */
export function inOwnWindow (c: ClusterCore, key: string, answer: Fans, nowMs: number): Fans {
  const rule = c.limiter.ruleFor(key)
  if (rule === undefined || answer.code !== undefined || rule.config.algorithm !== 'fixed-window' || (!answer.allowed && answer.retryAfterMs !== answer.resetMs)) return answer
  const cal = c.calendar.at(nowMs)
  const resetMs = Math.max(1, Math.ceil(windowStart(cal, rule.config.perMs) + rule.config.perMs - cal))
  return { ...answer, resetMs, ...(answer.allowed ? {} : { retryAfterMs: resetMs }) }
}
