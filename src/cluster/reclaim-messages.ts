/**
 * The reclaim log's messages (design §3.5, §3.8) and their validation. Kept
 * apart from messages.ts so that file stays small; same rules: every field
 * from a peer is checked and bounded here, anything malformed throws
 * E_BAD_FRAME, and the driver drops and counts it.
 *
 * - prepare {slot, ballot} → promise {slot, ballot, accepted?, known?, attested?} | nack {slot, promised, through?}
 * - accept {slot, ballot, value} → accepted {slot, ballot} | nack
 * - log? {from} → log {from, through, entries}: chosen entries for catch-up
 * - a voter's gossip section {accepted, chosen} (parseGossipLog)
 *
 * In memory a value is an object (reclaim-value.ts); on the wire it is a
 * tuple `[slot, D, heir, listed]` (a few bytes per account instead of field
 * names), ballots are `[round, node]`. `toWire` and the parser convert.
 *
 * The error's `details` is `{ path, reason }`: the JSON path of the bad
 * field and a stable reason word (tests and counters key on those, not on
 * the message text).
 */
import { ErrorCodes, QuotadError } from '../errors.js'
import { CLUSTER_VERSION } from './messages.js'
import { valueDigest, type Ballot, type ChosenEntry, type ReclaimValue } from './reclaim-value.js'

export interface ReclaimHeader { v: number, node: string, epoch: string }

/** [node, inc]: an incarnation a voter has echoed and the log does not cover. */
export type KnownInc = [node: string, inc: number]
/** [node, acct, inc]: an account a voter attests (attest.ts). */
export type Attested = [node: string, acct: number, inc: number]

export interface Prepare { t: 'prepare', slot: number, ballot: Ballot }
export interface PromiseReply {
  t: 'promise'
  slot: number
  ballot: Ballot
  /** What the voter accepted in this slot, if anything. */
  accepted?: { ballot: Ballot, value: ReclaimValue }
  known?: KnownInc[]
  attested?: Attested[]
}
export interface Nack {
  t: 'nack'
  slot: number
  /** The ballot the voter promised, above the one refused. */
  promised: Ballot
  /** Set when the slot is closed at the voter: every slot ≤ through is chosen; ask it `log?`. */
  through?: number
}
export interface Accept { t: 'accept', slot: number, ballot: Ballot, value: ReclaimValue }
export interface AcceptedReply { t: 'accepted', slot: number, ballot: Ballot }
export interface LogRequest { t: 'log?', from: number }
export interface LogReply {
  t: 'log'
  from: number
  /** Every slot ≤ through is chosen at the sender. */
  through: number
  entries: ChosenEntry[]
}

export type ReclaimBody = Prepare | PromiseReply | Nack | Accept | AcceptedReply | LogRequest | LogReply
export type ReclaimMessage = ReclaimHeader & ReclaimBody

/** A voter's accepted value for an open slot, as gossiped. */
export interface GossipAccepted { slot: number, ballot: Ballot, digest: string, value: ReclaimValue }
/** The `log` section of a voter's gossip: its acceptances in open slots and the chosen tail. */
export interface GossipLog { accepted: GossipAccepted[], chosen: ChosenEntry[] }

export interface ReclaimBounds {
  /** Most dead accounts in one value. */
  maxD: number
  /** Most listed accounts in one value. */
  maxListed: number
  /** Most entries in a promise's `known` and `attested`. */
  maxPeers: number
  /** Most entries in a `log` reply and in each gossip list. */
  maxEntries: number
}

/**
 * A value at the bounds is about 40 KiB with 64-character names, under the
 * transport's 64 KiB frame; typical names make it a few KiB.
 */
export const RECLAIM_BOUNDS: ReclaimBounds = { maxD: 128, maxListed: 512, maxPeers: 1024, maxEntries: 16 }

export type BadReason = 'not-a-map' | 'version' | 'type' | 'name' | 'whole-number' | 'array' | 'too-many' | 'tuple' |
  'slot-mismatch' | 'digest'

function bad (path: string, reason: BadReason, what: string): never {
  throw new QuotadError(ErrorCodes.BAD_FRAME, `reclaim message: ${path}: ${what}`, { path, reason })
}

const NAME = /^[A-Za-z0-9._:-]{1,64}$/

function name (v: unknown, path: string): string {
  if (typeof v !== 'string' || !NAME.test(v)) bad(path, 'name', 'must be a name')
  return v as string
}

function whole (v: unknown, path: string, min = 0): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) bad(path, 'whole-number', `must be a whole number >= ${min}`)
  return v as number
}

function list (v: unknown, max: number, path: string): unknown[] {
  if (!Array.isArray(v)) bad(path, 'array', 'must be an array')
  if ((v as unknown[]).length > max) bad(path, 'too-many', `has more than ${max} entries`)
  return v as unknown[]
}

function tuple (v: unknown, n: number, path: string): unknown[] {
  if (!Array.isArray(v) || v.length !== n) bad(path, 'tuple', `must be a ${n}-tuple`)
  return v as unknown[]
}

function ballot (v: unknown, path: string): Ballot {
  const t = tuple(v, 2, path)
  return { round: whole(t[0], `${path}[0]`, 1), node: name(t[1], `${path}[1]`) }
}

function value (v: unknown, path: string, b: ReclaimBounds, slot?: number): ReclaimValue {
  const t = tuple(v, 4, path)
  const s = whole(t[0], `${path}.slot`, 1)
  if (slot !== undefined && s !== slot) bad(`${path}.slot`, 'slot-mismatch', `is ${s}, the message's slot is ${slot}`)
  const D = list(t[1], b.maxD, `${path}.D`).map((e, i) => {
    const p = `${path}.D[${i}]`
    const d = tuple(e, 4, p)
    return { node: name(d[0], `${p}.node`), acct: whole(d[1], `${p}.acct`), inc: whole(d[2], `${p}.inc`), epoch: name(d[3], `${p}.epoch`) }
  })
  const h = tuple(t[2], 3, `${path}.heir`)
  const heir = { node: name(h[0], `${path}.heir.node`), epoch: name(h[1], `${path}.heir.epoch`), acct: whole(h[2], `${path}.heir.acct`) }
  const listed = list(t[3], b.maxListed, `${path}.listed`).map((e, i) => {
    const l = tuple(e, 2, `${path}.listed[${i}]`)
    return { node: name(l[0], `${path}.listed[${i}].node`), acct: whole(l[1], `${path}.listed[${i}].acct`) }
  })
  return { slot: s, D, heir, listed }
}

function entries (v: unknown, path: string, b: ReclaimBounds): ChosenEntry[] {
  return list(v, b.maxEntries, path).map((e, i) => {
    const t = tuple(e, 2, `${path}[${i}]`)
    const slot = whole(t[0], `${path}[${i}].slot`, 1)
    return { slot, value: value(t[1], `${path}[${i}].value`, b, slot) }
  })
}

function map (raw: unknown, path: string): Record<string, unknown> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) bad(path, 'not-a-map', 'must be a map')
  return raw as Record<string, unknown>
}

/** Validate a decoded reclaim message from a peer. Throws E_BAD_FRAME with `details: {path, reason}`. */
export function parseReclaimMessage (raw: unknown, b: ReclaimBounds = RECLAIM_BOUNDS): ReclaimMessage {
  const m = map(raw, '$')
  if (m.v !== CLUSTER_VERSION) bad('v', 'version', `unsupported version ${String(m.v)}`)
  const hdr: ReclaimHeader = { v: CLUSTER_VERSION, node: name(m.node, 'node'), epoch: name(m.epoch, 'epoch') }
  switch (m.t) {
    case 'prepare':
      return { ...hdr, t: 'prepare', slot: whole(m.slot, 'slot', 1), ballot: ballot(m.ballot, 'ballot') }
    case 'promise': {
      const slot = whole(m.slot, 'slot', 1)
      const out: ReclaimMessage = { ...hdr, t: 'promise', slot, ballot: ballot(m.ballot, 'ballot') }
      if (m.accepted !== undefined && m.accepted !== null) {
        const a = tuple(m.accepted, 2, 'accepted')
        out.accepted = { ballot: ballot(a[0], 'accepted.ballot'), value: value(a[1], 'accepted.value', b, slot) }
      }
      if (m.known !== undefined && m.known !== null) {
        out.known = list(m.known, b.maxPeers, 'known').map((e, i) => {
          const t = tuple(e, 2, `known[${i}]`)
          return [name(t[0], `known[${i}].node`), whole(t[1], `known[${i}].inc`)] as KnownInc
        })
      }
      if (m.attested !== undefined && m.attested !== null) {
        out.attested = list(m.attested, b.maxPeers, 'attested').map((e, i) => {
          const t = tuple(e, 3, `attested[${i}]`)
          return [name(t[0], `attested[${i}].node`), whole(t[1], `attested[${i}].acct`), whole(t[2], `attested[${i}].inc`)] as Attested
        })
      }
      return out
    }
    case 'nack': {
      const promised = m.promised === null || m.promised === undefined ? undefined : ballot(m.promised, 'promised')
      const through = m.through === null || m.through === undefined ? undefined : whole(m.through, 'through')
      // A nack says either "promised higher" or "closed": one of the two must be there.
      if (promised === undefined && through === undefined) bad('promised', 'tuple', 'a nack needs promised or through')
      return { ...hdr, t: 'nack', slot: whole(m.slot, 'slot', 1), promised: promised ?? { round: 0, node: '' }, ...(through === undefined ? {} : { through }) }
    }
    case 'accept': {
      const slot = whole(m.slot, 'slot', 1)
      return { ...hdr, t: 'accept', slot, ballot: ballot(m.ballot, 'ballot'), value: value(m.value, 'value', b, slot) }
    }
    case 'accepted':
      return { ...hdr, t: 'accepted', slot: whole(m.slot, 'slot', 1), ballot: ballot(m.ballot, 'ballot') }
    case 'log?':
      return { ...hdr, t: 'log?', from: whole(m.from, 'from', 1) }
    case 'log': {
      const from = whole(m.from, 'from', 1)
      const es = entries(m.entries, 'entries', b)
      return { ...hdr, t: 'log', from, through: whole(m.through, 'through'), entries: es }
    }
    default:
      return bad('t', 'type', `unknown type ${String(m.t)}`)
  }
}

/** Validate a voter gossip's `log` section. Throws E_BAD_FRAME; a digest that is not its value's is refused. */
export function parseGossipLog (raw: unknown, b: ReclaimBounds = RECLAIM_BOUNDS): GossipLog {
  const m = map(raw, 'log')
  const accepted = list(m.accepted, b.maxEntries, 'log.accepted').map((e, i) => {
    const p = `log.accepted[${i}]`
    const t = tuple(e, 4, p)
    const slot = whole(t[0], `${p}.slot`, 1)
    const v = value(t[3], `${p}.value`, b, slot)
    if (typeof t[2] !== 'string' || t[2] !== valueDigest(v)) bad(`${p}.digest`, 'digest', 'is not the digest of the value')
    return { slot, ballot: ballot(t[1], `${p}.ballot`), digest: t[2] as string, value: v }
  })
  return { accepted, chosen: entries(m.chosen, 'log.chosen', b) }
}

function wireBallot (x: Ballot): [number, string] {
  return [x.round, x.node]
}

export function wireValue (v: ReclaimValue): unknown[] {
  return [v.slot, v.D.map(d => [d.node, d.acct, d.inc, d.epoch]), [v.heir.node, v.heir.epoch, v.heir.acct], v.listed.map(l => [l.node, l.acct])]
}

/** The wire form (plain arrays and maps, for msgpack) of a message; `parseReclaimMessage(toWire(m))` gives m back. */
export function toWire (m: ReclaimMessage): Record<string, unknown> {
  const hdr = { v: m.v, t: m.t, node: m.node, epoch: m.epoch }
  switch (m.t) {
    case 'prepare': case 'accepted':
      return { ...hdr, slot: m.slot, ballot: wireBallot(m.ballot) }
    case 'promise':
      return {
        ...hdr, slot: m.slot, ballot: wireBallot(m.ballot),
        ...(m.accepted === undefined ? {} : { accepted: [wireBallot(m.accepted.ballot), wireValue(m.accepted.value)] }),
        ...(m.known === undefined ? {} : { known: m.known }),
        ...(m.attested === undefined ? {} : { attested: m.attested })
      }
    case 'nack':
      return { ...hdr, slot: m.slot, ...(m.promised.round === 0 ? {} : { promised: wireBallot(m.promised) }), ...(m.through === undefined ? {} : { through: m.through }) }
    case 'accept':
      return { ...hdr, slot: m.slot, ballot: wireBallot(m.ballot), value: wireValue(m.value) }
    case 'log?':
      return { ...hdr, from: m.from }
    case 'log':
      return { ...hdr, from: m.from, through: m.through, entries: m.entries.map(e => [e.slot, wireValue(e.value)]) }
  }
}

/** The wire form of a gossip `log` section. */
export function gossipLogToWire (g: GossipLog): Record<string, unknown> {
  return {
    accepted: g.accepted.map(a => [a.slot, wireBallot(a.ballot), a.digest, wireValue(a.value)]),
    chosen: g.chosen.map(e => [e.slot, wireValue(e.value)])
  }
}
