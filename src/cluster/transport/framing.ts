/**
 * Framing for the `/quotad/transfer/1.0.0` stream protocol (each direction
 * carries exactly one frame, a 4-byte big-endian length and that many bytes)
 * and for the call sessions of `/quotad/forward/1.0.0` (many frames, each
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
 * Read exactly one frame from `source`. Throws E_FRAME_TOO_LARGE when the
 * header announces more than `maxBytes`, and E_BAD_FRAME when the source ends
 * early or carries bytes after the frame.
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
    if (need >= 0 && have >= need) {
      if (have > need) throw new QuotadError(ErrorCodes.BAD_FRAME, `${have - need} unexpected bytes after the frame`)
      return concat(parts, have).subarray(FRAME_HEADER_BYTES)
    }
  }
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
 * A call session's frames (calls.ts): a 4-byte big-endian length, then a
 * 4-byte big-endian call id and the payload (the length counts both). Many
 * frames follow each other on one stream, in both directions.
 */
export const CALL_ID_BYTES = 4

export function encodeCallFrame (id: number, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + CALL_ID_BYTES + data.byteLength)
  const view = new DataView(out.buffer)
  view.setUint32(0, CALL_ID_BYTES + data.byteLength, false)
  view.setUint32(FRAME_HEADER_BYTES, id, false)
  out.set(data, FRAME_HEADER_BYTES + CALL_ID_BYTES)
  return out
}

/**
 * Every call frame on `source`, as it completes. Throws E_FRAME_TOO_LARGE
 * when a header announces more than `maxBytes` (id and payload), and
 * E_BAD_FRAME for a frame too short to hold its id or a source that ends
 * inside a frame. Ends when the source ends between frames.
 */
export async function * readCallFrames (source: AsyncIterable<Chunk>, maxBytes: number): AsyncGenerator<{ id: number, data: Uint8Array }> {
  let buf: Uint8Array = new Uint8Array(0)
  for await (const chunk of source) {
    const bytes = chunk.subarray()
    if (bytes.byteLength === 0) continue
    buf = buf.byteLength === 0 ? bytes : concat([buf, bytes], buf.byteLength + bytes.byteLength)
    while (buf.byteLength >= FRAME_HEADER_BYTES) {
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
      const length = view.getUint32(0, false)
      if (length > maxBytes) throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `frame of ${length} bytes is above the limit of ${maxBytes}`)
      if (length < CALL_ID_BYTES) throw new QuotadError(ErrorCodes.BAD_FRAME, `a call frame of ${length} bytes has no room for its id`)
      if (buf.byteLength < FRAME_HEADER_BYTES + length) break
      const id = view.getUint32(FRAME_HEADER_BYTES, false)
      // A copy: the payload outlives this buffer, which the next chunk replaces.
      const data = buf.slice(FRAME_HEADER_BYTES + CALL_ID_BYTES, FRAME_HEADER_BYTES + length)
      buf = buf.subarray(FRAME_HEADER_BYTES + length)
      yield { id, data }
    }
  }
  if (buf.byteLength > 0) throw new QuotadError(ErrorCodes.BAD_FRAME, `stream ended inside a call frame (${buf.byteLength} bytes)`)
}
