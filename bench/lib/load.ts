/**
 * The closed-loop load generator: C workers, each sending one operation,
 * awaiting its reply and sending the next, until the trial's deadline. So C
 * is the number of requests in flight, as in an app with C concurrent
 * handlers. Latency is measured per operation with performance.now() around
 * the awaited call, so it includes the client's own encode/decode and the
 * event-loop turns on both sides: what the caller sees.
 *
 * An operation resolves with how many of its items were denied (an acquire
 * has one item, a batch many); it throws for a real error, which is counted
 * and not timed.
 */
import { performance } from 'node:perf_hooks'
import { cpuMs, machineBusyMs } from './cpu.js'
import { LatencyLog, type LatencySummary } from './stats.js'

/** One operation for worker `w`. Resolves with the number of denied items. */
export type Operation = (w: number) => Promise<number>

export interface TrialSpec {
  concurrency: number
  durationMs: number
  /** Decisions per operation (1 for acquire, the batch size for a batch). */
  itemsPerOp: number
  op: Operation
  /** The server process, for its CPU time (null: in this process or unknown). */
  serverPid: number | null
}

export interface TrialResult extends LatencySummary {
  ops: number
  items: number
  denied: number
  errors: number
  firstError: string | null
  elapsedMs: number
  decisionsPerSec: number
  /** CPU used during the trial, in % of one core. */
  clientCpuPct: number
  serverCpuPct: number
  /** CPU used by everything else on the machine during the trial (% of one core; noise). */
  otherCpuPct: number
}

/** Give up on a trial after this many errors: the server is gone or misconfigured. */
const MAX_ERRORS = 1000

export async function runTrial (spec: TrialSpec): Promise<TrialResult> {
  const { concurrency, durationMs, itemsPerOp, op } = spec
  const lat = new LatencyLog(1 << 18)
  let ops = 0
  let denied = 0
  let errors = 0
  let firstError: string | null = null
  const ownPid = spec.serverPid === null ? -1 : spec.serverPid
  const client0 = cpuMs(null)
  const server0 = ownPid === -1 ? 0 : cpuMs(ownPid)
  const machine0 = machineBusyMs()
  const start = performance.now()
  const deadline = start + durationMs

  const worker = async (w: number): Promise<void> => {
    while (true) {
      const t0 = performance.now()
      if (t0 >= deadline || errors >= MAX_ERRORS) return
      try {
        // Not `denied += await op(w)`: that reads `denied` before the await and loses other workers' updates.
        const d = await op(w)
        denied += d
      } catch (err) {
        errors++
        if (firstError === null) firstError = describeError(err)
        continue
      }
      lat.push(performance.now() - t0)
      ops++
    }
  }
  const workers: Promise<void>[] = []
  for (let w = 0; w < concurrency; w++) workers.push(worker(w))
  await Promise.all(workers)

  const elapsedMs = performance.now() - start
  const clientCpuPct = (cpuMs(null) - client0) / elapsedMs * 100
  const serverCpuPct = ownPid === -1 ? NaN : (cpuMs(ownPid) - server0) / elapsedMs * 100
  const machinePct = (machineBusyMs() - machine0) / elapsedMs * 100
  const otherCpuPct = Math.max(0, machinePct - clientCpuPct - (ownPid === -1 ? 0 : serverCpuPct))
  return {
    ...lat.summary(),
    ops,
    items: ops * itemsPerOp,
    denied,
    errors,
    firstError,
    elapsedMs,
    decisionsPerSec: ops * itemsPerOp / elapsedMs * 1000,
    clientCpuPct,
    serverCpuPct,
    otherCpuPct
  }
}

function describeError (err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code
    return typeof code === 'string' ? `${code}: ${err.message}` : err.message
  }
  return String(err)
}
