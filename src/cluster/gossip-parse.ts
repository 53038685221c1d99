/**
 * A gossip's fields, checked and bounded (messages.ts parseMessage calls
 * this for `t: "gossip"`). Apart because a gossip has more fields than all
 * the other messages together; the rules for each are in message-fields.ts.
 */
import type { HeardEntry } from './lease.js'
import { bad, KEY_LINE_FIELDS, key, list, MAX_CARRIES, MAX_REFUSED, name, num, PEER_ID, seq, tuple, type MessageBounds } from './message-fields.js'
import type { AttestEntry, DeadApplied, EstateMark, Gossip, GossipAck, GossipKey, MemberSum } from './messages.js'

/** The most a gossip's `wg` (its sender's wall clock minus its calendar) may say: a year. */
export const MAX_WALL_GAP_MS = 366 * 24 * 3600 * 1000

/** Validate gossip `m` (its version, node and epoch already checked by parseMessage). */
export function parseGossip (m: Record<string, unknown>, b: MessageBounds, v: number, node: string, epoch: string): Gossip {
  if (m.rules === null || typeof m.rules !== 'object' || Array.isArray(m.rules)) bad('rules must be a map')
  const rules: Record<string, string> = {}
  const entries = Object.entries(m.rules as Record<string, unknown>)
  if (entries.length > b.maxRules) bad('too many rules')
  for (const [r, h] of entries) {
    if (typeof h !== 'string' || h.length > 64) bad('rule hash must be a string')
    rules[name(r, 'rule name')] = h as string
  }
  // An empty list may be left out on the wire (gossip-codec.ts): absent reads as empty.
  const keys = list(m.keys ?? [], b.maxEntries, 'keys').map(e => {
    const t = tuple(e, KEY_LINE_FIELDS, 'key entry')
    // debts -1: "unknown, spend nothing" (Infinity does not survive msgpack's integer paths).
    const debts = num(t[5], 'debts', -1)
    return [key(t[0], b), num(t[1], 'held'), num(t[2], 'outstanding'), num(t[3], 'rate'), num(t[4], 'owed'), debts < 0 ? Infinity : debts,
      num(t[6], 'deferred'), num(t[7], 'inTransitOut')] as GossipKey
  })
  const pending = list(m.pending ?? [], b.maxRules, 'pending').map(r => name(r, 'pending rule'))
  const sync = m.sync === undefined || m.sync === null ? undefined : seq(m.sync, 'sync')
  // A wall clock a year off its calendar says nothing useful; bounded so the median stays a number.
  const wg = m.wg === undefined || m.wg === null ? undefined : num(m.wg, 'wg', -MAX_WALL_GAP_MS)
  if (wg !== undefined && wg > MAX_WALL_GAP_MS) bad(`wg must be within ${MAX_WALL_GAP_MS} ms`)
  if (sync !== undefined && sync > (m.seq as number)) bad('sync must not be after the message\'s own seq')
  const prev = m.prev === undefined || m.prev === null ? undefined : seq(m.prev, 'prev')
  const hv = m.hv === undefined || m.hv === null ? undefined : seq(m.hv, 'hv')
  if (prev !== undefined && prev >= (m.seq as number)) bad('prev must be before the message\'s own seq')
  const carries = list(m.carries ?? [], MAX_CARRIES, 'carries').map(r => name(r, 'carried epoch'))
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
  const acks = list(m.acks ?? [], b.maxPeers, 'acks').map(e => {
    const t = tuple(e, 3, 'ack entry')
    return [name(t[0], 'ack node'), name(t[1], 'ack epoch'), seq(t[2], 'applied')] as GossipAck
  })
  if (m.leaving !== undefined && m.leaving !== null && typeof m.leaving !== 'boolean') bad('leaving must be a boolean')
  if (m.fenced !== undefined && m.fenced !== null && typeof m.fenced !== 'boolean') bad('fenced must be a boolean')
  if (m.nolease !== undefined && m.nolease !== null && typeof m.nolease !== 'boolean') bad('nolease must be a boolean')
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
  const msums = m.msums === undefined || m.msums === null
    ? undefined
    : list(m.msums, b.maxEntries, 'msums').map(e => {
      const t = tuple(e, 5, 'member sum')
      // Custody may be negative (a node's own word, within ±stock: shortfall.ts), and so may a sum of it: a member that
      // owes a burn after a partition. Finite, as every number here.
      return [key(t[0], b), num(t[1], 'members held'), num(t[2], 'members rate'), num(t[3], 'members custody', -Number.MAX_VALUE), num(t[4], 'members spending')] as MemberSum
    })
  return {
    v, t: 'gossip', node, epoch, inc: seq(m.inc, 'inc'), seq: seq(m.seq, 'seq'), now: num(m.now, 'now'),
    pending, ...(sync === undefined ? {} : { sync }), ...(wg === undefined || wg === 0 ? {} : { wg }), ...(prev === undefined ? {} : { prev }), ...(hv === undefined ? {} : { hv }), carries, cfg, ...(members === undefined ? {} : { members }), ...(refused === undefined ? {} : { refused }), rules, keys, ...(decay === undefined || decay.length === 0 ? {} : { decay }), acks, ...(m.leaving === true ? { leaving: true } : {}),
    ...(m.fenced === true ? { fenced: true } : {}), ...(m.nolease === true ? { nolease: true } : {}), ...(heard === undefined ? {} : { heard }),
    ...(m.alloc === false ? { alloc: false as const } : {}), ...(attest === undefined || attest.length === 0 ? {} : { attest }),
    ...(estates === undefined || estates.length === 0 ? {} : { estates }),
    ...(estateMarks === undefined || estateMarks.length === 0 ? {} : { estateMarks }),
    ...(deadApplied === undefined || deadApplied.length === 0 ? {} : { deadApplied }),
    ...(msums === undefined || msums.length === 0 ? {} : { msums })
  }
}
