/**
 * The cluster's messages, as plain objects (msgpack maps on the wire), and
 * their validation. Every field from a peer is checked and bounded here, so
 * the state machine only ever sees well-formed messages; anything else throws
 * E_BAD_FRAME and the driver drops and counts it.
 *
 * - gossip (broadcast every interval): who I am, my rule hashes, a batched
 *   delta of the keys that changed (held, outstanding, rate, burns, and the
 *   tokens deferred or in transit out: with held and outstanding, the key's
 *   custody here, shortfall.ts), and my ledger high-water marks (grants
 *   applied from each peer epoch).
 * - want (request): "send me up to `want` tokens of `key`".
 * - grant (a reply to want, or a push: handoff, retransmit, return-home):
 *   tokens moved from giver to receiver, with a per-pair sequence number.
 * - ack (reply to a pushed grant), none (reply to a want with no surplus).
 *
 * Every message names its sender's node, epoch and incarnation (`inc`).
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import type { HeardEntry } from './lease.js'
import { parseJack, parseJcopy, parseJget, parseJrep, type Jack, type Jcopy, type Jget, type Jrep } from './replica-messages.js'

/**
 * The cluster protocol version. 3: want, grant, ack and none carry their
 * sender's `inc` (new-epoch evidence, intake.ts), and a gossip key line has
 * 8 fields (deferred and inTransitOut, for the shortfall). Nodes of another
 * version share no gossip topic (`gossipTopic`) and refuse each other's
 * requests. 4: jrep and jack, the seeds' journal copies (replica-messages.ts).
 * 5: jget and jcopy (a heir reads a dead seed's copies), and a seed's gossip
 * names the seeds it inherited (`estates`, heir.ts).
 */
export const CLUSTER_VERSION = 5

/** The gossip topic of a cluster: versioned, so nodes of another protocol version never hear each other. */
export function gossipTopic (cluster: string): string {
  return `quotad/${cluster}/gossip/${CLUSTER_VERSION}`
}

/**
 * One key's line in a gossip delta: [key, held, outstanding, rate tokens/s,
 * owed (this node's unpaid burn), debts (the unpaid burns elsewhere this
 * node knows of: what it keeps unspent, caution.ts), deferred (tokens
 * received, not spendable until their `at`), inTransitOut (tokens in this
 * node's unacked grants of the key)]. held + outstanding + deferred +
 * inTransitOut is the key's custody here (shortfall.ts).
 */
export type GossipKey = [key: string, held: number, outstanding: number, rate: number, owed: number, debts: number, deferred: number, inTransitOut: number]

/** Fields in a gossip key line. */
export const KEY_LINE_FIELDS = 8
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
}

export interface None {
  v: number
  t: 'none'
  node: string
  epoch: string
  /** The sender's incarnation (see Want.inc). */
  inc: number
}

export type ClusterMessage = Gossip | Want | Grant | Ack | None | Jrep | Jack | Jget | Jcopy

export interface MessageBounds {
  maxKeyBytes: number
  /** Most keys (or grant items) in one message. */
  maxEntries: number
  /** Most rules in one gossip. */
  maxRules: number
  /** Most ack entries (peers) in one gossip. */
  maxPeers: number
  /** Most members in one seed's gossip. */
  maxMembers: number
}

export const DEFAULT_BOUNDS: MessageBounds = { maxKeyBytes: 256, maxEntries: 4096, maxRules: 10_000, maxPeers: 1024, maxMembers: 300 }

/** Most refusals a seed's gossip lists. */
export const MAX_REFUSED = 16

/** Most epochs a gossip's `carries` lists. */
export const MAX_CARRIES = 8

function bad (what: string): never {
  throw new QuotadError(ErrorCodes.BAD_FRAME, `cluster message: ${what}`)
}

const NAME = /^[A-Za-z0-9._:-]{1,64}$/
/** A peer id as the transport prints it (base58; the simulator's are `id:<name>`). */
const PEER_ID = /^[A-Za-z0-9._:-]{1,100}$/

function name (v: unknown, what: string): string {
  if (typeof v !== 'string' || !NAME.test(v)) bad(`${what} must be a name`)
  return v as string
}

function num (v: unknown, what: string, min = 0): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) bad(`${what} must be a finite number >= ${min}`)
  return v as number
}

function seq (v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) bad(`${what} must be a whole number`)
  return v as number
}

function key (v: unknown, b: MessageBounds): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > b.maxKeyBytes || Buffer.byteLength(v) > b.maxKeyBytes) bad('key must be a string within the key bound')
  return v as string
}

function list (v: unknown, max: number, what: string): unknown[] {
  if (!Array.isArray(v)) bad(`${what} must be an array`)
  if ((v as unknown[]).length > max) bad(`${what} has more than ${max} entries`)
  return v as unknown[]
}

function tuple (v: unknown, n: number, what: string): unknown[] {
  if (!Array.isArray(v) || v.length !== n) bad(`${what} must be a ${n}-tuple`)
  return v as unknown[]
}

/** Validate a decoded message from a peer. Throws E_BAD_FRAME for anything malformed. */
export function parseMessage (raw: unknown, b: MessageBounds = DEFAULT_BOUNDS): ClusterMessage {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) bad('not a map')
  const m = raw as Record<string, unknown>
  if (m.v !== CLUSTER_VERSION) bad(`unsupported version ${String(m.v)}`)
  const node = name(m.node, 'node')
  const epoch = name(m.epoch, 'epoch')
  switch (m.t) {
    case 'gossip': {
      if (m.rules === null || typeof m.rules !== 'object' || Array.isArray(m.rules)) bad('rules must be a map')
      const rules: Record<string, string> = {}
      const entries = Object.entries(m.rules as Record<string, unknown>)
      if (entries.length > b.maxRules) bad('too many rules')
      for (const [r, h] of entries) {
        if (typeof h !== 'string' || h.length > 64) bad('rule hash must be a string')
        rules[name(r, 'rule name')] = h as string
      }
      const keys = list(m.keys, b.maxEntries, 'keys').map(e => {
        const t = tuple(e, KEY_LINE_FIELDS, 'key entry')
        // debts -1: "unknown, spend nothing" (Infinity does not survive msgpack's integer paths).
        const debts = num(t[5], 'debts', -1)
        return [key(t[0], b), num(t[1], 'held'), num(t[2], 'outstanding'), num(t[3], 'rate'), num(t[4], 'owed'), debts < 0 ? Infinity : debts,
          num(t[6], 'deferred'), num(t[7], 'inTransitOut')] as GossipKey
      })
      const pending = list(m.pending, b.maxRules, 'pending').map(r => name(r, 'pending rule'))
      const sync = m.sync === undefined || m.sync === null ? undefined : seq(m.sync, 'sync')
      if (sync !== undefined && sync > (m.seq as number)) bad('sync must not be after the message\'s own seq')
      const carries = list(m.carries, MAX_CARRIES, 'carries').map(r => name(r, 'carried epoch'))
      const members = m.members === undefined || m.members === null
        ? undefined
        : list(m.members, b.maxMembers, 'members').map(e => {
          const t = tuple(e, 2, 'member')
          if (typeof t[1] !== 'string' || !PEER_ID.test(t[1])) bad('member peer id must be a peer id')
          return [name(t[0], 'member name'), t[1]] as [string, string]
        })
      const refused = m.refused === undefined || m.refused === null
        ? undefined
        : list(m.refused, MAX_REFUSED, 'refused').map(e => {
          const t = tuple(e, 2, 'refusal')
          if (typeof t[1] !== 'string' || !PEER_ID.test(t[1])) bad('refused peer id must be a peer id')
          return [name(t[0], 'refused name'), t[1]] as [string, string]
        })
      const decay = m.decay === undefined || m.decay === null
        ? undefined
        : list(m.decay, keys.length, 'decay').map(i => seq(i, 'decay index') < keys.length ? i as number : bad('decay index must name a key line'))
      const cfg = typeof m.cfg === 'string' && m.cfg.length <= 64 ? m.cfg : bad('cfg must be a hash')
      const acks = list(m.acks, b.maxPeers, 'acks').map(e => {
        const t = tuple(e, 3, 'ack entry')
        return [name(t[0], 'ack node'), name(t[1], 'ack epoch'), seq(t[2], 'applied')] as GossipAck
      })
      if (m.leaving !== undefined && m.leaving !== null && typeof m.leaving !== 'boolean') bad('leaving must be a boolean')
      if (m.fenced !== undefined && m.fenced !== null && typeof m.fenced !== 'boolean') bad('fenced must be a boolean')
      const heard = m.heard === undefined || m.heard === null
        ? undefined
        : list(m.heard, b.maxPeers, 'heard').map(e => {
          const t = tuple(e, 3, 'heard entry')
          return [name(t[0], 'heard node'), seq(t[1], 'heard inc'), seq(t[2], 'heard seq')] as HeardEntry
        })
      if (m.alloc !== undefined && m.alloc !== null && typeof m.alloc !== 'boolean') bad('alloc must be a boolean')
      const attest = m.attest === undefined || m.attest === null
        ? undefined
        : list(m.attest, b.maxPeers, 'attest').map(e => {
          const t = tuple(e, 2, 'attest entry')
          return [name(t[0], 'attest node'), seq(t[1], 'attest inc')] as AttestEntry
        })
      const estates = m.estates === undefined || m.estates === null
        ? undefined
        : list(m.estates, b.maxPeers, 'estates').map(e => {
          const t = tuple(e, 2, 'estate entry')
          return [name(t[0], 'estate node'), seq(t[1], 'estate inc')] as AttestEntry
        })
      const estateMarks = m.estateMarks === undefined || m.estateMarks === null
        ? undefined
        : list(m.estateMarks, b.maxPeers, 'estateMarks').map(e => {
          const t = tuple(e, 5, 'estate mark')
          return [name(t[0], 'mark dead'), name(t[1], 'mark dead epoch'), name(t[2], 'mark giver'), name(t[3], 'mark giver epoch'), seq(t[4], 'mark seq')] as EstateMark
        })
      const deadApplied = m.deadApplied === undefined || m.deadApplied === null
        ? undefined
        : list(m.deadApplied, b.maxPeers, 'deadApplied').map(e => {
          const t = tuple(e, 3, 'dead applied entry')
          return [name(t[0], 'applied dead'), name(t[1], 'applied dead epoch'), seq(t[2], 'applied seq')] as DeadApplied
        })
      return {
        v: CLUSTER_VERSION, t: 'gossip', node, epoch, inc: seq(m.inc, 'inc'), seq: seq(m.seq, 'seq'), now: num(m.now, 'now'),
        pending, ...(sync === undefined ? {} : { sync }), carries, cfg, ...(members === undefined ? {} : { members }), ...(refused === undefined ? {} : { refused }), rules, keys, ...(decay === undefined || decay.length === 0 ? {} : { decay }), acks, ...(m.leaving === true ? { leaving: true } : {}),
        ...(m.fenced === true ? { fenced: true } : {}), ...(heard === undefined ? {} : { heard }),
        ...(m.alloc === false ? { alloc: false as const } : {}), ...(attest === undefined || attest.length === 0 ? {} : { attest }),
        ...(estates === undefined || estates.length === 0 ? {} : { estates }),
        ...(estateMarks === undefined || estateMarks.length === 0 ? {} : { estateMarks }),
        ...(deadApplied === undefined || deadApplied.length === 0 ? {} : { deadApplied })
      }
    }
    case 'want':
      return { v: CLUSTER_VERSION, t: 'want', node, epoch, inc: seq(m.inc, 'inc'), key: key(m.key, b), want: num(m.want, 'want') }
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
      return { v: CLUSTER_VERSION, t: 'ack', node, epoch, inc: seq(m.inc, 'inc'), applied: seq(m.applied, 'applied'), ...(m.refused === true ? { refused: true } : {}), ...(m.toEpoch === undefined ? {} : { toEpoch: name(m.toEpoch, 'toEpoch') }) }
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
