/**
 * A key's rebalancing step on a tick: a glob key idle away from its home
 * goes home; otherwise, if the node expects to run out within its horizon
 * (or owes a burn), it asks one donor for tokens. Pure; the core calls it
 * for every active key while the node is running, not isolated and not
 * fenced (a fenced node gives nothing and asks for nothing).
 */
import type { KeyState } from '../core/limiter.js'
import { homeNode } from '../core/share.js'
import type { ClusterCore, Outbound } from './cluster-core.js'
import { horizon, needRate, type KeyExt } from './key-ext.js'
import { CLUSTER_VERSION, type Want } from './messages.js'

export function rebalance (c: ClusterCore, ks: KeyState, x: KeyExt, nowMs: number, out: Outbound[]): void {
  if (nowMs - x.wantSentAt < c.tuning.wantTimeoutMs) return
  if (c.view.shouldReturnHome(ks, x, nowMs)) {
    const home = homeNode(ks.key, c.seeds) as string
    const p = c.peers.get(home)
    if (p !== undefined) c.transfers.push(ks, x, p, Math.floor(ks.bucket.held), nowMs, out)
    return
  }
  // After a want that got nothing, one per gap: fruitless wants are bounded by the key count, not the request rate.
  if (nowMs - x.lastWantAt < c.tuning.wantGapMs) return
  const rate = needRate(x)
  // A burn owed is asked for too: tokens that should not exist are paid off where they sit.
  if (rate <= 0 && x.burn <= 0) return
  const need = rate * horizon(ks, c.tuning.horizonMs, nowMs, c.calendar) / 1000
  const held = ks.bucket.held
  if (x.burn <= 0 && held >= need && held >= 1) return
  const donor = c.view.chooseDonor(ks, nowMs, x.burn > 0)
  if (donor === undefined) return
  const want = Math.max(1, Math.ceil(2 * need - held + x.burn))
  x.wantSentAt = nowMs
  x.lastWantAt = nowMs
  c.counters.wantsSent++
  const w: Want = { v: CLUSTER_VERSION, t: 'want', node: c.node, epoch: c.epoch, inc: c.incarnation, key: ks.key, want }
  c.transfers.noteWant(donor.name, w, nowMs)
  c.request(out, donor.name, w)
}
