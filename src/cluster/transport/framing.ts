/**
 * Framing for the `/quotad/transfer/1.0.0` stream protocol (each direction
 * carries exactly one frame, a 4-byte big-endian length and that many bytes)
 * and for the call sessions of `/quotad/forward/5.0.0` (many frames, each
 * with a call id).
 * The reader enforces the size cap from the header alone, before buffering the
 * body, so a peer cannot make us hold more than `maxBytes` (+ one chunk).
 *
 * No libp2p import: a stream's source is any async iterable of chunks that
 * have `subarray()` (libp2p's Uint8ArrayList, or plain Uint8Array).
 */
import { ErrorCodes, QuotadError } from '../../errors.js'

export const FRAME_HEADER_BYTES = 4

export interface Chunk {
  subarray(): Uint8Array
}

export function encodeFrame (data: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + data.byteLength)
  new DataView(out.buffer).setUint32(0, data.byteLength, false)
  out.set(data, FRAME_HEADER_BYTES)
  return out
}

/**
 * Read exactly one frame from `source`, then its end: the writer closes its
 * side after its one frame. Throws E_FRAME_TOO_LARGE when the header
 * announces more than `maxBytes`, and E_BAD_FRAME when the source ends early
 * or carries bytes after the frame, in the frame's last chunk or any later
 * one (issue 46: a byte written apart after a request was answered, where
 * cluster-protocol.md says the stream is refused). Waiting for the end costs
 * nothing: the writer's close follows its frame at once, and a writer that
 * never closes meets the reader's deadline, as one that never finishes its
 * frame does.
 */
export async function readFrame (source: AsyncIterable<Chunk>, maxBytes: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  let have = 0
  let need = -1
  for await (const chunk of source) {
    const bytes = chunk.subarray()
    if (bytes.byteLength === 0) continue
    parts.push(bytes)
    have += bytes.byteLength
    if (need < 0 && have >= FRAME_HEADER_BYTES) {
      const head = concat(parts, have)
      parts.length = 0
      parts.push(head)
      const length = new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(0, false)
      if (length > maxBytes) {
        throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `frame of ${length} bytes is above the limit of ${maxBytes}`)
      }
      need = FRAME_HEADER_BYTES + length
    }
    if (need >= 0 && have > need) throw new QuotadError(ErrorCodes.BAD_FRAME, `${have - need} unexpected bytes after the frame`)
  }
  if (need >= 0 && have === need) return concat(parts, have).subarray(FRAME_HEADER_BYTES)
  throw new QuotadError(ErrorCodes.BAD_FRAME, need < 0
    ? `stream ended after ${have} bytes, inside the frame header`
    : `stream ended after ${have} of ${need} frame bytes`)
}

function concat (parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]
  const out = new Uint8Array(total)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

/**
 * A call session's frames (calls.ts): a varint (unsigned LEB128) length,
 * then a varint call id and the payload (the length counts both). Many
 * frames follow each other on one stream, in both directions. Why varints:
 * a forwarded acquire's payload is 8 bytes or so, and its caller's ids stay
 * small (calls.ts reuses the lowest free ones), so the header is 2 bytes,
 * not the 8 of two u32s (protocol `/quotad/forward/5.0.0`).
 */
/** Most bytes a call frame's length or id takes (a u32 as a varint). */
const MAX_VARINT_BYTES = 5
/** Largest call id: a u32. */
const MAX_CALL_ID = 0xffffffff

function varintLength (n: number): number {
  let len = 1
  while (n >= 0x80) { n = Math.floor(n / 0x80); len++ }
  return len
}

function writeVarint (out: Uint8Array, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80
    n = Math.floor(n / 0x80)
  }
  out[at++] = n
  return at
}

/** The varint at `at` of `buf`: its value and the offset after it; null when `buf` ends inside it. Throws E_BAD_FRAME past a u32. */
function readVarint (buf: Uint8Array, at: number, what: string): { value: number, next: number } | null {
  let value = 0
  let scale = 1
  for (let i = 0; i < MAX_VARINT_BYTES; i++) {
    if (at + i >= buf.byteLength) return null
    const b = buf[at + i]
    value += (b & 0x7f) * scale
    if ((b & 0x80) === 0) {
      if (value > MAX_CALL_ID) break
      return { value, next: at + i + 1 }
    }
    scale *= 0x80
  }
  throw new QuotadError(ErrorCodes.BAD_FRAME, `a call frame's ${what} is not a varint of at most 32 bits`)
}

export function encodeCallFrame (id: number, data: Uint8Array): Uint8Array {
  if (!Number.isInteger(id) || id < 0 || id > MAX_CALL_ID) throw new QuotadError(ErrorCodes.INTERNAL, `call id ${id} is not a u32`)
  const body = varintLength(id) + data.byteLength
  const out = new Uint8Array(varintLength(body) + body)
  const at = writeVarint(out, writeVarint(out, 0, body), id)
  out.set(data, at)
  return out
}

/** One whole call frame's id and payload (the simulator's, which carries frames whole). Throws E_BAD_FRAME. */
export function splitCallFrame (frame: Uint8Array): { id: number, data: Uint8Array } {
  const len = readVarint(frame, 0, 'length')
  const id = len === null ? null : readVarint(frame, len.next, 'id')
  if (len === null || id === null || len.next + len.value !== frame.byteLength) throw new QuotadError(ErrorCodes.BAD_FRAME, 'not one whole call frame')
  return { id: id.value, data: frame.subarray(id.next) }
}

/**
 * Every call frame on `source`, as it completes. Throws E_FRAME_TOO_LARGE
 * when a header announces more than `maxBytes` (id and payload), and
 * E_BAD_FRAME for a length or id that is not a varint of 32 bits, a frame
 * too short to hold its id, or a source that ends inside a frame. Ends when
 * the source ends between frames.
 */
export async function * readCallFrames (source: AsyncIterable<Chunk>, maxBytes: number): AsyncGenerator<{ id: number, data: Uint8Array }> {
  let buf: Uint8Array = new Uint8Array(0)
  for await (const chunk of source) {
    const bytes = chunk.subarray()
    if (bytes.byteLength === 0) continue
    buf = buf.byteLength === 0 ? bytes : concat([buf, bytes], buf.byteLength + bytes.byteLength)
    for (;;) {
      const len = readVarint(buf, 0, 'length')
      if (len === null) break
      if (len.value > maxBytes) throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `frame of ${len.value} bytes is above the limit of ${maxBytes}`)
      if (buf.byteLength < len.next + len.value) break
      const body = buf.subarray(len.next, len.next + len.value)
      const id = readVarint(body, 0, 'id')
      if (id === null) throw new QuotadError(ErrorCodes.BAD_FRAME, `a call frame of ${len.value} bytes has no room for its id`)
      // A copy: the payload outlives this buffer, which the next chunk replaces.
      const data = body.slice(id.next)
      buf = buf.subarray(len.next + len.value)
      yield { id: id.value, data }
    }
  }
  if (buf.byteLength > 0) throw new QuotadError(ErrorCodes.BAD_FRAME, `stream ended inside a call frame (${buf.byteLength} bytes)`)
}
