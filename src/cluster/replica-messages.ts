/**
 * The messages of journal replication (replication.ts, replica-store.ts),
 * and their validation. A seed that holds a share sends its books journal
 * to the other seeds, so that its books can be read after it dies for good
 * (cluster-protocol.md, "The heir of a dead seed"):
 *
 * - jrep (request, writer -> replica): `data` is the writer's journal text
 *   of generation `gen` from character `offset` on. A generation starts
 *   with a checkpoint line (offset 0) and grows by batches; a new checkpoint
 *   starts the next generation.
 * - jack (reply): what the replica has of that writer: its incarnation and
 *   generation, how many characters of it (`have`), and whether those are
 *   on its disk (`durable`; false only while a new generation's checkpoint
 *   line is still arriving in parts, and then the replica's disk still holds
 *   the previous generation).
 *
 * - jget (request, heir -> replica): "what do you hold of `writer`'s
 *   journal?": the copy's text from `from` if its incarnation and generation
 *   are `inc` and `gen`, else from its start (heir.ts reads a dead seed's
 *   copies with it).
 * - jcopy (reply): the replica's copy of `writer` (incarnation, generation,
 *   characters `have`; 0 and 0 when it holds none) and `data`, its text from
 *   `offset`, at most MAX_CHUNK characters.
 *
 * Offsets count UTF-16 code units (JavaScript string length); a chunk never
 * splits a surrogate pair, so every stored text is valid UTF-8 on disk.
 *
 * Compressed jreps. A replica that reads them says so in every jack (`z:
 * true`); from then on its writer sends a jrep's text as `z`, the raw
 * deflate of its UTF-8, instead of `data` (`encodeJrep`). The parser
 * inflates it, at most MAX_CHUNK × 3 bytes (a bomb is a bad message), so
 * everything after it sees `data` as before. Journal text is JSON lines
 * that repeat keys and epochs: 2,085 bytes of it deflate to 398 (keys100 at
 * 10 nodes), and jreps were most of what a node sent at 10 and 50 nodes. A
 * replica that never says `z` (an older one) keeps getting `data`.
 *
 * Deflated against what the replica holds (protocol version 8). A jrep
 * that continues a generation (`offset` > 0) is deflated with, as its
 * preset dictionary, the last `d` characters of the journal text before
 * `offset` (at most DICT_CHARS), and says `d`. The replica holds exactly
 * those characters (its copy is a prefix of the writer's generation), so
 * the lines' repeated keys, epochs and peers cost a back-reference: at
 * keys100 with 5 seeds of 50 nodes a jrep deflated 337 -> 210 bytes.
 * A replica that lacks them (its copy is shorter than `offset`) takes
 * nothing from it, and its jack says what it has, as for any gap.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { ErrorCodes, QuotadError } from '../errors.js'

/** Most characters of journal text in one jrep: at most 3 bytes each in UTF-8, so a jrep stays under the 64 KiB request bound. */
export const MAX_CHUNK = 16_384

export interface Jrep {
  v: number
  t: 'jrep'
  /** The writer, its epoch and incarnation. */
  node: string
  epoch: string
  inc: number
  gen: number
  offset: number
  data: string
  /**
   * Text deflated against the `d` characters of the writer's journal just
   * before `offset` (see the header): `data` is '' until the replica, which
   * holds those characters, inflates it (`unpackJrep`).
   */
  packed?: { z: Uint8Array, d: number }
}

export interface Jack {
  v: number
  t: 'jack'
  /** The replica. */
  node: string
  epoch: string
  /** What the replica has of the writer: incarnation, generation, characters, on disk or not. */
  inc: number
  gen: number
  have: number
  durable: boolean
  /** The replica reads compressed jreps (`z`, see the header). */
  z?: true
}

export interface Jget {
  v: number
  t: 'jget'
  /** The heir asking. */
  node: string
  epoch: string
  writer: string
  inc: number
  gen: number
  from: number
}

export interface Jcopy {
  v: number
  t: 'jcopy'
  /** The replica answering. */
  node: string
  epoch: string
  writer: string
  inc: number
  gen: number
  have: number
  offset: number
  data: string
}

function bad (what: string): never {
  throw new QuotadError(ErrorCodes.BAD_FRAME, `cluster message: ${what}`)
}

function whole (v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) bad(`${what} must be a whole number`)
  return v as number
}

/** The most characters of preceding journal text a jrep is deflated against: at most 3 bytes each, inside deflate's 32 KiB window. */
export const DICT_CHARS = 10_000

/**
 * A jrep as it goes on the wire: as it is (`z` null: the replica does not
 * read compressed jreps), or its text deflated (`z`), against `z` as the
 * preset dictionary when that is not empty: the journal text just before
 * the jrep's offset (see the header).
 */
export function encodeJrep (msg: Jrep, z: string | null): Jrep | Omit<Jrep, 'data'> & { z: Uint8Array, d?: number } {
  if (z === null) return msg
  const { data, packed: _, ...rest } = msg
  const raw = Buffer.from(data, 'utf8')
  if (z.length === 0) return { ...rest, z: deflateRawSync(raw) }
  return { ...rest, z: deflateRawSync(raw, { dictionary: Buffer.from(z, 'utf8') }), d: z.length }
}

/** A packed jrep's text, given the journal text before its offset (`preceding`, at least `d` characters), or null if it does not inflate to a chunk. */
export function unpackJrep (m: Jrep, preceding: string): Jrep | null {
  if (m.packed === undefined) return m
  const { z, d } = m.packed
  if (preceding.length < d) return null
  let data: string
  try {
    data = inflateRawSync(z, { maxOutputLength: MAX_CHUNK * 3, dictionary: Buffer.from(preceding.slice(preceding.length - d), 'utf8') }).toString('utf8')
  } catch {
    return null
  }
  if (data.length === 0 || data.length > MAX_CHUNK) return null
  const { packed: _, ...rest } = m
  return { ...rest, data }
}

/** A jrep's text: `data`, or `z` inflated within the chunk bound. */
function jrepText (m: Record<string, unknown>): unknown {
  if (m.z === undefined) return m.data
  if (m.data !== undefined) bad('a jrep has data or z, not both')
  if (!(m.z instanceof Uint8Array)) bad('z must be bytes')
  try {
    return inflateRawSync(m.z as Uint8Array, { maxOutputLength: MAX_CHUNK * 3 }).toString('utf8')
  } catch {
    return bad(`z must inflate to at most ${MAX_CHUNK * 3} bytes of text`)
  }
}

/** Validate the jrep fields (node and epoch are checked by parseMessage). */
export function parseJrep (m: Record<string, unknown>, v: number, node: string, epoch: string): Jrep {
  const offset = whole(m.offset, 'offset')
  if (m.d !== undefined) {
    // Deflated against the text before `offset`: only the replica holding it can inflate it (ReplicaStore.accept).
    const d = whole(m.d, 'd')
    if (d < 1 || d > DICT_CHARS || d > offset) bad(`d must be 1 to ${DICT_CHARS} and at most the offset`)
    if (m.data !== undefined || !(m.z instanceof Uint8Array) || m.z.length > MAX_CHUNK * 3) bad('a jrep with d has z, bytes of at most a chunk\'s bound, and no data')
    return { v, t: 'jrep', node, epoch, inc: whole(m.inc, 'inc'), gen: whole(m.gen, 'gen'), offset, data: '', packed: { z: m.z as Uint8Array, d } }
  }
  const data = jrepText(m)
  if (typeof data !== 'string' || data.length === 0 || data.length > MAX_CHUNK) bad(`data must be a string of 1 to ${MAX_CHUNK} characters`)
  return { v, t: 'jrep', node, epoch, inc: whole(m.inc, 'inc'), gen: whole(m.gen, 'gen'), offset, data: data as string }
}

export function parseJack (m: Record<string, unknown>, v: number, node: string, epoch: string): Jack {
  if (typeof m.durable !== 'boolean') bad('durable must be a boolean')
  return { v, t: 'jack', node, epoch, inc: whole(m.inc, 'inc'), gen: whole(m.gen, 'gen'), have: whole(m.have, 'have'), durable: m.durable as boolean, ...(m.z === true ? { z: true as const } : {}) }
}

const WRITER = /^[A-Za-z0-9._:-]{1,64}$/

function writer (v: unknown): string {
  if (typeof v !== 'string' || !WRITER.test(v)) bad('writer must be a name')
  return v as string
}

export function parseJget (m: Record<string, unknown>, v: number, node: string, epoch: string): Jget {
  return { v, t: 'jget', node, epoch, writer: writer(m.writer), inc: whole(m.inc, 'inc'), gen: whole(m.gen, 'gen'), from: whole(m.from, 'from') }
}

export function parseJcopy (m: Record<string, unknown>, v: number, node: string, epoch: string): Jcopy {
  if (typeof m.data !== 'string' || m.data.length > MAX_CHUNK) bad(`data must be a string of at most ${MAX_CHUNK} characters`)
  const have = whole(m.have, 'have')
  const offset = whole(m.offset, 'offset')
  if (offset + (m.data as string).length > have) bad('data must lie within the copy')
  return { v, t: 'jcopy', node, epoch, writer: writer(m.writer), inc: whole(m.inc, 'inc'), gen: whole(m.gen, 'gen'), have, offset, data: m.data as string }
}

/** The end of a chunk of `text` starting at `from`: at most MAX_CHUNK characters, never inside a surrogate pair. */
export function chunkEnd (text: string, from: number): number {
  let end = Math.min(text.length, from + MAX_CHUNK)
  if (end < text.length && end > from + 1) {
    const c = text.charCodeAt(end - 1)
    if (c >= 0xd800 && c <= 0xdbff) end--
  }
  return end
}
