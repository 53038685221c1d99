/**
 * A gossip's bytes on the wire, in the daemon and the simulator alike.
 *
 * A gossip goes deflated (raw deflate, RFC 1951, with the preset dictionary
 * below) inside a small msgpack envelope, `{v, t: 'gz', z: <bin>}`, when
 * that is smaller than its plain msgpack; otherwise plain. Why: what a node
 * receives is nearly all gossip (every seed's reaches every node), and a
 * gossip is mostly key lines that repeat their key's prefix, small integers
 * and field names. Measured in the simulator (keys100, seed 1, 2026-11-27):
 * a member's gossip at 200 nodes of which 5 seeds, 634 -> 257 bytes; a
 * seed's at 50 seeds, 1,385 -> 477. Deflating takes about 30 µs and
 * inflating under 10 µs per gossip here, four times a second per node.
 *
 * Decisions never see the difference: the receiver gets the same message.
 *
 * Bounds (a bomb is a bad message): the envelope is at most the transport's
 * message bound, and `z` must inflate to at most GOSSIP_MAX_INFLATED bytes,
 * the bound a plain gossip already had on the wire. An envelope inside an
 * envelope is refused.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { bad, DEFAULT_BOUNDS, type MessageBounds } from './message-fields.js'
import { CLUSTER_VERSION, parseMessage, type ClusterMessage, type Gossip, type Hb } from './messages.js'
import { wire } from './wire.js'

/** Most bytes a gossip may inflate to: the transport's bound on one message (transport/types.ts). */
export const GOSSIP_MAX_INFLATED = 64 * 1024

/**
 * The preset dictionary: a gossip's field names as msgpack fixstrs, the
 * likeliest last. Part of the protocol: both ends must use these bytes, so
 * it is spelled out here rather than produced by a msgpack library.
 */
const FIELDS = [
  'prev', 'estateMarks', 'deadApplied', 'estates', 'attest', 'refused', 'members', 'leaving', 'spending', 'alloc', 'fenced',
  'sync', 'pending', 'carries', 'cfg', 'rules', 'decay', 'acks', 'heard', 'msums', 'now', 'seq', 'inc', 'epoch',
  'node', 't', 'gossip', 'v', 'keys'
]
export const GOSSIP_DICTIONARY: Buffer = Buffer.concat(FIELDS.map(f => Buffer.concat([Buffer.from([0xa0 | f.length]), Buffer.from(f, 'ascii')])))

/**
 * The lists a gossip must have that are most often empty: left out on the
 * wire when empty, read back as empty (gossip-parse.ts). A quiet member's
 * gossip and a seed's members' copy have all four empty: about 14 of their
 * ~120 bytes, deflated.
 */
const OPTIONAL_EMPTY = ['pending', 'carries', 'keys', 'acks'] as const

/** `msg` less its empty OPTIONAL_EMPTY lists (the same object when none is empty). */
function compact (msg: Gossip): Partial<Gossip> {
  if (OPTIONAL_EMPTY.every(f => msg[f].length > 0)) return msg
  const out: Partial<Gossip> = { ...msg }
  for (const f of OPTIONAL_EMPTY) if (msg[f].length === 0) delete out[f]
  return out
}

/** An `hb` on the wire: `[v, 'hb', node, epoch, inc, seq, now, hv, prev?]` (gossip-repeat.ts), never deflated. */
function encodeHb (h: Hb): Uint8Array {
  const a: unknown[] = [h.v, 'hb', h.node, h.epoch, h.inc, h.seq, h.now, h.hv]
  if (h.prev !== undefined) a.push(h.prev)
  return wire.pack(a)
}

/** A gossip's bytes: deflated in an envelope when that is smaller; an `hb` as a short array. */
export function encodeGossip (msg: Gossip | Hb): Uint8Array {
  if (msg.t === 'hb') return encodeHb(msg)
  const plain = wire.pack(compact(msg))
  const z = deflateRawSync(plain, { dictionary: GOSSIP_DICTIONARY })
  // The envelope's own fields take 15 bytes or so.
  if (z.length + 16 >= plain.length) return plain
  return wire.pack({ v: CLUSTER_VERSION, t: 'gz', z })
}

/** A message from a gossip's bytes: a plain one, or an envelope's inflated; validated by parseMessage either way. */
export function decodeGossip (data: Uint8Array, bounds: MessageBounds = DEFAULT_BOUNDS): ClusterMessage {
  const raw: unknown = wire.unpack(data)
  if (Array.isArray(raw)) {
    if (raw[1] !== 'hb' || raw.length < 8 || raw.length > 9) bad('a gossip array must be an hb of 8 or 9 fields')
    return parseMessage({ v: raw[0], t: 'hb', node: raw[2], epoch: raw[3], inc: raw[4], seq: raw[5], now: raw[6], hv: raw[7], prev: raw[8] }, bounds)
  }
  if (raw !== null && typeof raw === 'object' && (raw as Record<string, unknown>).t === 'gz') {
    const env = raw as Record<string, unknown>
    if (env.v !== CLUSTER_VERSION) bad(`unsupported version ${String(env.v)}`)
    if (!(env.z instanceof Uint8Array)) bad('gz: z must be bytes')
    let inner: Buffer
    try {
      inner = inflateRawSync(env.z, { dictionary: GOSSIP_DICTIONARY, maxOutputLength: GOSSIP_MAX_INFLATED })
    } catch {
      bad(`gz: z must inflate to at most ${GOSSIP_MAX_INFLATED} bytes of a gossip`)
    }
    const m: unknown = wire.unpack(inner)
    if (m !== null && typeof m === 'object' && (m as Record<string, unknown>).t === 'gz') bad('gz: an envelope inside an envelope')
    return parseMessage(m, bounds)
  }
  return parseMessage(raw, bounds)
}
