/**
 * Demand on real processes, counted per window: each node's client asks one
 * token at a time (waiting a little for a transfer), for `ms`. The
 * admissions are counted per window by the window's end (second) on the
 * daemon's calendar (an allowed decision's resetMs is the time to its
 * window's end), returned and added to `all` (a window can straddle two
 * calls).
 */
import type { TestCluster } from './cluster-procs.js'
import { connect } from './proc.js'

export async function drive (c: Pick<TestCluster, 'sockets'>, nodes: string[], ms: number, all: Map<number, number>, key = 'api'): Promise<Map<number, number>> {
  const perWindow = new Map<number, number>()
  const until = Date.now() + ms
  await Promise.all(nodes.map(async n => {
    const q = await connect(c.sockets[n])
    try {
      while (Date.now() < until) {
        const t0 = Date.now()
        const d = await q.acquire(key, { waitMs: 100 })
        if (!d.allowed) { await new Promise(resolve => setTimeout(resolve, 10)); continue }
        const end = Math.round(((t0 + Date.now()) / 2 + d.resetMs) / 1000)
        perWindow.set(end, (perWindow.get(end) ?? 0) + 1)
        all.set(end, (all.get(end) ?? 0) + 1)
      }
    } finally {
      await q.close()
    }
  }))
  return perWindow
}

/** The most any window admitted that `per` covered whole (not its first nor its last). */
export function bestWholeWindow (per: Map<number, number>): number {
  const whole = [...per.keys()].sort((x, y) => x - y).slice(1, -1).map(e => per.get(e) as number)
  return Math.max(0, ...whole)
}
