/**
 * A node's graceful stop, as one pure state machine inside the cluster
 * core. The daemon and the simulator both drive it the same way: call
 * `beginStop`, keep ticking, and when `snapshot` appears, persist it and
 * shut the transport. Nothing about stopping is written twice.
 *
 *   running --beginStop--> draining --> announced --> settling --> stopped
 *
 * - draining: the node announces `leaving` (peers stop sending it tokens
 *   and asking it for any) and refuses every want from now on. It waits
 *   for its own requests in flight to settle (a want may still bring
 *   tokens) and for two gossip intervals, so that nodes stopping together
 *   hear of each other and don't hand tokens to each other.
 * - announced: one tick in which peers hear a gossip with what it holds now
 *   (a receiver checks a pushed grant against what its giver last said).
 * - settling: it hands every whole held token to live agreeing peers (the
 *   fastest consumer of each key first), then waits until they are acked,
 *   (or, sent to a peer's ended epoch, settled by its marks: estate-marks.ts),
 *   at most `handoffTimeoutMs`. Grants that reach it meanwhile are applied
 *   (and saved). Unacked grants may or may not have been applied: they are
 *   not saved (that could create tokens), so at worst they are stranded.
 * - stopped: the snapshot of what is left is taken in the same step that
 *   leaves settling, and from then on the core applies nothing: no want is
 *   served, no grant credited, no acquire admitted. So no token can be both
 *   in the saved state and somewhere else. (Before this machine, a node
 *   answered wants after saving: those tokens existed twice after restart.)
 *
 * Every wait is bounded: requests time out (`wantTimeoutMs`), and each
 * phase has a deadline, so a stop always finishes.
 */

import { gossipOut } from './member-gossip.js'
import type { ClusterCore, Outbound } from './cluster-core.js'

export type Phase = 'running' | 'draining' | 'announced' | 'settling' | 'stopped'

export interface StopTimes {
  gossipIntervalMs: number
  wantTimeoutMs: number
  handoffTimeoutMs: number
}

export class StopMachine {
  phase: Phase = 'running'
  private drainFrom = 0
  private drainUntil = 0
  private drainDeadline = 0
  private settleDeadline = 0
  private readonly t: StopTimes

  constructor (t: StopTimes) {
    this.t = t
  }

  begin (nowMs: number): boolean {
    if (this.phase !== 'running') return false
    this.phase = 'draining'
    this.drainFrom = nowMs
    this.drainUntil = nowMs + 2 * this.t.gossipIntervalMs
    // In-flight requests settle within their timeout; the margin covers a driver's lag.
    this.drainDeadline = this.drainUntil + this.t.wantTimeoutMs + 1000
    return true
  }

  /** Draining is over: no request of ours in flight (or the deadline passed), and peers have heard. */
  drained (nowMs: number, inflight: number): boolean {
    return nowMs >= this.drainUntil && (inflight === 0 || nowMs >= this.drainDeadline)
  }

  startSettling (nowMs: number): void {
    this.phase = 'settling'
    this.settleDeadline = nowMs + this.t.handoffTimeoutMs
  }

  settled (nowMs: number, unacked: number): boolean {
    return unacked === 0 || nowMs >= this.settleDeadline
  }

  get since (): number {
    return this.drainFrom
  }

  /** One tick of a stop in progress: the phases after draining began (the core's tick calls it). */
  step (core: ClusterCore, nowMs: number, out: Outbound[]): void {
    if (this.phase === 'draining' && this.drained(nowMs, core.inflight)) {
      // Peers check a pushed grant against what the giver last said it holds: say it first, hand off a tick later.
      out.push(gossipOut(core, core.gossip.now(nowMs), nowMs))
      this.phase = 'announced'
      return
    }
    if (this.phase === 'announced') {
      // Fenced, it may not give: its tokens stay in the snapshot, as they would with no peer to take them.
      if (!core.fenced(nowMs)) core.transfers.handoff(nowMs, out)
      else core.counters.handoffsFenced++
      this.startSettling(nowMs)
    }
    // Grants of ours to a peer's ended epoch wait for its restart's marks (estate-marks.ts): a stop that ended
    // before they came lost them with its snapshot (sim `stops` seed 24: 22 of 65, handed to a peer that had just
    // restarted). So settling waits for them as for an ack, within the same deadline.
    if (this.phase === 'settling' && this.settled(nowMs, core.ledger.unackedTotal() + core.reclaim.marks.waiting)) {
      // The last word peers hear: what this node no longer holds. Then the snapshot, in the same step.
      out.push(gossipOut(core, core.gossip.now(nowMs), nowMs))
      core.snapshot = core.save(nowMs, 'stopped')
      this.phase = 'stopped'
    }
  }
}
