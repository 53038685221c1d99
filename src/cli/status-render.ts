/**
 * `quotactl status` without --json: the node's status as a short summary a
 * person reads, from the same JSON `status` returns. Headings in this order:
 * the node, the cluster (if any), its peers, its rules, and the busiest keys.
 */

type Obj = Record<string, unknown>

const num = (v: unknown): number => typeof v === 'number' ? v : 0
const str = (v: unknown): string => typeof v === 'string' ? v : v === undefined || v === null ? '-' : String(v)
const arr = (v: unknown): Obj[] => Array.isArray(v) ? v as Obj[] : []

function pad (cells: string[], widths: number[]): string {
  return cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i])).join('  ').trimEnd()
}

function table (head: string[], rows: string[][]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i]?.length ?? 0)))
  return [pad(head, widths), ...rows.map(r => pad(r, widths))]
}

export function renderStatus (s: Obj): string {
  const out: string[] = []
  const cluster = s.cluster as Obj | undefined
  // `keys` counts key states in memory, and an idle key's state is dropped (its window passed: it holds what a new
  // key would), so "0 keys" after 11 acquires was right and read as a miscount. Said with the decisions beside it.
  const rules = arr(s.rules)
  const allowed = rules.reduce((n, r) => n + num(r.allowed), 0)
  const denied = rules.reduce((n, r) => n + num(r.denied), 0)
  const inMemory = num(s.keys)
  out.push(`node ${str(s.node)}: up ${Math.round(num(s.uptimeMs) / 1000)} s, ${inMemory} key${inMemory === 1 ? '' : 's'} in memory (idle keys are dropped), ` +
    `${allowed + denied} decision${allowed + denied === 1 ? '' : 's'} (${allowed} allowed, ${denied} denied), ${num(s.waiters)} waiting`)
  if (cluster !== undefined) {
    const counters = (cluster.counters ?? {}) as Obj
    const refused = (cluster.refused ?? {}) as Obj
    const lease = (cluster.lease ?? {}) as Obj
    const fenced = cluster.fenced === true ? `, FENCED for ${Math.round(num(lease.fencedForMs) / 1000)} s (no quorum of seeds echoes it: no hard-mode spending)` : ''
    out.push(`cluster: ${str(cluster.start)}, incarnation ${num(cluster.incarnation)}, ${cluster.isolated === true ? 'ISOLATED' : 'connected'}${fenced}` +
      `${cluster.allocate === false ? `, allocate=false (${allocateWhy(cluster)})` : ''}${cluster.phase !== 'running' ? `, ${str(cluster.phase)}` : ''}`)
    const renewals = (cluster.renewals ?? {}) as Obj
    const last = (renewals.last ?? null) as Obj | null
    if (num(renewals.count) > 0 && last !== null) {
      out.push(`  new incarnations in-process: ${num(renewals.count)}; the last, ${num(last.from)} -> ${num(last.to)} in ${num(last.tookMs)} ms: ${str(last.why)}`)
    }
    out.push(`  transfers: ${num(counters.tokensIn)} in, ${num(counters.tokensOut)} out; wants ${num(counters.wantsSent)} sent, ${num(counters.wantsServed)} served` +
      `; bad messages ${num(counters.badMessages)}; refused ${num(refused.impostor)} impostor, ${num(refused.unknown)} unknown; grants refused ${num(counters.grantsRefused)}`)
    const differs = arr(cluster.clusterDiffers)
    if (differs.length > 0) out.push(`  ANOTHER CLUSTER CONFIGURATION at: ${differs.join(', ')} (no tokens move to or from them)`)
    if (num(cluster.calendarSkewMs) !== 0) out.push(`  calendar ${num(cluster.calendarSkewMs)} ms from the wall clock (a wall-clock step being absorbed)`)
  }
  const peers = arr(s.peers)
  if (peers.length > 0) {
    out.push('', 'peers:')
    out.push(...table(['name', 'state', 'heard', 'offset'], peers.map(p => [
      str(p.name),
      p.alive === true ? (p.leaving === true ? 'leaving' : 'alive') : 'DEAD',
      `${num(p.lastHeardMs)} ms ago`,
      `${num(p.clockOffsetMs)} ms`
    ])).map(l => '  ' + l))
  }
  const agreement = new Map(arr(s.ruleAgreement).map(r => [str(r.name), r]))
  out.push('', 'rules:')
  out.push(...table(['name', 'limit', 'mode', 'in mem', 'allowed', 'denied', 'shared'], rules.map(r => {
    const a = agreement.get(str(r.name))
    const shared = a === undefined ? '-' : a.shared === true ? 'yes' : `NO (${arr(a.differ).join(', ')})`
    return [str(r.name), `${num(r.limit)}/${str(r.per)} ${str(r.algorithm)}`, str(r.mode), String(num(r.keys)), String(num(r.allowed)), String(num(r.denied)), shared]
  })).map(l => '  ' + l))
  const keys = arr(s.clusterKeys).length > 0 ? arr(s.clusterKeys) : arr(s.activeKeys)
  if (keys.length > 0) {
    const busy = [...keys].sort((a, b) => num(b.rate) - num(a.rate)).slice(0, 10)
    out.push('', `keys (${busy.length} of ${keys.length}${keys.length >= 100 ? '+' : ''}, busiest first):`)
    // short: the stock no live node accounts for (shortfall.ts); '-' outside cluster mode.
    out.push(...table(['key', 'held', 'out', 'rate/s', 'remaining', 'short', 'notes'], busy.map(k => {
      const notes = [
        num(k.stranded) > 0 ? `stranded ${num(k.stranded)}` : '',
        num(k.owed) > 0 ? `owes ${num(k.owed)}` : '',
        k.reserve === 'all' ? 'reserve all' : num(k.reserve) > 0 ? `reserve ${num(k.reserve)}` : '',
        k.tight === true ? 'tight' : '',
        num(k.debt) > 0 ? `debt ${num(k.debt)}` : ''
      ].filter(x => x !== '').join(', ')
      return [str(k.key).slice(0, 40), String(Math.floor(num(k.held))), String(Math.floor(num(k.outstanding))), num(k.rate).toFixed(1),
        k.clusterRemaining === undefined ? '-' : String(Math.floor(num(k.clusterRemaining))),
        k.shortfall === undefined ? '-' : String(Math.round(num(k.shortfall))), notes]
    })).map(l => '  ' + l))
  }
  return out.join('\n') + '\n'
}

/**
 * Why a node holds no pre-allocated share: its heir inherited it (a quorum of
 * seeds attested an incarnation it carried, or this one), or an unclean
 * restart found no usable journal (the share is stranded).
 */
function allocateWhy (cluster: Obj): string {
  const reclaim = (cluster.reclaim ?? {}) as Obj
  if (reclaim.droppedCarried === true || reclaim.reclaimed === true || num((cluster.renewals as Obj | undefined)?.count) > 0) return 'its share was inherited by its heir; it gets tokens by transfer'
  return 'restarted uncleanly without a usable journal, or its share was inherited: it gets tokens by transfer'
}
