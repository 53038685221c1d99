/**
 * The cluster's messages, as plain objects (msgpack maps on the wire), and
 * their validation (`parseMessage`; a gossip's many fields in
 * gossip-parse.ts, the rules for each field in message-fields.ts). Every
 * field from a peer is checked and bounded, so the state machine only ever
 * sees well-formed messages; anything else throws E_BAD_FRAME and the
 * driver drops and counts it.
 *
 * - gossip (broadcast every interval): who I am, my rule hashes, a batched
 *   delta of the keys that changed (held, outstanding, rate, burns, and the
 *   tokens deferred or in transit out: with held and outstanding, the key's
 *   custody here, shortfall.ts), and my ledger high-water marks (grants
 *   applied from each peer epoch).
 * - want (request): "send me up to `want` tokens of `key`".
 * - grant (a reply to want, or a push: handoff, retransmit, return-home):
 *   tokens moved from giver to receiver, with a per-pair sequence number.
 * - ack (reply to a pushed grant, or a request of its own to the giver of
 *   grants that answered wants), none (reply to a want with no surplus, and
 *   to an ack request).
 *
 * Every message names its sender's node, epoch and incarnation (`inc`).
 */
import type { HeardEntry } from './lease.js'
import { parseGossip } from './gossip-parse.js'
import { bad, DEFAULT_BOUNDS, key, list, name, num, seq, tuple, type MessageBounds } from './message-fields.js'
import { parseJack, parseJcopy, parseJget, parseJrep, type Jack, type Jcopy, type Jget, type Jrep } from './replica-messages.js'

/**
 * The cluster protocol version. 3: want, grant, ack and none carry their
 * sender's `inc` (new-epoch evidence, intake.ts), and a gossip key line has
 * 8 fields (deferred and inTransitOut, for the shortfall). Nodes of another
 * version share no gossip topic (`gossipTopic`) and refuse each other's
 * requests. 4: jrep and jack, the seeds' journal copies (replica-messages.ts).
 * 5: jget and jcopy (a heir reads a dead seed's copies), and a seed's gossip
 * names the seeds it inherited (`estates`, heir.ts). 6: a node that is not
 * a seed publishes its gossip on the members' topic, which only seeds
 * subscribe to (`membersTopic`), and seeds gossip the members' sums
 * (`msums`, member-sums.ts). 7: a gossip may go deflated in a `gz` envelope
 * (gossip-codec.ts), and want, grant, ack and none go as arrays
 * (request-codec.ts). 8: a want may name several keys, jrep is deflated
 * against the text before it. 9: a seed publishes its gossip on the seeds'
 * topic, which only seeds subscribe to, and the members' copy (less the
 * lines of `decide: "seeds"` rules' keys, member-gossip.ts) on the gossip
 * topic, which only members subscribe to (`seedsTopic`). 10: a member's
 * forwarded acquires and their answers go on a call session
 * (`/quotad/forward/2.0.0`, transport/calls.ts) as compact arrays
 * (forward-messages.ts), no longer as `fwd` and `fans` on transfer streams.
 * 11: a seed's members' copy may skip gossips that say nothing new to the
 * members (`prev`, member-copies.ts), and a gossip leaves out its empty
 * `pending`, `carries`, `keys` and `acks` on the wire (gossip-codec.ts).
 * 12: a `fwd` may ask for credit and a `fans` give it (a rule's `credit`,
 * forward-credit.ts): fields a version 11 seed or member refuses.
 * 13: a member names a key to a seed once and then sends its number, a
 * one-token acquire as a bare integer, and a plain answer goes short
 * (forward-names.ts, forward-messages.ts), on `/quotad/forward/3.0.0`.
 * 14: a seed tells a member a window's end once per rule, not once per
 * key, a denial goes as nil or a boolean, a bare admission carries its
 * window's parity in the low bit, and a named fwd puts its number first
 * (forward-messages.ts), on `/quotad/forward/4.0.0`; and a quiet gossip
 * that says what the last said goes as an `hb` (gossip-repeat.ts).
 * 15: a glob key's seed, out of tokens, sends an acquire on to its other
 * seed, the key number negative, on `/quotad/forward/5.0.0` (forward-pair.ts).
 */
export const CLUSTER_VERSION = 15

/**
 * The gossip topic of a cluster, where seeds publish what members hear of their gossip (member-gossip.ts) and
 * only members subscribe: versioned, so nodes of another protocol version never hear each other.
 */
export function gossipTopic (cluster: string): string {
  return `quotad/${cluster}/gossip/${CLUSTER_VERSION}`
}

/** Where seeds publish their whole gossip: only seeds subscribe (member-gossip.ts). */
export function seedsTopic (cluster: string): string {
  return `quotad/${cluster}/seeds/${CLUSTER_VERSION}`
}

/** Where members (nodes not in the seed list) publish their gossip: only seeds subscribe (member-sums.ts). */
export function membersTopic (cluster: string): string {
  return `quotad/${cluster}/members/${CLUSTER_VERSION}`
}

/**
 * A seed's sums of the members' last lines for a key it aggregates: [key, held, rate, custody, spending], spending
 * the rates of those holding a token or more (member-sums.ts).
 */
export type MemberSum = [key: string, held: number, rate: number, custody: number, spending: number]

/**
 * One key's line in a gossip delta: [key, held, outstanding, rate tokens/s,
 * owed (this node's unpaid burn), debts (the unpaid burns elsewhere this
 * node knows of: what it keeps unspent, caution.ts), deferred (tokens
 * received, not spendable until their `at`), inTransitOut (tokens in this
 * node's unacked grants of the key)]. held + outstanding + deferred +
 * inTransitOut is the key's custody here (shortfall.ts).
 */
export type GossipKey = [key: string, held: number, outstanding: number, rate: number, owed: number, debts: number, deferred: number, inTransitOut: number]

/** [giver name, giver epoch, highest grant seq applied from it]. */
export type GossipAck = [node: string, epoch: string, applied: number]

export interface Gossip {
  v: number
  t: 'gossip'
  node: string
  epoch: string
  /**
   * The sender's incarnation: one more at every start, kept in its state
   * file. A gossip from a lower incarnation than one already heard is a
   * delayed message from a dead process, and is ignored.
   */
  inc: number
  /** Message number within this epoch (1, 2, ...): an older one never overwrites a newer one. */
  seq: number
  /** Sender's calendar time, ms (for status: the clock offset). */
  now: number
  /**
   * Rules whose keys the sender has not all announced since it started or
   * its rule last changed: until it has, a key it has not announced may
   * still owe a burn (caution.ts).
   */
  pending: string[]
  /**
   * The seq of the first message of the sender's last complete full-sync
   * pass that began after its last rule change: every key it had then was
   * said, under its current rules, in its messages from `sync` to this one.
   * Sent in the two gossips after it moved and in every full sync's first
   * message; absent means as before, until the sender's rules change (then
   * none until it names one again). A receiver that applied every one of
   * those messages has heard all of its keys (heard.ts `heardAll`).
   */
  sync?: number
  /** Earlier epochs of this node whose books this one carries (restored on a clean restart). */
  carries: string[]
  /**
   * The hash of what decides safety besides the rules: the cluster's name,
   * its seeds (names and pinned peer ids) and the timings (cluster-hash.ts).
   * Tokens move only between nodes that agree on it.
   */
  cfg: string
  /**
   * A seed's word on the members not in the file it admitted: [name, peer id]
   * (membership.ts). Sent when it changed and on full syncs; absent means
   * "as before".
   */
  members?: Array<[name: string, peerId: string]>
  /**
   * A seed's recent refusals: [name, peer id] pairs whose messages it dropped
   * because the name is bound to another peer id (at most MAX_REFUSED, sent
   * with `members`). The refused node reads its own name here: so a name
   * that is taken is an error on both sides, not silence on one.
   */
  refused?: Array<[name: string, peerId: string]>
  /** Rule name -> rule hash. */
  rules: Record<string, string>
  keys: GossipKey[]
  /**
   * Indices into `keys` of lines whose rate falls at the rate half-life
   * from this message on, with no demand (key-ext.ts `decayed`): a
   * receiver extrapolates it, and the sender sends the line again only
   * when its rate leaves that curve. Absent: none. An older node ignores it.
   */
  decay?: number[]
  acks: GossipAck[]
  /** Set in a node's last gossips while it stops: send it no more tokens. */
  leaving?: boolean
  /** The sender holds no lease (lease.ts): it neither spends hard tokens nor gives; donors skip it. */
  fenced?: boolean
  /**
   * A member that needs no lease (member-gossip.ts `needsLease`): it decides
   * no rule itself and holds nothing, so voters do not echo it (and it stays
   * fenced, which costs it nothing).
   */
  nolease?: boolean
  /**
   * Only in a seed's members' copy (member-copies.ts): the seq of the copy
   * it published before this one. The seqs between were gossips that said
   * nothing new to the members, and the seed published no copy of them: a
   * member does not wait on them (heard.ts `track`). Present also means the
   * seed publishes copies at the quiet pace: the member reads it alive for
   * as long as it reads a member that said `nolease` (peers.ts `isAlive`).
   */
  prev?: number
  /**
   * The version of this sender's repeatable gossip (gossip-repeat.ts): set
   * on a gossip that carries nothing but what it said the last time (its
   * seq, time and `prev` aside), which later `hb`s may stand for. One more
   * whenever that part changes.
   */
  hv?: number
  /**
   * A voter's echoes (lease.ts): [node, inc, newest seq applied from that
   * incarnation], for part of its peers in each message. At most `maxPeers`.
   */
  heard?: HeardEntry[]
  /**
   * Present (false) when the sender's account holds no pre-allocated share
   * (a member, or a seed whose share was lost): it gives a peer only what it
   * holds of that peer's tokens, never relays (reclaim.ts), and a quorum of
   * voters may attest it dead after `reclaimMs` of silence.
   */
  alloc?: false
  /**
   * A voter's attestations (reclaim.ts): [node, inc] of incarnations without
   * a share it has not heard for `reclaimMs` and will never echo again. At
   * most `maxPeers`.
   */
  attest?: AttestEntry[]
  /**
   * A seed's inheritances (heir.ts): [node, inc] of the dead seeds whose
   * estates its books hold; their glob keys are homed at the sender. At
   * most `maxPeers`.
   */
  estates?: AttestEntry[]
  /**
   * A heir's marks for the dead seeds it inherited lately (estate-marks.ts):
   * [dead seed, its epoch, giver, giver epoch, highest seq of that giver's
   * grants whose credit the dead seed's copied books hold]. For part of its
   * alive peers in each message; at most `maxPeers`.
   */
  estateMarks?: EstateMark[]
  /**
   * A survivor's final applied marks of seeds it settled lately
   * (estate-returns.ts): [dead seed, its epoch, highest seq of its grants
   * applied here]. The dead seed's heir takes back its grants above them. At
   * most `maxPeers`.
   */
  deadApplied?: DeadApplied[]
  /**
   * The sender's wall clock minus its calendar, ms, rounded (absent: 0).
   * With the voters' calendar offsets it places each voter's wall clock on
   * this node's calendar: a calendar does not follow a wall clock that is
   * off the median of a quorum's (cluster-core.ts `observeWall`).
   */
  wg?: number
  /**
   * A seed's sums of the members' last key lines, for the keys it
   * aggregates, when they moved (all on a full sync's first message):
   * members do not hear each other (member-sums.ts). At most `maxEntries`.
   */
  msums?: MemberSum[]
}

function parseWant (m: Record<string, unknown>, b: MessageBounds, node: string, epoch: string): Want {
  const w: Want = { v: CLUSTER_VERSION, t: 'want', node, epoch, inc: seq(m.inc, 'inc'), key: key(m.key, b), want: num(m.want, 'want') }
  if (m.more === undefined) return w
  const seen = new Set([w.key])
  w.more = list(m.more, b.maxEntries - 1, 'more').map(e => {
    const t = tuple(e, 2, 'want item')
    const k = key(t[0], b)
    if (seen.has(k)) bad(`want names key ${JSON.stringify(k)} twice`)
    seen.add(k)
    return [k, num(t[1], 'want')] as WantItem
  })
  return w
}

/** [dead seed, its epoch, seq] (see Gossip.deadApplied). */
export type DeadApplied = [dead: string, deadEpoch: string, seq: number]

/** [dead seed, its epoch, giver, giver epoch, seq] (see Gossip.estateMarks). */
export type EstateMark = [dead: string, deadEpoch: string, giver: string, giverEpoch: string, seq: number]

/** [node, incarnation]: a voter attests that incarnation dead (reclaim.ts). */
export type AttestEntry = [node: string, inc: number]

export interface Want {
  v: number
  t: 'want'
  node: string
  epoch: string
  /**
   * The sender's incarnation (as in gossip). A higher one than the receiver
   * knows is evidence of a new epoch, as a gossip of it would be (intake.ts).
   */
  inc: number
  key: string
  want: number
  /**
   * More keys of the same round to the same donor, each `[key, want]`
   * (tick-batch.ts): the keys a node asks one donor for on one tick go as
   * one want, answered by one grant of the keys given (or one `none`).
   * Distinct keys, none of them `key`.
   */
  more?: WantItem[]
}

/** [key, want]: one more key of a want. */
export type WantItem = [key: string, want: number]

/** Every key a want asks for, with how many. */
export function wantItems (w: Want): WantItem[] {
  return w.more === undefined ? [[w.key, w.want]] : [[w.key, w.want], ...w.more]
}

/** [key, amount, at]: credit `amount` once the receiver's clock reaches `at`. */
export type GrantItem = [key: string, amount: number, at: number]

export interface Grant {
  v: number
  t: 'grant'
  node: string
  epoch: string
  /** The sender's incarnation (see Want.inc). */
  inc: number
  to: string
  toEpoch: string
  seq: number
  items: GrantItem[]
}

export interface Ack {
  v: number
  t: 'ack'
  node: string
  epoch: string
  /** The sender's incarnation (see Want.inc). */
  inc: number
  applied: number
  /** The pushed grant this acks was refused (not credited): its giver takes the tokens back. */
  refused?: boolean
  /**
   * Present when the ack is a request of its own, not a grant's reply: the
   * giver's epoch whose grants to the sender are applied up to `applied`
   * (the grants that answered wants, acked once per gossip interval, only
   * to their giver). Answered `none`.
   */
  toEpoch?: string
  /**
   * In the reply to a grant addressed to an epoch of the sender's that has
   * ended, while its restart speaks for that epoch (estate-marks.ts
   * announceOwn): that epoch's final applied mark of the giver's grants. The
   * giver settles its grants to that epoch by it at once, as by a gossiped
   * mark: a restarted node that has not heard the giver (a stopping giver's
   * gossip is gone) never lists it in its gossiped marks.
   */
  ended?: number
}

export interface None {
  v: number
  t: 'none'
  node: string
  epoch: string
  /** The sender's incarnation (see Want.inc). */
  inc: number
}

/**
 * "My gossip of version `hv`, again, as message `seq` at `now`" (with
 * `prev` as a members' copy says it): a quiet node's gossip that says what
 * its last one said, in a fraction of the bytes (gossip-repeat.ts). A
 * receiver that holds that gossip reads it as it; one that does not drops
 * it (the sender's next whole gossip comes within FULL_EVERY of them).
 */
export interface Hb {
  v: number
  t: 'hb'
  node: string
  epoch: string
  inc: number
  seq: number
  now: number
  hv: number
  prev?: number
}

export type ClusterMessage = Gossip | Hb | Want | Grant | Ack | None | Jrep | Jack | Jget | Jcopy

export { DEFAULT_BOUNDS, KEY_LINE_FIELDS, MAX_CARRIES, MAX_REFUSED, type MessageBounds } from './message-fields.js'

/** Validate a decoded message from a peer. Throws E_BAD_FRAME for anything malformed. */
export function parseMessage (raw: unknown, b: MessageBounds = DEFAULT_BOUNDS): ClusterMessage {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) bad('not a map')
  const m = raw as Record<string, unknown>
  if (m.v !== CLUSTER_VERSION) bad(`unsupported version ${String(m.v)}`)
  const node = name(m.node, 'node')
  const epoch = name(m.epoch, 'epoch')
  switch (m.t) {
    case 'gossip':
      return parseGossip(m, b, CLUSTER_VERSION, node, epoch)
    case 'hb': {
      const s = seq(m.seq, 'seq')
      const prev = m.prev === undefined || m.prev === null ? undefined : seq(m.prev, 'prev')
      if (prev !== undefined && prev >= s) bad('prev must be before the message\'s own seq')
      return { v: CLUSTER_VERSION, t: 'hb', node, epoch, inc: seq(m.inc, 'inc'), seq: s, now: num(m.now, 'now'), hv: seq(m.hv, 'hv'), ...(prev === undefined ? {} : { prev }) }
    }
    case 'want':
      return parseWant(m, b, node, epoch)
    case 'grant': {
      const items = list(m.items, b.maxEntries, 'items').map(e => {
        const t = tuple(e, 3, 'grant item')
        return [key(t[0], b), num(t[1], 'amount'), num(t[2], 'at')] as GrantItem
      })
      return {
        v: CLUSTER_VERSION, t: 'grant', node, epoch, inc: seq(m.inc, 'inc'), to: name(m.to, 'to'), toEpoch: name(m.toEpoch, 'toEpoch'),
        seq: seq(m.seq, 'seq'), items
      }
    }
    case 'ack':
      return { v: CLUSTER_VERSION, t: 'ack', node, epoch, inc: seq(m.inc, 'inc'), applied: seq(m.applied, 'applied'), ...(m.refused === true ? { refused: true } : {}), ...(m.toEpoch === undefined ? {} : { toEpoch: name(m.toEpoch, 'toEpoch') }), ...(m.ended === undefined ? {} : { ended: seq(m.ended, 'ended') }) }
    case 'none':
      return { v: CLUSTER_VERSION, t: 'none', node, epoch, inc: seq(m.inc, 'inc') }
    case 'jrep':
      return parseJrep(m, CLUSTER_VERSION, node, epoch)
    case 'jack':
      return parseJack(m, CLUSTER_VERSION, node, epoch)
    case 'jget':
      return parseJget(m, CLUSTER_VERSION, node, epoch)
    case 'jcopy':
      return parseJcopy(m, CLUSTER_VERSION, node, epoch)
    default:
      return bad(`unknown type ${String(m.t)}`)
  }
}
