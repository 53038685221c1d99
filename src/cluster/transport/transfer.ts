/**
 * Both ends of `/quotad/transfer/1.0.0` on one libp2p stream: the caller
 * writes one frame, closes its write side and reads one frame back; the
 * responder reads one frame, runs the handler and writes one frame. Each end
 * has a deadline that resets the stream, so neither a silent peer nor a stuck
 * handler can hold a stream (or this code) forever. Every failure comes out as
 * a QuotadError with a stable code, after the stream has been reset.
 */
import type { Stream } from '@libp2p/interface'
import { ErrorCodes, QuotadError } from '../../errors.js'
import { encodeFrame, readFrame } from './framing.js'

/** Map any failure to a QuotadError: timeouts by the signal, the rest as connection errors. */
export function classify (err: unknown, signal: AbortSignal, what: string): QuotadError {
  if (err instanceof QuotadError) return err
  if (signal.aborted) return new QuotadError(ErrorCodes.TIMEOUT, `${what}: timed out`)
  return new QuotadError(ErrorCodes.CONNECTION, `${what}: ${(err as Error)?.message ?? String(err)}`)
}

/** The caller's side. `open` opens the stream (and should honour the signal). */
export async function callTransfer (
  open: (signal: AbortSignal) => Promise<Stream>, data: Uint8Array, maxBytes: number, timeoutMs: number, what: string
): Promise<Uint8Array> {
  const signal = AbortSignal.timeout(timeoutMs)
  let abortStream: (() => void) | undefined
  try {
    if (data.byteLength > maxBytes) {
      throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `request of ${data.byteLength} bytes is above maxRequestBytes ${maxBytes}`)
    }
    const stream = await open(signal)
    abortStream = () => { stream.abort(new Error('request timed out')) }
    signal.addEventListener('abort', abortStream, { once: true })
    try {
      await stream.sink([encodeFrame(data)])
      const reply = await readFrame(stream.source, maxBytes)
      stream.close().catch(() => {})
      return reply
    } catch (err) {
      stream.abort(err instanceof Error ? err : new Error(String(err)))
      throw err
    }
  } catch (err) {
    throw classify(err, signal, what)
  } finally {
    if (abortStream !== undefined) signal.removeEventListener('abort', abortStream)
  }
}

/** The responder's side. */
export async function serveTransfer (
  stream: Stream, handler: (req: Uint8Array) => Promise<Uint8Array>, maxBytes: number, timeoutMs: number, what: string
): Promise<void> {
  const signal = AbortSignal.timeout(timeoutMs)
  // the deadline resets the stream (ending a stalled read) and settles a
  // handler that never does
  let onAbort = (): void => {}
  const deadline = new Promise<never>((_resolve, reject) => {
    onAbort = () => {
      stream.abort(new Error('inbound request timed out'))
      reject(new QuotadError(ErrorCodes.TIMEOUT, `${what}: timed out`))
    }
  })
  deadline.catch(() => {})
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    const req = await readFrame(stream.source, maxBytes)
    const reply = await Promise.race([handler(req), deadline])
    if (!(reply instanceof Uint8Array)) throw new QuotadError(ErrorCodes.INTERNAL, 'onRequest did not return bytes')
    if (reply.byteLength > maxBytes) {
      throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE, `reply of ${reply.byteLength} bytes is above maxRequestBytes ${maxBytes}`)
    }
    await stream.sink([encodeFrame(reply)])
    stream.close().catch(() => {})
  } catch (err) {
    const e = classify(err, signal, what)
    stream.abort(e)
    throw e
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/** What an inbound request moves of a transport's counters (libp2p-transport.ts). */
export interface InboundCounters {
  requestsIn: number
  requestsInFailed: number
  requestsOversize: number
  requestBytesIn: number
  handlerErrors: number
}

/**
 * Serve one inbound request from peer `from` on `stream` with `handler`.
 * Never throws: any failure resets the stream, and is counted and emitted.
 * A handler that throws counts as a handler error: the wire has no error
 * reply, so the stream is reset.
 */
export async function serveRequest (
  stream: Stream, from: string, handler: (from: string, req: Uint8Array) => Promise<Uint8Array>,
  o: { maxBytes: number, timeoutMs: number }, counters: InboundCounters, emit: (name: string, fields: Record<string, unknown>) => void
): Promise<void> {
  counters.requestsIn++
  const run = async (req: Uint8Array): Promise<Uint8Array> => {
    try {
      const reply = await handler(from, req)
      counters.requestBytesIn += req.byteLength + reply.byteLength
      return reply
    } catch (err) {
      counters.handlerErrors++
      emit('handler-error', { handler: 'onRequest', peerId: from, error: (err as Error)?.message ?? String(err) })
      throw new QuotadError(ErrorCodes.INTERNAL, `onRequest failed: ${(err as Error)?.message ?? String(err)}`)
    }
  }
  try {
    await serveTransfer(stream, run, o.maxBytes, o.timeoutMs, `request from ${from}`)
  } catch (err) {
    const e = err as QuotadError
    counters.requestsInFailed++
    if (e.code === ErrorCodes.FRAME_TOO_LARGE) counters.requestsOversize++
    emit('request-failed', { peerId: from, direction: 'in', code: e.code, error: e.message })
  }
}
