/**
 * Settlement of a dead account, once a quorum of voters attests it
 * (reclaim.ts, cluster-protocol.md, "Reclaim of dead members"): what each survivor does with its
 * own books, on its own and once. A member's settlement credits what the
 * dead account held of this node's tokens; a dead seed with a share is
 * inherited instead (heir.ts), and what this node holds of its tokens is
 * held of its heir's. Pure; Reclaim calls it and marks the incarnation
 * settled after.
 *
 * Apart from reclaim.ts, which decides who is dead (attestation, quorum,
 * the dead account's own view): this file only moves tokens, and each
 * survivor's figures here are its own (no survivor's settlement depends on
 * another's).
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { ext } from './key-ext.js'
import type { PeerAccount } from './journal.js'
import type { Peer } from './peers.js'
import type { Reclaim } from './reclaim.js'
import { horizonAt } from './recovery.js'

/**
 * Settle a dead member (or a seed whose share is gone): credit what it held
 * of our tokens (reclaim.ts's header), and drop our outboxes and positions
 * with it.
 */
export function settleMember (c: ClusterCore, r: Reclaim, node: string, inc: number, nowMs: number): void {
  const p = c.peers.get(node)
  // The dead account's epochs: all we know of the node, less a newer incarnation's and what it carries.
  const live = p !== undefined && p.inc > inc ? new Set([p.epoch, ...p.carries]) : new Set<string>()
  const epochs = new Set<string>()
  for (const e of c.positions.accounts(node).keys()) if (!live.has(e)) epochs.add(e)
  for (const e of c.ledger.epochsOf(node)) if (!live.has(e)) epochs.add(e)
  for (const e of r.restored.get(node)?.keys() ?? []) if (!live.has(e)) epochs.add(e)
  for (const e of r.marks.epochsOf(node)) if (!live.has(e)) epochs.add(e)
  // Nor a newer incarnation's, which a restart from its journal may hold before it hears that incarnation (the
  // journal names each account's incarnation; chaos 3+2 seed 10: a seed's restart settled a member's old incarnation
  // and credited what the member's new one held of its tokens as well).
  for (const e of epochs) if ((c.journal.incOf(node, e) ?? 0) > inc) epochs.delete(e)
  const cal = c.calendar.at(nowMs)
  const skew = Math.max(c.tuning.maxClockSkewMs, Math.abs(p?.clockOffsetMs ?? 0))
  for (const e of epochs) {
    // Per epoch: the journal's entry for what we hold of that account is zeroed by the same delta that credits
    // us (both are −position + unacked), in one batch: a crash and recovery can't settle it twice.
    const owed = new Map<string, number>()
    for (const [k, n] of c.positions.accounts(node).get(e) ?? []) owed.set(k, (owed.get(k) ?? 0) - n)
    for (const [k, n] of r.restored.get(node)?.get(e) ?? []) owed.set(k, (owed.get(k) ?? 0) - n)
    for (const [k, n] of c.ledger.dropOutbox(node, e)) owed.set(k, (owed.get(k) ?? 0) + n)
    // Ours to it that waited for its restart's marks (estate-marks.ts): unacked too; a restart drops what it recovered.
    for (const g of r.marks.release(node, e)) for (const [k, n] of g.items) owed.set(k, (owed.get(k) ?? 0) + n)
    c.positions.forgetAccount(node, e)
    r.restored.get(node)?.delete(e)
    r.returns.receiverSettled(node, e)
    for (const [k, n] of owed) credit(c, r, k, n, cal, skew, nowMs, [node, e])
  }
}

/**
 * Settle a dead seed with a share (heir.ts inherits its books): what this
 * node holds of its tokens is held of its heir's from now on (the heir
 * takes what the seed held of ours from the copy's `peers`), less our
 * unacked grants to it: they wait for the heir's marks, which say which
 * are in its books and which to take back (estate-marks.ts). Its grants
 * are refused from now on.
 */
export function settleSeed (c: ClusterCore, r: Reclaim, node: string, inc: number, nowMs: number): void {
  const heir = c.heir.homes.get(node) ?? c.heir.heirOf(node, (n) => r.settled.has(n) || n === node)
  const heirEpoch = heir === c.node ? c.epoch : c.peers.get(heir ?? '')?.epoch
  // A newer incarnation's own epoch is not the dead one's (what it carries is dropped when it learns: aboutMe).
  const p = c.peers.get(node)
  const live = p !== undefined && p.inc > inc ? p.epoch : undefined
  const epochs = new Set<string>([...c.positions.accounts(node).keys(), ...c.ledger.epochsOf(node), ...r.marks.epochsOf(node), ...(r.restored.get(node)?.keys() ?? [])])
  epochs.delete(live as string)
  for (const e of epochs) if ((c.journal.incOf(node, e) ?? 0) > inc) epochs.delete(e)
  // Its epoch as heard, though nothing here names it yet: a dead seed's copy inherited later may (Reclaim.restore).
  const dead = p !== undefined && p.inc <= inc ? p.epoch : undefined
  if (dead !== undefined) epochs.add(dead)
  // Our applied marks of its grants are final from now on (they are refused): its heir takes back those above them.
  r.returns.settled(node, dead, nowMs)
  for (const e of epochs) {
    const held = new Map<string, number>()
    for (const [k, n] of c.positions.accounts(node).get(e) ?? []) held.set(k, (held.get(k) ?? 0) + n)
    for (const [k, n] of r.restored.get(node)?.get(e) ?? []) held.set(k, (held.get(k) ?? 0) + n)
    // Counted as returned to it here; they wait for its heir's marks, which tell which to take back (estate-marks.ts).
    // (Its restart may have been heard first: then they wait for its own marks already, and move to the heir's.)
    const unacked = [...c.ledger.takeOutbox(node, e), ...r.marks.release(node, e)]
    for (const g of unacked) for (const [k, n] of g.items) held.set(k, (held.get(k) ?? 0) - n)
    c.positions.forgetAccount(node, e)
    r.restored.get(node)?.delete(e)
    // Only an epoch known to be of a settled incarnation: one of unknown incarnation may be a newer one's, which a
    // restart holds before it hears that incarnation.
    const known = incOfEpoch(c, p, node, e)
    if (known !== undefined && known <= inc) r.seedAccountSettled(node, e, heir)
    const relabel = heir !== undefined && heirEpoch !== undefined && heir !== c.node
    r.marks.hold(node, e, unacked, relabel ? [heir, heirEpoch] : undefined, nowMs)
    if (!relabel) continue
    for (const [k, n] of held) r.restore(heir, heirEpoch, k, n)
  }
  c.heir.died(node, inc)
}

/** The incarnation of `node`'s epoch `e`, where known: the journal's, else the peer table's (`carries[i]` is `inc - 1 - i`). */
export function incOfEpoch (c: ClusterCore, p: Peer | undefined, node: string, e: string): number | undefined {
  const named = c.journal.incOf(node, e)
  if (named !== undefined || p === undefined) return named
  if (p.epoch === e) return p.inc
  const i = p.carries.indexOf(e)
  return i < 0 ? undefined : p.inc - 1 - i
}

function credit (c: ClusterCore, r: Reclaim, key: string, n: number, cal: number, skew: number, nowMs: number, from: PeerAccount): void {
  if (Math.abs(n) < 1e-9) return
  let ks: KeyState
  try {
    ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
  } catch {
    c.ledger.stranded += Math.max(0, n)
    return
  }
  const x = ext(ks)
  // Never below zero without a relay; if it were (a peer that broke the rule), destroying is the safe side.
  if (n > 0) (x.deferred ??= []).push([n, horizonAt(ks.rule.config, cal, skew)])
  else x.burn += -n
  c.journal.record(key, n, n < 0, from)
  c.active.add(ks)
  r.settledTokens.set(key, (r.settledTokens.get(key) ?? 0) + n)
  r.counters.tokensSettled += n
}
