/**
 * The cluster part of `status`: peers, rule agreement, and per key the
 * holdings, rate, cluster-wide remaining, transfers, stranded tokens and the
 * shortfall. Plain JSON, computed from the state machine without changing it.
 *
 * `stranded` and `shortfall` answer different questions. `stranded`: tokens
 * this node knows are out of reach (its grants to ended epochs, credits it
 * could not place, and what peers not alive last said they held). It goes
 * back to 0 for a dead peer once that peer restarts, even though its tokens
 * are gone. `shortfall` (shortfall.ts): the stock minus what every live node
 * reports it has; it stays up until the tokens are back somewhere live.
 */
import { needsLease } from './member-gossip.js'
import type { ClusterCore } from './cluster-core.js'
import { deferredTotal, type KeyExt } from './key-ext.js'
import { keyShortfall, knowsShortfall } from './shortfall.js'
import { estateOf } from './estate.js'

const r3 = (n: number): number => Math.round(n * 1000) / 1000

/** `nowMs` is monotonic; `wallMs` the wall clock read with it (for the calendar's skew). */
export function clusterStatus (core: ClusterCore, nowMs: number, wallMs: number, maxKeys = 100): Record<string, unknown> {
  const peers = [...core.peers.all()].map(p => ({
    name: p.name,
    id: core.membership.idOf(p.name),
    sameCluster: p.sameCluster,
    epoch: p.epoch,
    alive: core.peers.isAlive(p, nowMs),
    incarnation: p.inc,
    leaving: p.leaving,
    fenced: p.fenced,
    lastHeardMs: Math.round(nowMs - p.lastHeard),
    clockOffsetMs: Math.round(p.clockOffsetMs)
  }))
  const rules = core.limiter.rules.map(r => {
    const agree: string[] = []
    const differ: string[] = []
    for (const p of core.peers.all()) {
      if (!core.peers.isAlive(p, nowMs)) continue
      if (p.sameCluster && p.rules[r.name] === r.hash) agree.push(p.name)
      else differ.push(p.name)
    }
    return { name: r.name, hash: r.hash, agree, differ, shared: differ.length === 0 }
  })
  // Grants to receivers not alive: waiting for reclaim (or a heal), not for an ack.
  const toDead = core.ledger.inTransit(to => !core.receiverAlive(to, nowMs))
  const keys = []
  for (const ks of core.limiter.states()) {
    if (keys.length >= maxKeys) break
    const x = ks.ext as KeyExt | null
    if (x === null) continue
    ks.bucket.advance(nowMs)
    keys.push({
      key: ks.key,
      rule: ks.rule.name,
      held: r3(ks.bucket.held),
      outstanding: r3(ks.bucket.outstanding(nowMs)),
      deferred: r3(deferredTotal(x)),
      rate: r3(x.rate),
      clusterRemaining: r3(core.view.clusterRemaining(ks, nowMs)),
      transfersIn: x.transfersIn,
      transfersOut: x.transfersOut,
      inTransitOut: core.ledger.inTransitOf(ks.key),
      inTransitToDead: toDead.get(ks.key) ?? 0,
      stranded: r3(x.stranded + strandedAtDeadPeers(core, ks.key, nowMs)),
      // Left out at a member for a rule decided at the seeds: it hears none of their lines of it.
      shortfall: knowsShortfall(core, ks) ? r3(keyShortfall(core, ks, nowMs)) : undefined,
      owed: r3(x.burn),
      reserve: ks.reserve === Infinity ? 'all' : r3(ks.reserve),
      tight: x.tight,
      debt: x.debt,
      overdraft: x.overdraft
    })
  }
  return {
    cluster: {
      epoch: core.epoch,
      incarnation: core.incarnation,
      phase: core.phase,
      calendarSkewMs: Math.round(core.calendar.at(nowMs) - wallMs),
      // The wall clock is off a quorum's and the calendar keeps the cluster's time instead (cluster-core.ts observeWall).
      wallClockOff: core.wallClockOff,
      ruleChanges: core.transitions.toJSON(),
      clusterHash: core.clusterHash,
      // Alive peers whose seeds, pinned ids or timings differ: no tokens move to or from them.
      clusterDiffers: [...core.peers.all()].filter(p => core.peers.isAlive(p, nowMs) && !p.sameCluster).map(p => p.name),
      refused: { ...core.membership.refused },
      admission: { ...core.membership.admission, admitted: core.membership.members().length },
      isolated: core.isolated(nowMs),
      fenced: core.fenced(nowMs),
      // The lease (lease.ts): whether it holds, how long it has been fenced, and each voter's last echo.
      lease: core.fence.status(nowMs),
      // False: a member that decides no rule itself and holds nothing asks for no lease (member-gossip.ts), so is fenced.
      leaseNeeded: needsLease(core, nowMs),
      // Attestations and settlements of dead accounts without a share (reclaim.ts).
      reclaim: core.reclaim.status(),
      allocate: core.limiter.allocate,
      // A seed with a share: its journal's copies at the other seeds (replication.ts); a seed: the copies it keeps (replica-store.ts).
      replication: core.replication.status(),
      replicas: replicaStatus(core),
      // The dead seeds inherited here, the heirs of the others, and a read of a dead seed's copies under way (heir.ts).
      heir: core.heir.status(),
      // A restart after a crash that recovered its predecessor's books from the journal (journal.ts, recovery.ts).
      recovery: core.recovery === null ? null : { restoredTokens: core.recovery.restoredTokens, deferredShares: core.recovery.deferredShares, startedAt: new Date(core.recovery.calStartMs).toISOString() },
      strandedInLedger: core.ledger.stranded,
      inTransitToDead: [...toDead.values()].reduce((a, b) => a + b, 0),
      // Unacked grants per receiver epoch, oldest first (at most 16): the receiver's epoch as this node last heard
      // it tells a grant on its way (same epoch, alive) from one waiting for an ended epoch's marks.
      unacked: unackedStatus(core, nowMs),
      counters: { ...core.counters, ...core.forwarding.counters, ...repeats(core) }
    },
    peers,
    ruleAgreement: rules,
    clusterKeys: keys
  }
}

function unackedStatus (core: ClusterCore, nowMs: number): Array<Record<string, unknown>> {
  return core.ledger.outboxes().sort((a, b) => a.since - b.since).slice(0, 16).map(b => {
    const p = core.peers.get(b.to)
    return { to: b.to, toEpoch: b.toEpoch, tokens: b.tokens, ageMs: Math.round(nowMs - b.since), receiverEpoch: p?.epoch ?? null, receiverAlive: core.receiverAlive(b.to, nowMs) }
  })
}

/** Tokens that peers no longer alive last said they held or had outstanding. */
function strandedAtDeadPeers (core: ClusterCore, key: string, nowMs: number): number {
  let n = 0
  for (const p of core.peers.all()) {
    if (core.peers.isAlive(p, nowMs)) continue
    const k = p.keys.get(key)
    if (k !== undefined) n += k.held + k.outstanding
  }
  return n
}

/** Estates by copy (core, writer -> the copy's incarnation, generation, length and the rules, and what it showed): a copy is replayed once per change, not per status. */
const estates = new WeakMap<ClusterCore, Map<string, { at: string, shown: unknown }>>()

/** A seed's copies of other seeds' journals, each with the estate a heir would credit from it (estate.ts): at most 16 keys listed. */
function replicaStatus (core: ClusterCore): Record<string, unknown> | null {
  const st = core.replicas?.status()
  if (st === undefined) return null
  let cache = estates.get(core)
  if (cache === undefined) estates.set(core, cache = new Map())
  for (const writer of Object.keys(st)) {
    const copy = core.replicas?.get(writer)
    if (copy === undefined) continue
    const at = `${copy.inc}/${copy.gen}/${copy.text.length}/${core.limiter.rules.map(r => r.hash).join()}`
    let hit = cache.get(writer)
    if (hit?.at !== at) {
      let shown: unknown
      try {
        const e = estateOf(copy.text, writer, core.cluster, { rules: core.limiter.rules, match: k => core.limiter.ruleFor(k) }, core.seeds)
        const keys = [...e.credits].sort((a, b) => b[1] - a[1]).slice(0, 16)
        shown = { tokens: e.tokens, keys: Object.fromEntries(keys), listed: keys.length, total: e.credits.size }
      } catch (err) {
        shown = { error: (err as Error).message }
      }
      cache.set(writer, hit = { at, shown })
    }
    Object.assign(st[writer] as object, { estate: hit.shown })
  }
  return st
}

/** Quiet gossips sent as `hb`s, and those received that were read or dropped (gossip-repeat.ts). */
function repeats (core: ClusterCore): { hbSent: number, hbRead: number, hbDropped: number } {
  const r = core.gossip.repeat
  return { hbSent: r.own.repeats + r.copy.repeats, hbRead: r.reader.counters.read, hbDropped: r.reader.counters.dropped }
}
