/**
 * Framing for the Unix-socket protocol: every frame is a 4-byte big-endian
 * uint32 body length followed by that many body bytes (one msgpack value).
 *
 * `FrameDecoder` turns an arbitrary sequence of stream chunks back into frame
 * bodies. It is on the hot path of both the server and the client, so it is
 * built to copy as little as possible:
 *
 * - Frames that lie wholly inside one chunk are never copied: the handler gets
 *   `(chunk, start, end)` and decodes in place.
 * - Only a frame that straddles chunks is assembled. Its pieces are kept as a
 *   list of chunk slices and joined with one copy once the last byte arrives,
 *   so memory grows with the bytes actually received, never with the length a
 *   peer merely declared (a 4-byte header cannot make us allocate 1 MiB).
 * - A header split over chunks (down to one byte per chunk) is collected in a
 *   4-byte scratch buffer.
 *
 * The owner can `pause()` the decoder from inside `onFrame`: it then keeps the
 * unread rest of the chunk (and any later chunk) until `resume()`. The server
 * uses this to stop working for one client mid-chunk, for fairness and when
 * the client does not read its replies.
 *
 * A declared length above `maxFrameBytes` is reported once through
 * `onFrameTooLarge` and the decoder stops for good: after that the stream's
 * frame boundaries cannot be trusted, so the owner should close it.
 */

export const FRAME_HEADER_BYTES = 4
/** Largest body length the 4-byte header can express. */
export const MAX_FRAME_BODY = 0xffff_ffff

/** Receives what a `FrameDecoder` finds. Implemented by the connection objects. */
export interface FrameHandler {
  /**
   * One complete frame body: `buf[start, end)`. The bytes are only valid during
   * the call when `buf` is a socket chunk; decode them before returning.
   */
  onFrame: (buf: Buffer, start: number, end: number) => void
  /** A header declared `length` > `maxFrameBytes`. The decoder has stopped. */
  onFrameTooLarge: (length: number, maxFrameBytes: number) => void
}

/** Prefix `body` with its 4-byte length. Copies once; see messages.ts for the zero-copy path. */
export function encodeFrame (body: Uint8Array): Buffer {
  if (body.length > MAX_FRAME_BODY) throw new RangeError(`frame body of ${body.length} bytes exceeds 2^32-1`)
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + body.length)
  out.writeUInt32BE(body.length, 0)
  out.set(body, FRAME_HEADER_BYTES)
  return out
}

export class FrameDecoder {
  readonly maxFrameBytes: number
  private readonly handler: FrameHandler
  /** Header bytes of the current frame when they straddle chunks. */
  private readonly header = Buffer.alloc(FRAME_HEADER_BYTES)
  private headerFill = 0
  /** Declared length of a body being assembled across chunks, or -1 when none. */
  private bodyLength = -1
  private readonly parts: Buffer[] = []
  private partsBytes = 0
  /** Chunks (or their unread tails) not looked at yet because the owner paused us. */
  private readonly held: Buffer[] = []
  private heldBytes = 0
  private paused = false
  private stopped = false

  constructor (handler: FrameHandler, maxFrameBytes: number) {
    if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < 0 || maxFrameBytes > MAX_FRAME_BODY) {
      throw new RangeError(`maxFrameBytes must be an integer in [0, 2^32-1], got ${maxFrameBytes}`)
    }
    this.handler = handler
    this.maxFrameBytes = maxFrameBytes
  }

  /** Bytes held: a frame not yet complete, plus input not yet looked at while paused. */
  get bufferedBytes (): number {
    return this.headerFill + this.partsBytes + this.heldBytes
  }

  /** Input received but not yet looked at (the rest of a chunk, held by `pause`). */
  get pendingBytes (): number {
    return this.heldBytes
  }

  /** True once the decoder gave up (oversized frame) or was stopped by its owner. */
  get isStopped (): boolean {
    return this.stopped
  }

  get isPaused (): boolean {
    return this.paused
  }

  /** Drop any partial frame and held input, and ignore all further input. Safe to call from a handler. */
  stop (): void {
    this.stopped = true
    this.reset()
    this.held.length = 0
    this.heldBytes = 0
  }

  /**
   * Deliver no more frames until `resume()`. Called from `onFrame`, it takes
   * effect after that frame: the rest of the chunk is kept (a view, not a
   * copy), and so is every chunk pushed meanwhile. This is how a connection
   * stops working for a client mid-chunk (fairness, backpressure).
   */
  pause (): void {
    this.paused = true
  }

  /** Go on with held input, until it is used up or the handler pauses again. */
  resume (): void {
    this.paused = false
    while (!this.paused && !this.stopped && this.held.length > 0) {
      const chunk = this.held.shift() as Buffer
      this.heldBytes -= chunk.length
      this.feed(chunk)
    }
  }

  push (chunk: Buffer): void {
    if (this.stopped || chunk.length === 0) return
    if (this.paused || this.held.length > 0) {
      // Behind input already held: keep the order.
      this.held.push(chunk)
      this.heldBytes += chunk.length
      return
    }
    this.feed(chunk)
  }

  /** Decode `chunk`, the oldest input, until it is used up or the handler pauses. */
  private feed (chunk: Buffer): void {
    const n = chunk.length
    let off = 0

    // 1. Finish a frame left incomplete by earlier chunks.
    if (this.bodyLength >= 0) {
      off = this.continueBody(chunk)
      if (off < 0) return
    } else if (this.headerFill > 0) {
      while (this.headerFill < FRAME_HEADER_BYTES && off < n) this.header[this.headerFill++] = chunk[off++]
      if (this.headerFill < FRAME_HEADER_BYTES) return
      this.headerFill = 0
      const len = this.header.readUInt32BE(0)
      if (len > this.maxFrameBytes) return this.tooLarge(len)
      if (n - off >= len) {
        this.handler.onFrame(chunk, off, off + len)
        off += len
      } else {
        this.startBody(len, chunk, off)
        return
      }
    }

    // 2. The fast loop: whole frames inside this chunk, decoded in place.
    while (!this.stopped) {
      if (this.paused) {
        // `chunk` is the oldest input we have: its unread tail goes first in line.
        if (off < n) {
          this.held.unshift(off === 0 ? chunk : chunk.subarray(off))
          this.heldBytes += n - off
        }
        return
      }
      const left = n - off
      if (left < FRAME_HEADER_BYTES) {
        for (let i = 0; i < left; i++) this.header[i] = chunk[off + i]
        this.headerFill = left
        return
      }
      const len = chunk.readUInt32BE(off)
      if (len > this.maxFrameBytes) return this.tooLarge(len)
      const start = off + FRAME_HEADER_BYTES
      if (n - start < len) {
        this.startBody(len, chunk, start)
        return
      }
      off = start + len
      this.handler.onFrame(chunk, start, off)
    }
  }

  private startBody (len: number, chunk: Buffer, start: number): void {
    this.bodyLength = len
    if (start < chunk.length) {
      // A view, not a copy: the one copy happens when the frame is complete.
      this.parts.push(chunk.subarray(start))
      this.partsBytes = chunk.length - start
    }
  }

  /** Returns the offset after the completed body, or -1 if the chunk was consumed. */
  private continueBody (chunk: Buffer): number {
    const need = this.bodyLength - this.partsBytes
    if (chunk.length < need) {
      this.parts.push(chunk)
      this.partsBytes += chunk.length
      return -1
    }
    this.parts.push(need === chunk.length ? chunk : chunk.subarray(0, need))
    const body = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.bodyLength)
    this.reset()
    this.handler.onFrame(body, 0, body.length)
    return need
  }

  private tooLarge (len: number): void {
    this.stop()
    this.handler.onFrameTooLarge(len, this.maxFrameBytes)
  }

  private reset (): void {
    this.headerFill = 0
    this.bodyLength = -1
    this.parts.length = 0
    this.partsBytes = 0
  }
}
