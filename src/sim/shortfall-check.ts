/**
 * The shortfall check of a run (scenarios with `shortfallCheckMs`): once the
 * load has ended and the cluster has idled a while, each live node's
 * shortfall for each key it has state for and can tell (src/cluster/shortfall.ts) must
 * agree with the audit's books (token-audit.ts), which see everything:
 *
 *     missing = stock - held by live nodes - in grants that can still apply
 *
 * - never more than missing: a node must not report tokens lost that some
 *   live node has (gossip has settled by then, so no staleness excuse);
 * - never less than missing, less the tokens survivors still have in
 *   grants (in transit out: custody to them, while the audit counts a grant
 *   to a dead incarnation as stranded; docs/design/2026-11-reclaim.md, finding 1).
 *
 * Both within rounding: gossip sends whole tokens from 8 up, so each peer's
 * four figures may be off by half a token each.
 */
import { needsLease } from '../cluster/member-gossip.js'
import { keyShortfall, knowsShortfall } from '../cluster/shortfall.js'
import type { Scenario } from './scenario.js'
import type { VirtualCluster } from './virtual-cluster.js'

export function checkShortfall (vc: VirtualCluster, keys: readonly string[], idleMs: number, sc: Pick<Scenario, 'capacityLoss'> = {}): string[] {
  vc.runUntil(vc.now + idleMs)
  // A heir that inherits during the idle time (a crash late in the run) changes its books: idle again after it, so
  // every node has heard the heir's gossip since (bounded: a read that never ends is the heir's own failure).
  for (let i = 0; i < 20 && inheriting(vc); i++) vc.runUntil(vc.now + idleMs)
  if (inheritedWithin(vc, idleMs)) vc.runUntil(vc.now + idleMs)
  const failures: string[] = []
  // With a quorum of voters alive (a cluster that lost its quorum for good stays fenced: that is the design), every
  // live node holds its lease again: a node left fenced admits nothing of a hard rule (issue 43, chaos seed 8).
  const any = vc.cores.values().next().value
  const quorate = any !== undefined && any.fence.quorum.isQuorum([...vc.cores.keys()])
  // A member that decides nothing itself and holds nothing asks for no lease (member-gossip.ts needsLease): fenced by design.
  for (const [name, core] of quorate ? vc.cores : []) if (needsLease(core, vc.mono(name)) && (!core.fence.lease.valid(vc.mono(name)) || core.fence.skewed)) failures.push(`${name} is still fenced after the idle tail${core.fence.skewed ? ` (its calendar is ${Math.round(core.fence.skewOffsetMs)} ms off the voters')` : ''}`)
  const slack = 1 + 2 * Math.max(0, vc.cores.size - 1)
  for (const k of keys) {
    const a = vc.audit.account(k)
    const missing = a.stock - a.held - a.transit
    // Nothing is lost for good: once the faults are over and the cluster idled, every token is at a live node, in a
    // stopped node's saved state, or in a grant that can still apply (issue 43: "no capacity lost for good"). Save
    // one loss by design: what was left of a dead seed's reservations in the copy its heir read (estate.ts), which
    // may have left in grants after the copy ended, so no heir may credit it (replica-reservations.ts bounds it).
    const reserved = reservationsLost(vc, k)
    const lost = missing - a.saved - reserved
    if (quorate && sc.capacityLoss === undefined && lost > slack) failures.push(`capacity: ${r(lost)} of ${k}'s ${r(a.stock)} lost after the idle tail (held ${r(a.held)}, in grants ${r(a.transit)}, saved ${r(a.saved)}, left of dead seeds' reservations ${r(reserved)})`)
    let out = 0
    for (const core of vc.cores.values()) out += core.ledger.inTransitOf(k)
    for (const [name, core] of vc.cores) {
      const ks = core.limiter.existing(k)
      if (ks === undefined || ks.ext === null || !knowsShortfall(core, ks)) continue
      const s = keyShortfall(core, ks, vc.mono(name))
      const what = `shortfall of ${k} at ${name}: ${r(s)}, the audit has ${r(missing)} missing`
      if (s > missing + slack) failures.push(`${what} (more than is missing)`)
      if (s < missing - out - slack) failures.push(`${what} and ${r(out)} in transit (less than is missing)`)
    }
    // Settlements (reclaim.ts) move tokens out of the dead accounts' estates: never more than the estates held,
    // once no cut-off process of a settled account lives on with books of its own.
    if (a.stranded < -1e-6 && !zombies(vc)) failures.push(`reclaim: settlements of ${k} credited ${r(-a.stranded)} more than the dead accounts held`)
  }
  return failures
}

/**
 * What the heirs could not credit of `key` for the reservations left in the
 * copies they read (estate.ts `lost`), per dead seed once: a heir that died
 * before its inheritance was durable leaves the estate to the next, which
 * reads a copy of the same journal again.
 */
function reservationsLost (vc: VirtualCluster, key: string): number {
  const byDead = new Map<string, number>()
  for (const c of vc.incarnations) {
    for (const e of c.heir.log) byDead.set(e.node, Math.max(byDead.get(e.node) ?? 0, e.lost.get(key) ?? 0))
  }
  let n = 0
  for (const x of byDead.values()) n += x
  return n
}

/** Whether a seed settled somewhere waits for its heir, or a heir reads. */
function inheriting (vc: VirtualCluster): boolean {
  for (const c of vc.cores.values()) if (c.heir.dead.size > 0 || c.heir.reading !== null) return true
  return false
}

/** Whether a live heir inherited within the last `ms` (its own calendar). */
function inheritedWithin (vc: VirtualCluster, ms: number): boolean {
  for (const [name, c] of vc.cores) for (const m of c.heir.mine.values()) if (vc.calendar(name) - m.calMs < ms) return true
  return false
}

/** Whether a live node is an incarnation another live node settled as dead (it has not learned yet). */
function zombies (vc: VirtualCluster): boolean {
  for (const x of vc.cores.values()) {
    for (const l of vc.cores.values()) if (l !== x && l.reclaim.isSettled(x.node, x.incarnation)) return true
  }
  return false
}

function r (n: number): number {
  return Math.round(n * 1000) / 1000
}
