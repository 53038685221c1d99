/**
 * A slab writer for outgoing frames, one per connection (server and client).
 *
 * Frames are encoded straight into `buf` at `pos`; `take()` hands out every
 * byte written since the previous take as ONE Buffer view, for one
 * socket.write. Bytes that were handed out are never written again (the
 * socket may still hold them), so when the slab runs out a fresh one is
 * allocated rather than recycled, the way msgpackr manages its own buffer.
 * Frames encoded elsewhere (msgpackr) are copied in with `append`.
 *
 * Memory: an idle connection holds no slab; a slab grown for one huge reply
 * is dropped as soon as its bytes are taken.
 */

const SLAB_BYTES = 16 * 1024
const KEEP_AT_MOST = 4 * SLAB_BYTES
const EMPTY = Buffer.alloc(0)

export class OutBuffer {
  buf: Buffer = EMPTY
  /** Next byte to write. Writers advance it themselves after `reserve`. */
  pos = 0
  /** First byte not yet handed out. */
  private start = 0

  /** Bytes written and not yet taken. */
  get length (): number {
    return this.pos - this.start
  }

  /** Make room for `n` more bytes at `pos`, keeping the untaken bytes contiguous. */
  reserve (n: number): void {
    if (this.pos + n <= this.buf.length) return
    const pending = this.pos - this.start
    const next = Buffer.allocUnsafe(Math.max(SLAB_BYTES, 2 * (pending + n)))
    if (pending > 0) this.buf.copy(next, 0, this.start, this.pos)
    this.buf = next
    this.start = 0
    this.pos = pending
  }

  append (bytes: Uint8Array): void {
    this.reserve(bytes.length)
    this.buf.set(bytes, this.pos)
    this.pos += bytes.length
  }

  /** Forget bytes written after the first `length` untaken ones (undo a partial frame). */
  truncate (length: number): void {
    this.pos = this.start + length
  }

  /** Drop everything not yet taken, and the slab. */
  clear (): void {
    this.buf = EMPTY
    this.start = this.pos = 0
  }

  /** The bytes written since the last take, as a view the caller may keep. */
  take (): Buffer {
    const out = this.buf.subarray(this.start, this.pos)
    this.start = this.pos
    if (this.buf.length > KEEP_AT_MOST) {
      this.buf = EMPTY
      this.start = this.pos = 0
    }
    return out
  }
}
