/**
 * bench/cluster.ts: its tables and targets.
 */
import { type Result } from './cluster-analysis.js'
import { type WorkloadId } from './cluster-trace.js'
import { type LatencySummary } from './stats.js'
import { fmtInt, fmtPct, fmtUs, renderTable } from './table.js'

// ---------------------------------------------------------------------------
// Output

export const LABEL: Record<WorkloadId, string> = {
  uniform: 'uniform 1.2x',
  zipf: 'zipf 1.2x',
  moving: 'moving hot 1.2x',
  'moving-1x': 'moving hot 1.0x',
  over: 'over: zipf 2x',
  'tb-zipf': 'token-bucket zipf 1.2x'
}

export function fmtMs (n: number): string {
  return Number.isFinite(n) ? `${Math.round(n)}` : n === Infinity ? 'never' : '-'
}

export function fmtUtil (n: number): string {
  return Number.isFinite(n) ? `${(n * 100).toFixed(1)}%` : '-'
}

export function fmtTraffic (t: Result['perNodePerSec']): string {
  return `per node ${fmtInt(t.wireOutBytes)} wire B/s out, ${t.gossipPublished.toFixed(1)} gossip msg/s published, ${t.gossipReceived.toFixed(1)} received, ` +
    `${t.requestsOut.toFixed(1)} transfer req/s`
}

export function mainTable (rs: Result[]): string {
  const head = ['workload', 'quotad util', 'static util', 'overshoot', 'follow p50/max ms', 'wire B/s', 'gossip msg/s', 'xfer req/s', 'p50/p99 µs', 'p50/p99 µs']
  const rows = rs.map(r => [
    LABEL[r.workload],
    fmtUtil(r.utilization),
    fmtUtil(r.staticUtilization),
    String(r.overshoot) + (r.overshoot > 0 ? ' !!' : ''),
    r.follow.length === 0 ? '-' : `${fmtMs(r.followP50Ms)} / ${fmtMs(r.followMaxMs)}`,
    fmtInt(r.perNodePerSec.wireOutBytes),
    `${r.perNodePerSec.gossipPublished.toFixed(1)} / ${r.perNodePerSec.gossipReceived.toFixed(1)}`,
    r.perNodePerSec.requestsOut.toFixed(1),
    `${fmtUs(r.latency.cluster.p50Us)} / ${fmtUs(r.latency.cluster.p99Us)}`,
    `${fmtUs(r.latency.single.p50Us)} / ${fmtUs(r.latency.single.p99Us)}`
  ])
  return renderTable(head, rows, [['', 4], ['', 1], ['per node (mean)', 3], ['decision, N-node', 1], ['1-node', 1]])
}

export function detailTable (rs: Result[]): string {
  const head = ['workload', 'demand/s', 'allowed/s', 'min win util', 'full wins', 'wants/s', 'tokens moved/s', 'wire B/s max', 'bench', 'nodes', '1-node', 'other', 'tick p99/max ms', 'errors']
  const rows = rs.map(r => [
    LABEL[r.workload],
    fmtInt(r.demandPerSec),
    fmtInt(r.allowedPerSec),
    fmtUtil(r.minWindowUtilization),
    String(r.fullWindows),
    r.perNodePerSec.wantsSent.toFixed(1),
    r.perNodePerSec.tokensMoved.toFixed(1),
    fmtInt(r.perNodePerSec.wireOutBytesMax),
    fmtPct(r.cpuPct.bench),
    fmtPct(r.cpuPct.nodes),
    fmtPct(r.cpuPct.single),
    fmtPct(r.cpuPct.other),
    `${r.tickGapMs.p99.toFixed(1)} / ${r.tickGapMs.max.toFixed(1)}`,
    String(r.errors + r.mirrorErrors + r.latency.probeErrors) + (r.ambiguousWindows > 0 ? ` (${r.ambiguousWindows} ambig.)` : '')
  ])
  return renderTable(head, rows, [['', 5], ['per node (mean)', 2], ['', 1], ['CPU, % of one core', 4], ['', 2]])
}

export interface Target { name: string, value: string, goal: string, met: boolean | null }

export function targets (all: Array<{ n: number, results: Result[], pooled: { cluster: LatencySummary, single: LatencySummary } }>): Target[] {
  const out: Target[] = []
  for (const { n, results, pooled } of all) {
    for (const id of ['zipf', 'moving', 'moving-1x'] as const) {
      const r = results.find(x => x.workload === id)
      if (r === undefined) continue
      out.push({
        name: `N=${n} ${LABEL[id]}: utilization (static split: ${fmtUtil(r.staticUtilization)})`,
        value: fmtUtil(r.utilization),
        goal: '>= 95%',
        met: Number.isFinite(r.utilization) ? r.utilization >= 0.95 : null
      })
    }
    for (const m of results.filter(x => x.follow.length > 0)) {
      out.push({ name: `N=${n} ${LABEL[m.workload]}: moved hot spot followed (max over ${m.follow.length} moves)`, value: `${fmtMs(m.followMaxMs)} ms`, goal: '<= 1000 ms', met: m.followMaxMs <= 1000 })
    }
    const ratio = pooled.cluster.p99Us / pooled.single.p99Us
    out.push({
      name: `N=${n} decision p99 under gossip vs single node (all workloads pooled; ${pooled.cluster.n}/${pooled.single.n} probes)`,
      value: `${fmtUs(pooled.cluster.p99Us)} vs ${fmtUs(pooled.single.p99Us)} µs (${((ratio - 1) * 100).toFixed(0)}%)`,
      goal: '<= +20%',
      met: Number.isFinite(ratio) ? ratio <= 1.2 : null
    })
    for (const r of results) {
      if (r.overshoot > 0) out.push({ name: `N=${n} ${LABEL[r.workload]}: overshoot`, value: String(r.overshoot), goal: '0', met: false })
    }
  }
  return out
}

