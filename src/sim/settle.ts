/**
 * The settle probe (scenario `heal-settle`, issue 11 §3): once the last fault
 * has healed, how long do grants stay unacknowledged?
 *
 * From the calm point of the run (faults.ts: no fault after it) to its end,
 * every `SAMPLE_MS` it reads every live node's outboxes (`Ledger.outboxes`)
 * and sorts each by why it is still open, from the simulator's god view:
 *
 * - `dead`: its receiver's node is down (crashed for good). Nobody can ack
 *   it; it waits for reclaim (docs/design/2026-11-reclaim.md, finding 1). Reported, not
 *   checked.
 * - `receiverRestarted`: its receiver's node is up, as a newer incarnation
 *   than the one the grant is addressed to, and the giver has not ended the
 *   old epoch (finding 2).
 * - `giverUnknown`: addressed to the receiver's live incarnation, which does
 *   not know the giver's current epoch, so it answers `old-epoch` (finding 3).
 * - `lostAck`: both sides know each other; the grant or its ack was lost, or
 *   is simply in flight. Settles by retransmit or by the next gossip.
 *
 * The check (run.ts): no grant toward a node that is up stays unacked longer
 * than `SETTLE_LIMIT_MS` counted from the later of its making and the heal.
 */
import type { Scheduled } from './faults.js'
import type { VirtualCluster } from './virtual-cluster.js'

/** How often the probe reads the outboxes, virtual ms. */
export const SAMPLE_MS = 10
/** Grants toward a live node must be acked (or ended) within this of the last heal. */
export const SETTLE_LIMIT_MS = 3000
/** While faults last, only grants open longer than this count (a retransmit is due): younger ones are in flight. */
const STALE_MS = 1000

export interface SettleCauses {
  lostAck: number
  receiverRestarted: number
  giverUnknown: number
}

export interface SettleFigures {
  /** When the last fault healed, ms after the run's start. */
  healAtMs: number
  /** From the heal until no grant made before it is unacked toward a node that is up (Infinity: not in this run). */
  settleMs: number
  /** The longest any grant toward a node that is up stayed unacked after the heal (age counted from the later of its making and the heal). */
  maxAgeMs: number
  /** Tokens in unacked grants toward nodes that are up, at the heal, by cause. */
  atHeal: SettleCauses
  /** Token-milliseconds those grants (made before the heal) stayed unacked after it, by cause: which mechanism holds them longest. */
  tokenMs: SettleCauses
  /** Token-milliseconds of unacked grants toward nodes that are up, older than the retransmit time, before the heal (while faults last), by cause. */
  duringMs: SettleCauses
  /** Tokens in unacked grants toward nodes that are down (waiting for reclaim), at the heal and at the end. */
  deadAtHeal: number
  deadAtEnd: number
}

/** An open outbox toward a node that is up: since when (true time), how many tokens, why. */
interface Opened { since: number, tokens: number, cause: keyof SettleCauses }

const zero = (): SettleCauses => ({ lostAck: 0, receiverRestarted: 0, giverUnknown: 0 })

export class SettleProbe {
  private readonly vc: VirtualCluster
  private readonly sched: Scheduled
  private readonly samples: Array<{ at: number, dead: number, opened: Opened[] }> = []

  constructor (vc: VirtualCluster, sched: Scheduled, startMs: number, endMs: number) {
    this.vc = vc
    this.sched = sched
    if (sched.calmAt === null) return
    for (let t = startMs + SAMPLE_MS; t <= endMs; t += SAMPLE_MS) vc.at(t, () => { this.sample() })
  }

  /** One reading of every live node's outboxes. */
  private sample (): void {
    const vc = this.vc
    const at = vc.now
    let dead = 0
    const opened: Opened[] = []
    for (const [name, giver] of vc.cores) {
      // Outboxes are on the monotonic clock; the probe works in true time.
      const offset = vc.mono(name) - at
      for (const box of giver.ledger.outboxes()) {
        const receiver = vc.cores.get(box.to)
        if (receiver === undefined) { dead += box.tokens; continue }
        const cause: keyof SettleCauses = receiver.epoch !== box.toEpoch
          ? 'receiverRestarted'
          : receiver.peers.get(name)?.epoch !== giver.epoch ? 'giverUnknown' : 'lostAck'
        opened.push({ since: box.since - offset, tokens: box.tokens, cause })
      }
    }
    this.samples.push({ at, dead, opened })
  }

  /** The figures, once the run is over; null when the scenario has no calm point. */
  figures (startMs: number): SettleFigures | null {
    if (this.sched.calmAt === null) return null
    const heal = Math.max(this.sched.calmAt, this.sched.lastFaultAt)
    const after = this.samples.filter(s => s.at >= heal)
    const during = zero()
    for (const s of this.samples) {
      if (s.at >= heal) break
      for (const o of s.opened) if (s.at - o.since > STALE_MS) during[o.cause] += o.tokens * SAMPLE_MS
    }
    if (after.length === 0) return null
    // Backlog: grants made before the heal that are still open.
    const backlog = (opened: Opened[]): SettleCauses => {
      const c = zero()
      for (const o of opened) if (o.since <= heal) c[o.cause] += o.tokens
      return c
    }
    const out: SettleFigures = {
      healAtMs: heal - startMs,
      settleMs: Infinity,
      maxAgeMs: 0,
      atHeal: backlog(after[0].opened),
      tokenMs: zero(),
      duringMs: during,
      deadAtHeal: after[0].dead,
      deadAtEnd: after[after.length - 1].dead
    }
    for (const s of after) {
      for (const o of s.opened) out.maxAgeMs = Math.max(out.maxAgeMs, s.at - Math.max(o.since, heal))
      const b = backlog(s.opened)
      if (b.lostAck + b.receiverRestarted + b.giverUnknown === 0 && out.settleMs === Infinity) out.settleMs = s.at - heal
      for (const k of Object.keys(out.tokenMs) as Array<keyof SettleCauses>) out.tokenMs[k] += b[k] * SAMPLE_MS
    }
    return out
  }
}
