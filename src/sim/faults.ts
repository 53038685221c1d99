/**
 * Turns a scenario's fault spec into scheduled events on a virtual cluster:
 * random partitions (symmetric or one-way, one at a time, each healed before
 * the next), crashes and graceful stops (each restarted later), and joins.
 * Faults fall in the middle of the run (10%..70% of it), so every run has a
 * clean start and time to recover before it ends.
 */
import type { Rng } from './rng.js'
import type { FaultSpec } from './scenario.js'
import type { VirtualCluster } from './virtual-cluster.js'

/** Schedules the faults; returns each joiner's join time. */
export function scheduleFaults (vc: VirtualCluster, f: FaultSpec, seeds: readonly string[], joiners: readonly string[],
  startMs: number, durationMs: number, rng: Rng): Map<string, number> {
  const within = (lo: number, hi: number): number => startMs + durationMs * (lo + rng.next() * (hi - lo))
  const restart = f.restartAfterMs ?? 1500
  const p = f.partitions
  if (p !== undefined && seeds.length > 1) {
    let t = startMs + rng.exp(p.everyMs)
    while (t < startMs + 0.8 * durationMs) {
      const group = rng.shuffle([...seeds])
      const cut = 1 + Math.floor(rng.next() * Math.floor(seeds.length / 2))
      const a = group.slice(0, cut)
      const b = group.slice(cut)
      const oneWay = rng.chance(p.oneWay)
      const len = p.durationMs * (0.5 + rng.next())
      vc.at(t, () => vc.cuts.split(a, b, oneWay))
      vc.at(t + len, () => vc.heal())
      t += len + rng.exp(p.everyMs)
    }
  }
  for (let i = 0; i < (f.crashes ?? 0); i++) {
    const node = rng.pick(seeds)
    const t = within(0.1, 0.7)
    vc.at(t, () => vc.crash(node))
    vc.at(t + restart, () => vc.start(node))
  }
  for (let i = 0; i < (f.stops ?? 0); i++) {
    const node = rng.pick(seeds)
    const t = within(0.1, 0.7)
    vc.at(t, () => vc.stop(node))
    // Restart once the stop has finished (it takes a few gossip intervals plus the handoff).
    const again = (): void => {
      const n = vc.nodes.get(node)
      if (n?.state === 'stopping') vc.at(vc.now + 100, again)
      else vc.start(node)
    }
    vc.at(t + restart, again)
  }
  const joinAt = new Map<string, number>()
  for (const j of joiners) {
    const t = within(0.1, 0.6)
    joinAt.set(j, t)
    vc.at(t, () => vc.start(j))
  }
  return joinAt
}
