/**
 * What the members hear of a seed's gossip (protocol version 9). Pure.
 *
 * A seed publishes its whole gossip on the seeds' topic, which only seeds
 * subscribe to, and the members' copy on the gossip topic, which only
 * members read (messages.ts `seedsTopic`, `gossipTopic`; seeds relay it
 * unread, the transport's `alsoPublish`). The copy
 * is the same message, less the key lines and member sums of keys whose
 * rule says `decide: "seeds"`: a member holds none of such a key and sends
 * its acquires to a seed (forward.ts), so it reads nothing of them. At 200
 * nodes of which 5 seeds, keys100, such lines were 1,373 of a seed's
 * gossip's ~1,960 msgpack bytes, and a member received 153 kbit/s, 133 of
 * them the seeds' gossip (cluster-protocol.md, "Members and forwarding").
 *
 * Invariants:
 * - Every field but `keys`, `decay` and `msums` is the seed's as it is: the
 *   member's lease (`heard`), the rules and cluster hash it routes by, the
 *   seed's liveness, leaving and fence; less, in `heard` and `acks`, the
 *   entries that name seeds, which no member reads.
 * - A line that says an owed burn or a debt (non-zero) is kept: caution.ts
 *   reads a key a peer never announced as owing nothing once it has heard
 *   all of that peer's keys (`sync`), so a key left out must owe nothing.
 *   A line said once with a burn and then with none is kept while it has
 *   one and left out after: the member reads the last burn it heard, which
 *   is more, never less.
 * - With no such rule, the copy is the message itself (the same bytes go
 *   to both topics).
 *
 * And whether a member needs a lease at all (`needsLease`), for the same
 * members: one that decides no rule itself and holds nothing does not.
 */
import type { ClusterCore } from './cluster-core.js'
import type { Outbound } from './core-options.js'
import { deferredTotal, ext } from './key-ext.js'
import type { Gossip } from './messages.js'

/** Whether a line of `key` goes to the members: not for a `decide: "seeds"` rule's key unless it names a burn or debt. */
function forMembersLine (core: ClusterCore, key: string, owed: number, debts: number): boolean {
  return owed !== 0 || debts !== 0 || core.limiter.ruleFor(key)?.config.decide !== 'seeds'
}

/**
 * `g` less a voter's echoes of seeds and its acks of seeds' grants (`g`
 * itself when it has neither): a node reads only the echo and the ack that
 * name it (intake.ts `echoed`, peers.ts `appliedFromMe`), and no member is a
 * seed. Acks of the grants between seeds were in most of a seed's copies,
 * which kept them from being plain and skipped (member-copies.ts).
 */
function withoutSeeds (core: ClusterCore, g: Gossip): Gossip {
  const heard = g.heard?.filter(([node]) => !core.msums.isSeed(node))
  const acks = g.acks.filter(([node]) => !core.msums.isSeed(node))
  const sameHeard = heard === undefined || heard.length === g.heard?.length
  if (sameHeard && acks.length === g.acks.length) return g
  const { heard: _all, ...rest } = g
  return { ...rest, acks, ...(heard === undefined || heard.length === 0 ? {} : { heard }) }
}

/** The members' copy of a seed's gossip `g` (see the header); `g` itself when nothing is left out. */
export function forMembers (core: ClusterCore, whole: Gossip): Gossip {
  const g = withoutSeeds(core, whole)
  if (!core.limiter.rules.some(r => r.config.decide === 'seeds')) return g
  const keep = g.keys.map(([key, , , , owed, debts]) => forMembersLine(core, key, owed, debts))
  const msums = g.msums?.filter(([key]) => core.limiter.ruleFor(key)?.config.decide !== 'seeds')
  if (keep.every(k => k) && msums?.length === g.msums?.length) return g
  const index = new Map<number, number>()
  const keys = g.keys.filter((_, i) => {
    if (!keep[i]) return false
    index.set(i, index.size)
    return true
  })
  const decay = (g.decay ?? []).flatMap(i => { const j = index.get(i); return j === undefined ? [] : [j] })
  const { decay: _d, msums: _m, ...rest } = g
  return { ...rest, keys, ...(decay.length === 0 ? {} : { decay }), ...(msums === undefined || msums.length === 0 ? {} : { msums }) }
}

/**
 * Whether this seed has members to publish the members' copy to: a peer that
 * is not a seed, alive in its view, or a settled member that spoke lately
 * (it must hear the attestations: reclaim.ts `zombieSpoke`).
 */
export function hasMembers (core: ClusterCore, nowMs: number): boolean {
  if (!core.msums.isSeed(core.node)) return false
  if (core.reclaim.zombieSpoke(nowMs)) return true
  for (const p of core.peers.alive(nowMs)) if (!core.msums.isSeed(p.name)) return true
  return false
}

/**
 * A gossip to publish: a seed with members alive also publishes the
 * members' copy, unless it says nothing new to them yet (member-copies.ts).
 */
export function gossipOut (core: ClusterCore, msg: Gossip, nowMs: number): Outbound {
  // Either may go as an `hb` that repeats the last (gossip-repeat.ts); whole while a peer new in view may not hold it.
  const r = core.gossip.repeat
  const own = r.own.next(msg, core.gossip.loud(nowMs))
  if (!hasMembers(core, nowMs)) return { kind: 'gossip', msg: own }
  const members = core.gossip.copies.next(forMembers(core, msg), nowMs, core.tuning.quietGossipMs)
  if (members === undefined) return { kind: 'gossip', msg: own }
  // The same gossip both ways: the same bytes (cluster-node.ts publish).
  return { kind: 'gossip', msg: own, members: members === msg ? own : r.copy.next(members, core.gossip.copies.loud(nowMs)) }
}

/**
 * Whether this node needs a lease (lease.ts). A seed always does. A member
 * does while a rule of its own decides at the members, or it has anything
 * of any key: held, spent and coming back, deferred, or in a grant not yet
 * acked (a lease is what lets it spend and give). A member whose every rule
 * says `decide: "seeds"` and that holds nothing spends and gives nothing: it
 * says so (`nolease`), voters do not echo it, and it stays fenced, which
 * costs it nothing (its acquires are decided at the seeds, whose fences
 * count). Once it needs one (a reload, tokens it comes to hold) it stops
 * saying so, and is echoed, and unfenced, as at its start. Echoes of every
 * member were most of what a member heard at 1000 nodes of which 5 seeds
 * (about 95 of its 120 kbit/s with one key). O(this node's keys) a gossip:
 * a member with such rules keeps only their exact keys, and glob keys it
 * decided locally before it heard a seed.
 */
export function needsLease (core: ClusterCore, nowMs: number): boolean {
  if (core.msums.isSeed(core.node)) return true
  if (core.limiter.rules.some(r => r.config.decide !== 'seeds')) return true
  if (core.ledger.unackedTotal() > 0) return true
  for (const ks of core.limiter.states()) {
    if (ks.bucket.held > 0 || ks.bucket.outstanding(nowMs) > 0 || deferredTotal(ext(ks)) > 0 || ext(ks).burn > 0) return true
  }
  return false
}
