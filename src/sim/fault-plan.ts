/**
 * The fault plan of one chaos run (bench/chaos.ts): a list of timed events
 * drawn from a seeded Rng (src/sim/rng.ts), so `--seeds N` replays the same
 * plan. The plan is data only: bench/lib/chaos-run.ts carries it out on
 * real processes, and the simulator's `chaos` scenario (faults.ts) on
 * virtual ones, so a seed that fails on real processes can be tried under
 * the deterministic simulator.
 *
 * Rules of the draw, so that every event can actually happen:
 * - a node has at most one process fault at a time (kill -9, SIGSTOP or
 *   SIGTERM, each with its restart or SIGCONT): a fault on a node is drawn
 *   only for a time after its previous one has ended;
 * - every fault ends by `faultsMs`: a restart, a SIGCONT, a heal, a clock
 *   stepped back; and if a reload changed the limits, a last reload at
 *   `faultsMs` restores the base file, so the quiet tail runs the rules of
 *   the fault-free baseline and its utilization compares with it.
 */
import { Rng } from './rng.js'

export type FaultKind = 'kill' | 'stop' | 'term' | 'reload' | 'partition' | 'loss' | 'dup' | 'clock'

export const FAULT_KINDS: readonly FaultKind[] = ['kill', 'stop', 'term', 'reload', 'partition', 'loss', 'dup', 'clock']

/** Faults that need network namespaces and iptables (root). */
export const NET_FAULTS: ReadonlySet<FaultKind> = new Set(['partition', 'loss', 'dup'])

/** The limits a reload may set, per rule name: the rules' limits are changed only for fixed windows. */
export interface ReloadRule { name: string, base: number, min: number, max: number }

/** The harness's reloads (bench/chaos.ts): its `api` and `search` rules. The simulator's replay draws with the same, so its plan is the harness's. */
export const CHAOS_RELOAD_RULES: readonly ReloadRule[] = [
  { name: 'api', base: 200, min: 100, max: 300 },
  { name: 'search', base: 100, min: 50, max: 150 }
]

export type ChaosEvent =
  | { at: number, kind: 'kill', node: string, restartAt: number }
  | { at: number, kind: 'stop', node: string, contAt: number }
  | { at: number, kind: 'term', node: string, restartAt: number }
  | { at: number, kind: 'reload', limits: Record<string, number>, restore: boolean }
  | { at: number, kind: 'partition', groups: [string[], string[]], healAt: number }
  | { at: number, kind: 'loss', node: string, probability: number, healAt: number }
  | { at: number, kind: 'dup', node: string, probability: number, healAt: number }
  | { at: number, kind: 'clock', node: string, stepMs: number, backAt: number }

export interface PlanSpec {
  seed: number
  nodes: string[]
  faultsMs: number
  kinds: ReadonlySet<FaultKind>
  reclaimMs: number
  reloadRules: readonly ReloadRule[]
}

/** Mean gap between fault events, ms: about 10 faults a minute. */
const MEAN_GAP_MS = 6000

export function makePlan (spec: PlanSpec): ChaosEvent[] {
  const rng = new Rng(spec.seed * 7919 + 1)
  const kinds = FAULT_KINDS.filter(k => spec.kinds.has(k))
  const events: ChaosEvent[] = []
  if (kinds.length === 0) return events
  const busyUntil = new Map<string, number>(spec.nodes.map(n => [n, 0]))
  const end = spec.faultsMs
  let reloaded = false
  let t = 2000 + Math.round(rng.exp(MEAN_GAP_MS / 2))
  while (t < end - 1000) {
    const kind = rng.pick(kinds)
    const free = spec.nodes.filter(n => (busyUntil.get(n) ?? 0) <= t)
    const node = free.length === 0 ? null : rng.pick(free)
    const until = (ms: number): number => Math.min(end, t + Math.round(ms))
    switch (kind) {
      case 'kill': {
        if (node === null) break
        // A short delay (back before it is settled) or a long one (past reclaimMs: settled or inherited first).
        const long = spec.reclaimMs + rng.int(1000, 8000)
        const restartAt = until(rng.chance(0.5) || t + long > end ? rng.int(500, 3000) : long)
        events.push({ at: t, kind, node, restartAt })
        busyUntil.set(node, restartAt + 1000)
        break
      }
      case 'stop': {
        // Longer than reclaimMs, or not at all: a shorter pause is what every GC pause already tests.
        const pause = spec.reclaimMs + rng.int(1000, 5000)
        if (node === null || t + pause > end) break
        const contAt = t + pause
        events.push({ at: t, kind, node, contAt })
        busyUntil.set(node, contAt + 1000)
        break
      }
      case 'term': {
        if (node === null) break
        const restartAt = until(rng.int(300, 3000))
        events.push({ at: t, kind, node, restartAt })
        busyUntil.set(node, restartAt + 1000)
        break
      }
      case 'reload': {
        const limits: Record<string, number> = {}
        for (const r of spec.reloadRules) limits[r.name] = rng.int(r.min, r.max)
        events.push({ at: t, kind, limits, restore: false })
        reloaded = true
        break
      }
      case 'partition': {
        const shuffled = rng.shuffle([...spec.nodes])
        const cut = rng.int(1, Math.floor(spec.nodes.length / 2))
        events.push({ at: t, kind, groups: [shuffled.slice(0, cut).sort(), shuffled.slice(cut).sort()], healAt: until(rng.int(2000, 10_000)) })
        break
      }
      case 'loss':
      case 'dup': {
        const victim = rng.pick(spec.nodes)
        events.push({ at: t, kind, node: victim, probability: Math.round(rng.int(5, 35)) / 100, healAt: until(rng.int(3000, 15_000)) })
        break
      }
      case 'clock': {
        if (node === null) break
        // Whole seconds: libfaketime's offset file takes seconds.
        const stepMs = (rng.chance(0.5) ? 1 : -1) * rng.int(2, 10) * 1000
        const backAt = until(rng.int(5000, 20_000))
        events.push({ at: t, kind, node, stepMs, backAt })
        break
      }
    }
    t += 500 + Math.round(rng.exp(MEAN_GAP_MS))
  }
  if (reloaded) {
    const limits: Record<string, number> = {}
    for (const r of spec.reloadRules) limits[r.name] = r.base
    events.push({ at: end, kind: 'reload', limits, restore: true })
  }
  return events
}

/** One line per event, for the log of a run and for replaying a failing seed by eye. */
export function describeEvent (e: ChaosEvent): string {
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)}s`
  switch (e.kind) {
    case 'kill': return `${s(e.at)} kill -9 ${e.node}, restart at ${s(e.restartAt)}`
    case 'stop': return `${s(e.at)} SIGSTOP ${e.node}, SIGCONT at ${s(e.contAt)}`
    case 'term': return `${s(e.at)} SIGTERM ${e.node}, restart at ${s(e.restartAt)}`
    case 'reload': return `${s(e.at)} ${e.restore ? 'restore' : 'reload'} ${Object.entries(e.limits).map(([k, v]) => `${k}=${v}`).join(' ')} (SIGHUP every live node)`
    case 'partition': return `${s(e.at)} partition [${e.groups[0].join(',')}] | [${e.groups[1].join(',')}], heal at ${s(e.healAt)}`
    case 'loss': return `${s(e.at)} ${Math.round(e.probability * 100)}% loss on ${e.node}'s links, heal at ${s(e.healAt)}`
    case 'dup': return `${s(e.at)} ${Math.round(e.probability * 100)}% duplicated packets from ${e.node}, heal at ${s(e.healAt)}`
    case 'clock': return `${s(e.at)} wall clock of ${e.node} ${e.stepMs > 0 ? '+' : ''}${e.stepMs} ms, back at ${s(e.backAt)}`
  }
}

/** Counts per kind, e.g. "kill 2, stop 1, reload 3". */
export function summarizePlan (events: readonly ChaosEvent[]): string {
  const n = new Map<string, number>()
  for (const e of events) if (!(e.kind === 'reload' && e.restore)) n.set(e.kind, (n.get(e.kind) ?? 0) + 1)
  return [...n].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'
}
