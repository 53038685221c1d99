/**
 * Lowers the calling thread's scheduling priority (issue 13: decisions stay
 * fast while the node works for the cluster).
 *
 * Why: libp2p runs in a worker thread (thread-transport.ts), but a thread
 * still needs a core. Where the socket loop and that thread share one core
 * that is busy (a sidecar limited to a core), a decision that became ready
 * while the thread was checking gossip waits for the thread's time slice.
 * Measured with `bench/latency.js --pin process` (the probed daemon and its
 * client on one core) under 200 nodes' gossip: a c=1 acquire's p99 was
 * 253 µs against 33 µs for a lone daemon. At nice 10 it was 37 µs, but the
 * p50 rose 1.22x (every decision now preempts the thread) and the thread
 * fell behind, taking in 749 of the 796 gossips a second. That is the
 * trade, and leases live on gossip, so it is opt-in
 * (`cluster.transportNice`, default 0). With a core for the thread
 * (`--pin loop`) the nice value changes nothing measurable.
 *
 * On Linux a thread has a nice value of its own: setpriority() with the
 * thread's id (from /proc/thread-self) changes that thread alone, and the
 * threads it starts later inherit it. Raising one's own nice value needs no
 * privilege. Elsewhere there is no per-thread value to set, and nothing is
 * done.
 */
import { readlinkSync } from 'node:fs'
import os from 'node:os'

/** What happened: the thread's id and the nice value set, or why nothing was. */
export type NiceResult = { tid: number, nice: number } | { skipped: string }

export function niceThisThread (nice: number): NiceResult {
  if (nice === 0) return { skipped: 'transportNice is 0' }
  if (process.platform !== 'linux') return { skipped: `no per-thread priority on ${process.platform}` }
  let tid: number
  try {
    // "<pid>/task/<tid>" for the calling thread.
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop())
  } catch (err) {
    return { skipped: `cannot read /proc/thread-self: ${(err as Error).message}` }
  }
  if (!Number.isSafeInteger(tid) || tid <= 0) return { skipped: 'no thread id in /proc/thread-self' }
  try {
    // Never lower a value the operator already raised (e.g. the whole daemon under `nice -n 15`).
    const now = os.getPriority(tid)
    if (now >= nice) return { tid, nice: now }
    os.setPriority(tid, nice)
  } catch (err) {
    return { skipped: `setpriority failed: ${(err as Error).message}` }
  }
  return { tid, nice }
}
