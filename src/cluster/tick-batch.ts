/**
 * A tick's wants and pushes, one message per peer.
 *
 * Why. `rebalance` runs key by key on every tick, and each key's step sent
 * its own messages. A node short of several keys at once asked the same
 * donor once per key: at keys100 with 50 nodes (every node a seed) a tick
 * sent 1.91 wants per donor it asked, 2.09 with 5 seeds, and most of a
 * want's bytes were its header (sender, epoch, incarnation). A member
 * returning what it won't use to its lenders pushed one grant per key:
 * 48 pushes per member per second at keys100 with 5 seeds of 50, 88% of
 * them of one token, and each was a grant, its ack and a journal entry the
 * seed copied to its replicas.
 *
 * So the tick collects both here and, at its end, sends each donor one want
 * that names every key (`Want.more`; the donor answers with one grant of
 * the keys it gives, or one `none`: transfers.ts `onWant`), and each peer
 * one pushed grant of every key returned to it (transfers.ts `pushMany`).
 *
 * Nothing else changes: the same tokens move at the same moment; each key
 * still has its own round of wants (`wantsOut`, `wantSentAt`), settled key
 * by key when the reply or the failure comes (transfers.ts `onReply`,
 * `wantAnswered`).
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore, Outbound } from './cluster-core.js'
import type { KeyExt } from './key-ext.js'
import { CLUSTER_VERSION, type Want, type WantItem } from './messages.js'
import type { Peer } from './peers.js'

export type Gift = [ks: KeyState, x: KeyExt, n: number]

export class TickBatch {
  /** Donor -> the keys asked of it this tick, in the order they were asked. */
  private readonly wants = new Map<string, WantItem[]>()
  /** Peer -> the keys pushed to it this tick. */
  private readonly pushes = new Map<Peer, Gift[]>()

  want (donor: string, key: string, want: number): void {
    const items = this.wants.get(donor)
    if (items === undefined) this.wants.set(donor, [[key, want]])
    else items.push([key, want])
  }

  push (p: Peer, ks: KeyState, x: KeyExt, n: number): void {
    const gifts = this.pushes.get(p)
    if (gifts === undefined) this.pushes.set(p, [[ks, x, n]])
    else gifts.push([ks, x, n])
  }

  /** Send this tick's wants and pushes: one request per donor, one grant per peer pushed to. */
  flush (c: ClusterCore, out: Outbound[], nowMs: number): void {
    for (const [p, gifts] of this.pushes) c.transfers.pushMany(p, gifts, nowMs, out)
    this.pushes.clear()
    for (const [donor, items] of this.wants) {
      const [[key, want], ...more] = items
      const w: Want = { v: CLUSTER_VERSION, t: 'want', node: c.node, epoch: c.epoch, inc: c.incarnation, key, want }
      if (more.length > 0) w.more = more
      c.transfers.checks.noteWant(donor, w, nowMs)
      c.request(out, donor, w)
    }
    this.wants.clear()
  }
}
