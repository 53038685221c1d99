/**
 * The transfer ledger: moves tokens between nodes so that no message, lost,
 * duplicated, delayed or reordered, can ever create one.
 *
 * Tokens move only in grants. A grant from giver G (incarnation epoch Eg) to
 * receiver R (epoch Er) carries a sequence number, per (G, Eg, R, Er) pair,
 * starting at 1. G debits its bucket BEFORE the grant exists (so tokens in a
 * grant are no longer spendable at G), and keeps the grant until R acks it.
 *
 * R applies grant `seq` only if seq == applied + 1 for that pair, then sets
 * applied = seq. Each grant is therefore credited at most once (a duplicate
 * or an old retransmit has seq <= applied) and in order. A grant that
 * arrives early (a gap: seq > applied + 1, common when grants race over
 * separate streams) is held, up to MAX_EARLY per pair, and applied as soon
 * as the gap fills; without that, every reordering cost a retransmit
 * timeout (the simulator found this: utilization fell with the key count). `applied` is a monotone counter only R writes; R tells G
 * (the reply to a pushed grant, an ack request for the grants that answered
 * wants, and its full syncs' gossip), and G drops grants up to it and
 * retransmits the rest after a timeout.
 *
 * A grant addressed to an epoch that is not R's current one is never applied:
 * its tokens are stranded (counted), never created. Because the ledger is per
 * node pair, not per key, key state can be evicted without losing the
 * dedupe information.
 *
 * Grants are credited only from a giver's CURRENT epoch (as gossip tells
 * it), or from an epoch whose applied mark is still kept. So when a giver
 * restarts, the marks of its old epoch can go at once: a delayed copy of
 * an old grant finds no mark and no current epoch, and is refused (its
 * tokens are stranded, never credited twice). Memory is one mark per live
 * peer, however many restarts, joins and leaves there were.
 *
 * Tokens in transit are also counted per key (`transit`), kept in step with
 * the outboxes as grants are queued, acked and stranded: status and gossip
 * read one key's figure in O(1), never by a scan of the outboxes.
 * Invariant: transit.get(k) == Σ over outboxes' unacked grants of k's items.
 *
 * This file is the giver's side (outboxes, resends, transit); R's applied
 * marks, early grants and dead givers are ledger-marks.ts.
 */
import type { Grant, GrantItem } from './messages.js'
import { CLUSTER_VERSION } from './messages.js'
import { AppliedMarks, type ApplyResult } from './ledger-marks.js'

export { MAX_EARLY, type ApplyResult } from './ledger-marks.js'

interface Outbox {
  to: string
  toEpoch: string
  nextSeq: number
  acked: number
  /** Resends in a row while the receiver was not alive (their spacing doubles with each). */
  quietResends: number
  /** Unacked grants in seq order, with when each was last sent and when it was made. */
  grants: Array<{ grant: Grant, sentAt: number, madeAt: number }>
}

/** One outbox's unacked grants, for status and the simulator's settle probe. */
export interface OutboxView {
  to: string
  toEpoch: string
  /** Tokens in its unacked grants. */
  tokens: number
  /** When its oldest unacked grant was made (monotonic). */
  since: number
}

/** To a receiver not alive, resends are spaced up to this many times the retransmit time (8 s at the defaults). */
export const MAX_QUIET_BACKOFF = 8

export class Ledger {
  private readonly node: string
  private readonly epoch: string
  private readonly inc: number
  private readonly out = new Map<string, Outbox>()
  /** The receiver's side: applied marks, early grants, dead givers (ledger-marks.ts). */
  private readonly marks = new AppliedMarks()
  /** Tokens in grants that can never be applied (the receiver's epoch moved on). */
  stranded = 0
  /** Key -> tokens in unacked grants (see the header); absent means 0. */
  private readonly transit = new Map<string, number>()
  /** Keys whose transit fell since `settledKeys` was last read: their custody must be announced again. */
  private readonly settledSince = new Set<string>()

  constructor (node: string, epoch: string, inc = 1) {
    this.node = node
    this.epoch = epoch
    this.inc = inc
  }

  /** Record a new grant to (to, toEpoch). The caller has already debited the items. */
  grant (to: string, toEpoch: string, items: GrantItem[], nowMs: number): Grant {
    const id = `${to}/${toEpoch}`
    let box = this.out.get(id)
    if (box === undefined) {
      box = { to, toEpoch, nextSeq: 1, acked: 0, quietResends: 0, grants: [] }
      this.out.set(id, box)
    }
    const g: Grant = { v: CLUSTER_VERSION, t: 'grant', node: this.node, epoch: this.epoch, inc: this.inc, to, toEpoch, seq: box.nextSeq++, items }
    box.grants.push({ grant: g, sentAt: nowMs, madeAt: nowMs })
    for (const [k, n] of items) this.transit.set(k, (this.transit.get(k) ?? 0) + n)
    return g
  }

  /**
   * The receiver says it has applied every grant up to `applied`. Returns the
   * grants this drops (each grant once, ever): positions.ts counts them as given.
   */
  ack (to: string, toEpoch: string, applied: number): Grant[] {
    const box = this.out.get(`${to}/${toEpoch}`)
    if (box === undefined || applied <= box.acked) return []
    box.acked = Math.min(applied, box.nextSeq - 1)
    let i = 0
    while (i < box.grants.length && box.grants[i].grant.seq <= box.acked) i++
    if (i === 0) return []
    const dropped = box.grants.splice(0, i).map(s => s.grant)
    for (const g of dropped) this.settle(g)
    return dropped
  }

  /** The highest seq acked to (to, toEpoch), or undefined once that outbox is gone (stranded or forgotten). */
  ackedTo (to: string, toEpoch: string): number | undefined {
    return this.out.get(`${to}/${toEpoch}`)?.acked
  }

  /**
   * Decide an incoming grant. Returns what to credit now, in seq order: the
   * grant and any held successors it unblocks (empty if none may be).
   */
  apply (g: Grant, currentEpoch: string | undefined): { result: ApplyResult, credit: Grant[] } {
    if (g.to !== this.node || g.toEpoch !== this.epoch) return { result: 'wrong-epoch', credit: [] }
    return this.marks.apply(g, currentEpoch)
  }

  appliedFrom (giver: string, giverEpoch: string): number {
    return this.marks.appliedFrom(giver, giverEpoch)
  }

  /** [giver, epoch, applied] for gossip, for givers' current epochs only (ledger-marks.ts). */
  acks (current: ReadonlyMap<string, string>): Array<[string, string, number]> {
    return this.marks.acks(current)
  }

  /**
   * Grants unacked for at least `afterMs`: to resend (in seq order). Marks
   * them sent now. To a receiver that is not `alive` (no gossip heard lately:
   * crashed, or cut off), the spacing doubles with each resend in a row, up
   * to `MAX_QUIET_BACKOFF` times `afterMs`, so a dead incarnation's outbox
   * costs a bounded trickle, not a message a second forever; once it is
   * alive again, the next tick resends (its grants wait for an ack, or, for
   * an incarnation that never returns, for reclaim).
   */
  due (nowMs: number, afterMs: number, alive: (to: string) => boolean = () => true): Grant[] {
    const out: Grant[] = []
    for (const box of this.out.values()) {
      if (box.grants.length === 0) continue
      const up = alive(box.to)
      if (up) box.quietResends = 0
      const wait = afterMs * Math.min(MAX_QUIET_BACKOFF, 2 ** box.quietResends)
      // Resend from the first unacked one: the receiver applies in order only.
      if (nowMs - box.grants[0].sentAt >= wait) {
        for (const s of box.grants) { s.sentAt = nowMs; out.push(s.grant) }
        if (!up) box.quietResends++
      }
    }
    return out
  }

  /** A message came from `to` (a want or a reply): it is reachable, whatever its gossip says, so resends to it go at the normal pace. */
  heard (to: string): void {
    for (const box of this.out.values()) if (box.to === to) box.quietResends = 0
  }

  /**
   * Peer `to` is now incarnation `epoch`: grants to its older epochs can never
   * be applied. Returns, per key, the tokens stranded that way.
   */
  peerEpoch (to: string, epoch: string): Map<string, number> {
    const lost = new Map<string, number>()
    for (const [id, box] of this.out) {
      if (box.to !== to || box.toEpoch === epoch) continue
      for (const { grant } of box.grants) {
        for (const [k, n] of grant.items) {
          lost.set(k, (lost.get(k) ?? 0) + n)
          this.stranded += n
        }
        this.settle(grant)
      }
      this.out.delete(id)
    }
    return lost
  }

  /** Receiver epochs of `to` with an outbox here. */
  epochsOf (to: string): string[] {
    const out: string[] = []
    for (const box of this.out.values()) if (box.to === to) out.push(box.toEpoch)
    return out
  }

  /**
   * A settled dead account (reclaim.ts): drop the outbox to (to, toEpoch)
   * and return its unacked tokens per key. They are neither stranded nor
   * in transit any more: the settlement credits them back.
   */
  dropOutbox (to: string, toEpoch: string): Map<string, number> {
    const back = new Map<string, number>()
    const box = this.out.get(`${to}/${toEpoch}`)
    if (box === undefined) return back
    for (const { grant } of box.grants) {
      for (const [k, n] of grant.items) back.set(k, (back.get(k) ?? 0) + n)
      this.settle(grant)
    }
    this.out.delete(`${to}/${toEpoch}`)
    return back
  }

  /** The unacked grants to (to, toEpoch), taken out of the ledger (a dead seed's settlement: estate-marks.ts decides them). */
  takeOutbox (to: string, toEpoch: string): Grant[] {
    const box = this.out.get(`${to}/${toEpoch}`)
    if (box === undefined) return []
    this.out.delete(`${to}/${toEpoch}`)
    for (const { grant } of box.grants) this.settle(grant)
    return box.grants.map(s => s.grant)
  }

  /** Every outbox goes (this account was reclaimed: its receivers settled those grants). */
  dropAll (): void {
    for (const box of this.out.values()) for (const { grant } of box.grants) this.settle(grant)
    this.out.clear()
  }

  /** Receivers with an outbox here, as [to, toEpoch], and their unacked tokens per key. */
  /** Every unacked grant's items, one entry per item: [receiver, receiver epoch, seq, key, tokens] (a journal checkpoint's `sent`). */
  unackedItems (): Array<[string, string, number, string, number]> {
    const out: Array<[string, string, number, string, number]> = []
    for (const box of this.out.values()) for (const { grant } of box.grants) for (const [k, n] of grant.items) out.push([box.to, box.toEpoch, grant.seq, k, n])
    return out
  }

  /** The epochs of `giver` whose grants this node has applied (their marks: a settled seed's, for its heir). */
  appliedEpochs (giver: string): string[] {
    return this.marks.appliedEpochs(giver)
  }

  unackedByReceiver (): Array<[string, string, Map<string, number>]> {
    const out: Array<[string, string, Map<string, number>]> = []
    for (const box of this.out.values()) {
      const m = new Map<string, number>()
      for (const { grant } of box.grants) for (const [k, n] of grant.items) m.set(k, (m.get(k) ?? 0) + n)
      if (m.size > 0) out.push([box.to, box.toEpoch, m])
    }
    return out
  }

  /** Tokens of `key` in unacked grants to `to` (any of its epochs). */
  inTransitTo (to: string, key: string): number {
    let n = 0
    for (const box of this.out.values()) {
      if (box.to !== to) continue
      for (const { grant } of box.grants) for (const [k, a] of grant.items) if (k === key) n += a
    }
    return n
  }

  /** Incarnations of `giver` up to `inc` are settled dead (reclaim.ts): their grants are never applied, and their marks go. */
  deadGiver (giver: string, inc: number, newer?: ReadonlySet<string>): void {
    this.marks.deadGiver(giver, inc, newer)
  }

  /** A giver is now incarnation `epoch`: the marks of its other epochs go (see the header). */
  giverEpoch (giver: string, epoch: string): void {
    this.marks.giverEpoch(giver, epoch)
  }

  /** A peer left for good: its outboxes (stranded, returned per key) and its marks go. */
  forgetPeer (name: string): Map<string, number> {
    const lost = this.peerEpoch(name, '')
    this.giverEpoch(name, '')
    return lost
  }

  /** Grants of ours whose refusal we acted on (a refusal is honoured once, however often it is repeated). */
  private readonly takenBack = new Set<string>()

  /** Whether to take back the tokens of refused grant `g` now (true once per grant). */
  takeBack (g: Grant): boolean {
    const id = `${g.to}/${g.toEpoch}#${g.seq}`
    if (this.takenBack.has(id)) return false
    if (this.takenBack.size >= 4096) this.takenBack.delete(this.takenBack.values().next().value as string)
    this.takenBack.add(id)
    return true
  }

  /** How many entries the ledger keeps: outboxes, applied marks, early-grant sets (bounded by live peers). */
  get size (): number {
    return this.out.size + this.marks.size
  }

  /** Tokens in all unacked grants. */
  unackedTotal (): number {
    let n = 0
    for (const box of this.out.values()) for (const { grant } of box.grants) for (const [, a] of grant.items) n += a
    return n
  }

  /** Every outbox with unacked grants. */
  outboxes (): OutboxView[] {
    const out: OutboxView[] = []
    for (const box of this.out.values()) {
      if (box.grants.length === 0) continue
      let tokens = 0
      for (const { grant } of box.grants) for (const [, a] of grant.items) tokens += a
      out.push({ to: box.to, toEpoch: box.toEpoch, tokens, since: box.grants[0].madeAt })
    }
    return out
  }

  /** Tokens sitting in unacked grants (in transit), per key; with `to`, only grants to receivers it accepts. */
  inTransit (to?: (receiver: string) => boolean): Map<string, number> {
    const m = new Map<string, number>()
    for (const box of this.out.values()) {
      if (to !== undefined && !to(box.to)) continue
      for (const { grant } of box.grants) for (const [k, n] of grant.items) m.set(k, (m.get(k) ?? 0) + n)
    }
    return m
  }

  /** Tokens of `key` sitting in unacked grants (in transit): O(1). */
  inTransitOf (key: string): number {
    return this.transit.get(key) ?? 0
  }

  /**
   * The keys whose transit fell (acked or stranded) since the last call, and
   * forgets them: the gossip offers them so that peers learn the new custody
   * (shortfall.ts) even of a key that has gone quiet here.
   */
  settledKeys (): string[] {
    if (this.settledSince.size === 0) return []
    const out = [...this.settledSince]
    this.settledSince.clear()
    return out
  }

  /** A grant left its outbox (acked or stranded): its tokens are no longer in transit. */
  private settle (g: Grant): void {
    for (const [k, n] of g.items) {
      const left = (this.transit.get(k) ?? 0) - n
      // Whole tokens in practice; the epsilon only keeps float dust from leaving an entry behind.
      if (left > 1e-9) this.transit.set(k, left)
      else this.transit.delete(k)
      this.settledSince.add(k)
    }
  }
}
