/**
 * CPU placement for latency benches (`taskset`, util-linux).
 *
 * Why: on these VMs a c=1 Unix-socket round trip costs ~16 µs when the
 * client and the daemon share a core and ~66 µs when the answer has to wake
 * the other core (measured with a lone daemon, both placements alternated
 * in one process: 16.5 / 66.0 / 16.5 / 66.7 µs p50). Left to the scheduler,
 * a daemon lands on one or the other from trial to trial, so two daemons'
 * p50s differ by up to 2x for no reason of their own. Pinning gives both
 * sides the same placement, so what is left is the work each one does.
 */
import { execFileSync } from 'node:child_process'
import os from 'node:os'

/**
 * Bind every thread of each process (and the threads they start later) to
 * `cpu`; with 'main thread', only each process's main thread (its thread id
 * is its pid).
 */
export function pinTo (pids: readonly number[], cpu: number, which: 'all threads' | 'main thread' = 'all threads'): void {
  const mask = (1 << cpu).toString(16)
  for (const pid of pids) {
    if (pid <= 0) continue
    execFileSync('taskset', [...(which === 'all threads' ? ['-a'] : []), '-p', mask, String(pid)], { stdio: 'ignore' })
  }
}

/** Throws unless the machine has the two cores and the `taskset` tool pinning needs. */
export function checkPinnable (): void {
  if (os.cpus().length < 2) throw new Error('--pin needs at least 2 cores')
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' })
  } catch {
    throw new Error('--pin needs taskset (util-linux) on PATH')
  }
}
