/**
 * What an operator reads in the log while the cluster deals with dead nodes
 * (docs/operations.md, "Logs"): this node's own incarnation attested dead,
 * the books a restart carried dropped, each settlement of a dead
 * incarnation, each inheritance of a dead seed, and how the grants this
 * node had in flight to an ended incarnation were settled by its marks (a
 * dead seed's heir's, or the restarted node's own). The
 * driver (cluster-node.ts) calls `tick` after each core tick; each event is
 * logged once.
 */
import { ErrorCodes } from '../errors.js'
import type { Logger } from '../util/log.js'
import type { ClusterCore } from './cluster-core.js'

export class ReclaimLog {
  private readonly log: Logger
  private reclaimed = false
  private dropped = false
  private settlements = 0
  private readonly settled = new Map<string, number>()
  private inheritances = 0
  private marks = { tokensTakenBack: 0, tokensDelivered: 0, tokensExpired: 0 }

  constructor (log: Logger) {
    this.log = log
  }

  /** Log what happened since the last call; true the first time this incarnation learns it was attested dead. */
  tick (core: ClusterCore): boolean {
    const r = core.reclaim
    let attested = false
    if (r.reclaimed && !this.reclaimed) {
      this.reclaimed = attested = true
      this.log.error('a quorum of seeds attests this incarnation dead: what it held is credited to its peers; restarting as a new incarnation',
        { incarnation: core.incarnation, code: ErrorCodes.RECLAIMED })
    }
    if (r.droppedCarried && !this.dropped) {
      this.dropped = true
      this.log.warn('a quorum of seeds attests the incarnation this start recovered: its books are dropped (credited elsewhere)', { carried: core.carries[0] ?? null, allocate: core.limiter.allocate, code: ErrorCodes.RECLAIMED })
    }
    if (r.counters.settlements !== this.settlements) {
      this.settlements = r.counters.settlements
      for (const [node, inc] of r.settled) {
        if (this.settled.get(node) === inc) continue
        this.settled.set(node, inc)
        const heir = core.heir.homes.get(node)
        this.log.info('settled a dead incarnation: a quorum of seeds attests it', { dead: node, inc, ...(heir === undefined ? {} : { heir }) })
      }
      for (const node of [...this.settled.keys()]) if (!r.settled.has(node)) this.settled.delete(node)
    }
    const inherited = core.heir.log
    for (; this.inheritances < inherited.length; this.inheritances++) {
      const e = inherited[this.inheritances]
      this.log.info('inherited a dead seed: its books are credited here, spendable from the rule\'s horizon, and its glob keys are homed here', { dead: e.node, inc: e.inc, tokens: Math.round(e.tokens) })
    }
    const m = r.marks.counters
    const was = this.marks
    if (m.tokensTakenBack !== was.tokensTakenBack || m.tokensDelivered !== was.tokensDelivered) {
      this.log.info('grants in flight to an ended incarnation settled by its marks (a dead seed\'s heir, or the node\'s restart)', { delivered: m.tokensDelivered - was.tokensDelivered, takenBack: m.tokensTakenBack - was.tokensTakenBack })
    }
    if (m.tokensExpired !== was.tokensExpired) {
      this.log.warn('no marks came in time for grants in flight to an ended incarnation (from a dead seed\'s heir, or the node\'s restart): they are lost', { tokens: m.tokensExpired - was.tokensExpired })
    }
    if (m.tokensTakenBack !== was.tokensTakenBack || m.tokensDelivered !== was.tokensDelivered || m.tokensExpired !== was.tokensExpired) this.marks = { ...m }
    return attested
  }
}
