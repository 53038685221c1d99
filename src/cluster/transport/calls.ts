/**
 * Call sessions (`/quotad/forward/5.0.0`): many request/answer exchanges on
 * one long-lived stream per peer, for what a node sends at the rate of its
 * clients' requests (a member's forwarded acquires, forward.ts).
 *
 * Why not a transfer stream each (transfer.ts): every stream costs an open,
 * a protocol negotiation and closing frames, in both threads of both ends.
 * A forwarded acquire took 1.2 ms at the median on loopback that way
 * (bench/results/forward-9fd90ff.txt), 25 times a local decision.
 *
 * Wire: frames of framing.ts `encodeCallFrame`, both ways. The caller numbers
 * its calls (the lowest id free, so a 1-byte varint); the responder answers
 * each under its id, in any order (a call may wait at the responder for
 * tokens). Frames queued while a write was
 * under way go out together, as one write.
 *
 * Invariants:
 * - A call settles exactly once: with its answer; E_TIMEOUT at its deadline
 *   (the session stays); or E_CONNECTION when the session ends first.
 * - An id names one call of the session until its answer came: a timed-out
 *   call's id is not reused until its late answer comes (`late`), so no
 *   answer settles another call; past MAX_LATE_CALLS the session resets.
 * - A responder holds at most MAX_CALLS_IN_FLIGHT calls of one session; one
 *   above that is dropped unanswered (counted: `callsDropped`), and times
 *   out at its caller. A frame above MAX_CALL_BYTES or too short for its id
 *   resets the session: every call on it fails at the caller, whose next
 *   call opens a new one.
 * - There is no error answer. A handler that throws (a payload that does not
 *   parse) resets the session; one that misses the inbound deadline answers
 *   nothing, and the caller's call times out. (The forward handler answers
 *   its refusals as answers: forward.ts.)
 */
import { performance } from 'node:perf_hooks'
import type { Stream } from '@libp2p/interface'
import { ErrorCodes, QuotadError } from '../../errors.js'
import { encodeCallFrame, readCallFrames } from './framing.js'
import { classify } from './transfer.js'

/** Calls a responder holds at once from one session; a member's forward slots stay under it (forward-slots.ts). */
export const MAX_CALLS_IN_FLIGHT = 256
/** Largest call frame (id and payload) either way: a forwarded acquire is a key of at most 256 bytes and a few numbers. */
export const MAX_CALL_BYTES = 4096

export interface CallCounters {
  callsOut: number
  callsIn: number
  callErrors: number
  callsInFailed: number
  callsDropped: number
  callSessionsOpened: number
  callSessionsServed: number
  callSessionResets: number
  callBytesOut: number
  callBytesIn: number
}

export function callCounters (): CallCounters {
  return { callsOut: 0, callsIn: 0, callErrors: 0, callsInFailed: 0, callsDropped: 0, callSessionsOpened: 0, callSessionsServed: 0, callSessionResets: 0, callBytesOut: 0, callBytesIn: 0 }
}

export interface CallOptions {
  /** Open a stream of the call protocol to `peerId` (honouring the signal). */
  open: (peerId: string, signal: AbortSignal) => Promise<Stream>
  /** The handler of an inbound call's payload: its answer. */
  handler: (from: string, data: Uint8Array) => Promise<Uint8Array> | Uint8Array
  /** Deadline for answering one inbound call. */
  inboundTimeoutMs: number
  counters: CallCounters
  emit: (name: string, fields: Record<string, unknown>) => void
}

/** Frames to write, as the async iterable a stream's sink takes: what queued meanwhile goes out as one chunk. */
class Outbox implements AsyncIterable<Uint8Array> {
  private queue: Uint8Array[] = []
  private wake: (() => void) | null = null
  private ended = false

  push (frame: Uint8Array): void {
    if (this.ended) return
    this.queue.push(frame)
    this.signal()
  }

  end (): void {
    this.ended = true
    this.signal()
  }

  private signal (): void {
    const w = this.wake
    this.wake = null
    w?.()
  }

  async * [Symbol.asyncIterator] (): AsyncGenerator<Uint8Array> {
    for (;;) {
      if (this.queue.length > 0) {
        const q = this.queue
        this.queue = []
        yield q.length === 1 ? q[0] : Buffer.concat(q)
        continue
      }
      if (this.ended) return
      await new Promise<void>(resolve => { this.wake = resolve })
    }
  }
}

interface Pending {
  resolve: (data: Uint8Array) => void
  reject: (err: QuotadError) => void
  timer: NodeJS.Timeout
}

/**
 * Calls of one session that timed out and whose answers may still come: their
 * ids are not reused until then (an answer to one must never settle another
 * call). Past this many the session resets, and its successor starts afresh.
 */
export const MAX_LATE_CALLS = 1024

/** The caller's end of one session. */
class Session {
  readonly pending = new Map<number, Pending>()
  /** Ids of calls that timed out, unanswered yet (see MAX_LATE_CALLS). */
  private readonly late = new Set<number>()
  private readonly out = new Outbox()
  closed = false

  constructor (private readonly stream: Stream, private readonly onClose: (s: Session, err: Error) => void) {
    stream.sink(this.out).catch(err => { this.close(err as Error) })
    this.read().then(() => { this.close(new Error('the peer ended the session')) }, err => { this.close(err as Error) })
  }

  /**
   * The lowest id no call holds (in flight, or timed out and unanswered): few
   * calls are in flight at once, so ids stay below 128, a 1-byte varint
   * (framing.ts). O(calls held), at most MAX_CALLS_IN_FLIGHT + MAX_LATE_CALLS.
   */
  private freeId (): number {
    let id = 0
    while (this.pending.has(id) || this.late.has(id)) id++
    return id
  }

  call (data: Uint8Array, timeoutMs: number, what: string): Promise<Uint8Array> {
    const id = this.freeId()
    return new Promise<Uint8Array>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id)
        this.late.add(id)
        reject(new QuotadError(ErrorCodes.TIMEOUT, `${what}: timed out`))
        if (this.late.size > MAX_LATE_CALLS) this.close(new QuotadError(ErrorCodes.CONNECTION, `call session: ${this.late.size} calls unanswered`))
      }, timeoutMs)
      this.pending.set(id, { resolve, reject, timer })
      this.out.push(encodeCallFrame(id, data))
    })
  }

  private async read (): Promise<void> {
    for await (const { id, data } of readCallFrames(this.stream.source, MAX_CALL_BYTES)) {
      const p = this.pending.get(id)
      // An answer after its call timed out: nobody waits for it, and its id is free again.
      if (p === undefined) { this.late.delete(id); continue }
      this.pending.delete(id)
      clearTimeout(p.timer)
      p.resolve(data)
    }
  }

  close (err: Error): void {
    if (this.closed) return
    this.closed = true
    this.out.end()
    this.stream.abort(err)
    for (const p of this.pending.values()) {
      clearTimeout(p.timer)
      p.reject(err instanceof QuotadError ? err : new QuotadError(ErrorCodes.CONNECTION, `call session ended: ${err.message}`))
    }
    this.pending.clear()
    this.late.clear()
    this.onClose(this, err)
  }
}

export class CallSessions {
  private readonly sessions = new Map<string, Session | Promise<Session>>()
  private stopped = false

  constructor (private readonly o: CallOptions) {}

  /** One call to `peerId`, on its session (opened now if there is none): the answer's payload. */
  async call (peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    const c = this.o.counters
    const what = `call to ${peerId}`
    c.callsOut++
    const deadline = AbortSignal.timeout(timeoutMs)
    try {
      if (data.byteLength + 4 > MAX_CALL_BYTES) throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `call of ${data.byteLength} bytes is above ${MAX_CALL_BYTES - 4}`)
      const started = performance.now()
      const s = await this.session(peerId, deadline)
      const answer = await s.call(data, Math.max(1, timeoutMs - (performance.now() - started)), what)
      c.callBytesOut += data.byteLength + answer.byteLength
      return answer
    } catch (err) {
      c.callErrors++
      const e = classify(err, deadline, what)
      this.o.emit('call-failed', { peerId, direction: 'out', code: e.code, error: e.message })
      throw e
    }
  }

  private async session (peerId: string, signal: AbortSignal): Promise<Session> {
    if (this.stopped) throw new QuotadError(ErrorCodes.SHUTTING_DOWN, 'transport is stopped')
    const have = this.sessions.get(peerId)
    if (have !== undefined) return await have
    const opening = this.o.open(peerId, signal).then(stream => {
      this.o.counters.callSessionsOpened++
      const s = new Session(stream, (gone, err) => {
        if (this.sessions.get(peerId) === gone) this.sessions.delete(peerId)
        this.o.counters.callSessionResets++
        this.o.emit('call-session-closed', { peerId, error: err.message })
      })
      if (this.stopped) s.close(new QuotadError(ErrorCodes.SHUTTING_DOWN, 'transport is stopped'))
      else this.sessions.set(peerId, s)
      return s
    }, err => {
      this.sessions.delete(peerId)
      throw err
    })
    this.sessions.set(peerId, opening)
    return await opening
  }

  /** Serve an inbound session from peer `from` until it ends. Never throws: a failure resets the stream. */
  async serve (stream: Stream, from: string): Promise<void> {
    const c = this.o.counters
    c.callSessionsServed++
    const out = new Outbox()
    let inflight = 0
    let ended = false
    let dead = false
    const finish = (): void => { if (ended && inflight === 0) out.end() }
    const reset = (err: Error): void => {
      if (dead) return
      dead = true
      out.end()
      stream.abort(err)
      c.callsInFailed++
      this.o.emit('call-failed', { peerId: from, direction: 'in', code: (err as QuotadError).code ?? ErrorCodes.INTERNAL, error: err.message })
    }
    stream.sink(out).catch(() => {})
    try {
      for await (const { id, data } of readCallFrames(stream.source, MAX_CALL_BYTES)) {
        if (dead) return
        if (inflight >= MAX_CALLS_IN_FLIGHT) {
          // Not a reset: the session's other calls are answered as usual (a caller whose calls timed out may
          // still have them held here, so a well-behaved one can go over).
          c.callsDropped++
          continue
        }
        inflight++
        c.callsIn++
        this.answer(from, data).then(answer => {
          if (dead) return
          inflight--
          if (answer !== null) {
            c.callBytesIn += data.byteLength + answer.byteLength
            out.push(encodeCallFrame(id, answer))
          }
          finish()
        }, err => { reset(err instanceof Error ? err : new Error(String(err))) })
      }
      ended = true
      finish()
    } catch (err) {
      reset(err instanceof QuotadError ? err : new QuotadError(ErrorCodes.CONNECTION, (err as Error)?.message ?? String(err)))
    }
  }

  /** The handler's answer, null past the inbound deadline (nothing is sent); throws what the handler threw. */
  private async answer (from: string, data: Uint8Array): Promise<Uint8Array | null> {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<null>(resolve => { timer = setTimeout(() => { resolve(null) }, this.o.inboundTimeoutMs) })
    try {
      const a = await Promise.race([Promise.resolve().then(async () => await this.o.handler(from, data)), late])
      if (a !== null && !(a instanceof Uint8Array)) throw new QuotadError(ErrorCodes.INTERNAL, 'onCall did not return bytes')
      if (a !== null && a.byteLength + 4 > MAX_CALL_BYTES) throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `answer of ${a.byteLength} bytes is above ${MAX_CALL_BYTES - 4}`)
      return a
    } finally {
      clearTimeout(timer)
    }
  }

  /** Ends every session (their calls fail); later calls fail with E_SHUTTING_DOWN. */
  stop (): void {
    this.stopped = true
    for (const s of this.sessions.values()) if (s instanceof Session) s.close(new QuotadError(ErrorCodes.SHUTTING_DOWN, 'transport is stopped'))
    this.sessions.clear()
  }
}
