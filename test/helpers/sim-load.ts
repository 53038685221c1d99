/**
 * Steady demand on the simulator's virtual clock: `rates` acquires of one
 * token of `api` per second at each node for `ms`, ticking every 10 ms.
 * Returns what each window (by the node's calendar second) admitted, added
 * to `windows` (a window can straddle two calls).
 */
import type { VirtualCluster } from '../../src/sim/virtual-cluster.js'

export function load (vc: VirtualCluster, ms: number, rates: Record<string, number>, windows = new Map<number, number>()): Map<number, number> {
  const credit: Record<string, number> = {}
  vc.runUntil(vc.now + ms, 10, () => {
    for (const [n, r] of Object.entries(rates)) {
      credit[n] = (credit[n] ?? 0) + r / 100
      while (credit[n] >= 1) {
        credit[n]--
        if (vc.acquire(n, 'api', 1)?.allowed === true) {
          const w = Math.floor(vc.calendar(n) / 1000)
          windows.set(w, (windows.get(w) ?? 0) + 1)
        }
      }
    }
  })
  return windows
}
