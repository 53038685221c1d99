/**
 * Framing for the `/quotad/transfer/1.0.0` stream protocol: each direction
 * carries exactly one frame, a 4-byte big-endian length and that many bytes.
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
