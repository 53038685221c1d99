/**
 * How much work one turn of a connection may do (see connection.ts and
 * scheduler.ts). A turn ends after FRAMES_PER_TURN frames, BYTES_PER_TURN
 * bytes of input, about TURN_MS of work, or once the replies waiting to be
 * sent pass WRITE_HIGH_WATER. The numbers keep a pipelining client's usual
 * write inside one turn (so the hot path pays nothing) while a flooding
 * connection holds the event loop for a quarter of a millisecond at a time:
 * with the scheduler's one turn per loop iteration, a quiet connection's p99
 * stays around a millisecond while 8 others flood (bench/fairness.ts).
 */
import { performance } from 'node:perf_hooks'

/** Stop working for a client while more than this many bytes of its replies wait to be sent. */
export const WRITE_HIGH_WATER = 1024 * 1024
/** Most frames answered in one turn: more than a pipelining client usually sends in one write. */
export const FRAMES_PER_TURN = 512
/** Most input bytes handled in one turn (frames of up to maxFrameBytes count whole). */
export const BYTES_PER_TURN = 256 * 1024
/** A turn ends after about this long. */
export const TURN_MS = 0.25
/** Units of work (a frame, or 256 bytes in or out) between two reads of the clock. */
const TIME_CHECK_COST = 16

export class TurnBudget {
  private frames = 0
  private bytes = 0
  private ends = 0
  private untilCheck = 0
  /** Reply bytes queued when the last frame was counted. */
  private outMark = 0
  /** Reply bytes the turn may queue before the connection is over WRITE_HIGH_WATER. */
  private outRoom = 0

  /** A new turn; `writable` is what the socket still holds, `queued` the replies not yet written. */
  begin (writable: number, queued: number): void {
    this.frames = FRAMES_PER_TURN
    this.bytes = BYTES_PER_TURN
    this.ends = performance.now() + TURN_MS
    this.untilCheck = TIME_CHECK_COST
    this.outMark = queued
    this.outRoom = WRITE_HIGH_WATER - writable
  }

  /**
   * Count one frame of `inBytes` after which `queued` reply bytes wait; true
   * when the turn must end. The clock is read every TIME_CHECK_COST units of
   * work: often enough that a turn of costly frames (big batches, status)
   * cannot run long, rarely enough that small acquires do not pay for it.
   */
  spent (inBytes: number, queued: number): boolean {
    this.untilCheck -= 1 + ((inBytes + queued - this.outMark) >> 8)
    this.outMark = queued
    if (--this.frames <= 0 || (this.bytes -= inBytes) < 0 || queued > this.outRoom) return true
    if (this.untilCheck > 0) return false
    this.untilCheck = TIME_CHECK_COST
    return performance.now() > this.ends
  }
}
