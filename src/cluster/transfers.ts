/**
 * Tokens moving between nodes, the core's side: serving a peer's want,
 * giving (the donor debits before the grant exists), crediting an incoming
 * grant exactly once (the Ledger decides), the replies to our own requests,
 * and the handoff of a stopping node.
 *
 * Phases (lifecycle.ts): only a running node serves wants; a stopped node
 * (its snapshot taken) credits nothing, so no token is both saved and
 * spent elsewhere.
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore, Outbound } from './cluster-core.js'
import { agrees } from './cluster-view.js'
import { applyDeferred, booksOf, ext, horizon, keepRate, windowed, windowStart, type KeyExt } from './key-ext.js'
import { CLUSTER_VERSION, wantItems, type Ack, type Grant, type GrantItem, type None, type Want } from './messages.js'
import type { Peer } from './peers.js'
import type { PeerAccount } from './journal.js'
import { giveCap } from './no-relay.js'
import { GrantChecks } from './grant-checks.js'
import type { Gift } from './tick-batch.js'

export { PUSH_TOLERANCE } from './grant-checks.js'

/** A peer's second spoiled want in a row keeps it unasked this many want timeouts (see `Transfers.wantOutcome`). */
export const WANT_BACKOFF_BASE = 1
/** At most 2^this times that: 16 s at the default 1 s want timeout. */
export const WANT_BACKOFF_DOUBLINGS = 4

export class Transfers {
  private readonly core: ClusterCore
  /** Whether an incoming grant is one an honest giver sends, and the wants a resent grant may answer (grant-checks.ts). */
  readonly checks: GrantChecks

  constructor (core: ClusterCore) {
    this.core = core
    this.checks = new GrantChecks(core)
  }

  none (): None {
    return { v: CLUSTER_VERSION, t: 'none', node: this.core.node, epoch: this.core.epoch, inc: this.core.incarnation }
  }

  ack (g: Grant, applied: number): Ack {
    return { v: CLUSTER_VERSION, t: 'ack', node: this.core.node, epoch: this.core.epoch, inc: this.core.incarnation, applied }
  }

  /**
   * A peer asks for tokens, of one key or several (tick-batch.ts). The donor
   * debits before the grant exists; one grant carries every key it gives,
   * and a key it gives nothing of is simply not in it.
   */
  onWant (w: Want, nowMs: number): Grant | None {
    const c = this.core
    const none = this.none()
    // Leaving (or stopped): it is about to hand off or has saved; a grant now could exist twice.
    // Fenced: no lease, no giving (fence.ts). A fenced asker could not spend hard tokens anyway.
    if (c.phase !== 'running' || c.fenced(nowMs)) return none
    const p = c.peers.get(w.node)
    if (p === undefined || p.epoch !== w.epoch || w.node === c.node || p.leaving || p.fenced) return none
    const items: GrantItem[] = []
    for (const [key, want] of wantItems(w)) {
      const item = this.serveKey(p, key, want, nowMs)
      if (item !== undefined) items.push(item)
    }
    if (items.length === 0) return none
    c.counters.wantsServed += items.length
    // The grant goes back as the reply: not a request of ours, nothing in flight to count.
    return this.grant(p, items, nowMs)
  }

  /** What this node gives `p` of one key it asked for: debited, or nothing. */
  private serveKey (p: Peer, key: string, want: number, nowMs: number): GrantItem | undefined {
    const c = this.core
    let ks: KeyState
    try {
      ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
    } catch {
      return undefined
    }
    if (!agrees(p, ks)) return undefined
    const x = ext(ks)
    applyDeferred(ks, x, c.calendar.at(nowMs))
    c.burn(ks, x, nowMs)
    const keep = keepRate(x, nowMs) * horizon(ks, c.tuning.horizonMs, nowMs, c.calendar) / 1000 + x.debt
    // A token this node expects to use less than half of goes: kept, it would likely lapse unspent.
    let surplus = Math.floor(ks.bucket.held - keep + 0.5)
    if (surplus >= 1 && c.view.clusterRemaining(ks, nowMs) < c.tuning.lowWater * ks.rule.stock) {
      // Tight: a part at a time, but at least one, or the last tokens would sit where no one asks for them.
      surplus = Math.max(1, Math.floor(surplus * c.tuning.tightenFraction))
    }
    // A peer that owes a burn gets what this node holds in reserve for it: reserved tokens can't be
    // spent here anyway, and each one given and burned there lowers the reserve by one.
    const owedThere = p.keys.get(key)?.owed ?? 0
    if (owedThere > 0 && ks.reserve > 0) surplus = Math.max(surplus, Math.floor(Math.min(owedThere, ks.reserve, ks.bucket.held)))
    const n = Math.min(Math.floor(want), surplus)
    if (n < 1) return undefined
    return this.debit(ks, x, p, n, nowMs)
  }

  /** Debit `n` tokens of a key and put them in a grant to `p` (the ledger keeps it until acked). */
  give (ks: KeyState, x: KeyExt, p: Peer, n: number, nowMs: number): Grant | undefined {
    const item = this.debit(ks, x, p, n, nowMs)
    return item === undefined ? undefined : this.grant(p, [item], nowMs)
  }

  /** Take `n` whole tokens of a key out of this node's books for `p`: the grant item, or nothing if it can't. */
  private debit (ks: KeyState, x: KeyExt, p: Peer, n: number, nowMs: number): GrantItem | undefined {
    const c = this.core
    // Whole tokens only: a receiver refuses anything else (a fraction stays here, spendable).
    ks.bucket.advance(nowMs)
    // Without a share, only what it holds of p's tokens (no relay: reclaim.ts).
    const whole = Math.min(Math.floor(n), Math.floor(ks.bucket.held + 1e-9), Math.floor(giveCap(c, p, ks.key) + 1e-9))
    if (whole < 1) return undefined
    const debited = ks.bucket.debit(whole)
    // `held` a hair under a whole number (0.9999999999999998 after float sums) debits that; the grant carries
    // the whole token (a receiver refuses fractions): the hair is float error, not a token. Anything more is put back.
    if (debited < whole - 1e-9) {
      if (debited > 0) ks.bucket.credit(debited)
      return undefined
    }
    const moved = whole
    const rule = ks.rule.config
    // Tagged in calendar time (the one clock nodes share), never earlier than now.
    const t = c.calendar.at(nowMs)
    const at = windowed(rule.algorithm) ? windowStart(t, rule.perMs) : t
    x.transfersOut += moved
    c.counters.tokensOut += moved
    // Durable before the grant leaves (the driver persists the journal first): a restart must not restore it.
    c.journal.record(ks.key, -moved, true, [p.name, p.epoch, p.inc])
    c.replication.gave(c.journal, ks.key, moved, ks.rule.stock, booksOf(ks), nowMs)
    c.active.add(ks)
    return [ks.key, moved, at]
  }

  /** The grant of debited items to `p`, in the ledger until acked. */
  private grant (p: Peer, items: GrantItem[], nowMs: number): Grant {
    const c = this.core
    const g = c.ledger.grant(p.name, p.epoch, items, nowMs)
    // The grant, in the batch that holds its give, so that a heir, or this node's restart from its journal, can take it
    // back if p never applies it (estate-returns.ts).
    c.journal.sent(g.to, g.toEpoch, g.seq, g.items)
    return g
  }

  /** Give keys to `p` in one grant sent as a request of ours (a push: return home, return to lenders, handoff; tick-batch.ts). */
  pushMany (p: Peer, gifts: readonly Gift[], nowMs: number, out: Outbound[]): void {
    const items: GrantItem[] = []
    const given: Array<[KeyState, number]> = []
    for (const [ks, x, n] of gifts) {
      const item = this.debit(ks, x, p, n, nowMs)
      if (item === undefined) continue
      items.push(item)
      given.push([ks, item[1]])
    }
    if (items.length === 0) return
    this.core.request(out, p.name, this.grant(p, items, nowMs))
    // It holds that much more now. A belief lowered by its grant to us stays low until it gossips the key again,
    // and it may not (tokens given and pushed back leave its held as it last said it): without this the view's
    // custody of it, so the shortfall, stayed short by what moved back and forth (the simulator: 37 of 60 at a member).
    for (const [ks, n] of given) this.core.view.believeHeld(p.name, ks, n, nowMs)
  }

  /**
   * Tokens arrive. The ledger lets each grant through at most once; a
   * stopped node takes none. `asked`: the want this grant answers.
   */
  onGrant (g: Grant, nowMs: number, asked?: Want): Ack {
    const c = this.core
    // Addressed to an ended epoch of ours that this incarnation speaks for: its final mark, so the giver settles it.
    if (g.to === c.node && g.toEpoch !== c.epoch) {
      const ended = c.reclaim.marks.ownEnded(g.toEpoch, g.node, g.epoch)
      if (ended !== undefined) return { ...this.ack(g, 0), ended }
    }
    if (c.phase !== 'stopped') {
      // A member's grant of tokens a dead seed lent it, pushed here (its heir) before this node has read the estate
      // that books them: not applied yet, and acked below it, so the member keeps it in transit and resends it.
      if (this.checks.waitsForEstate(g)) return this.ack(g, c.replication.ackableFrom(g.node, g.epoch, c.ledger.appliedFrom(g.node, g.epoch)))
      const before = c.ledger.appliedFrom(g.node, g.epoch)
      const { result, credit } = c.ledger.apply(g, c.peers.get(g.node)?.epoch)
      let refusedThis = false
      for (const cr of credit) {
        // The ledger has taken it (the pair must not wedge on it); its tokens are credited only if plausible.
        const why = this.checks.implausible(cr, cr === g ? asked : undefined, nowMs)
        if (why !== null) {
          this.refuse(cr, why)
          refusedThis ||= cr === g
          continue
        }
        c.counters.grantsApplied++
        // Counted as taken from its giver's account even if an item can't be placed here (positions.ts).
        c.positions.received(cr)
        for (const item of cr.items) this.credit(item, nowMs, [cr.node, cr.epoch, cr.inc])
      }
      // The mark goes in the batch that holds these credits: a heir (a seed's copies) or this node's own restart
      // tells the givers which grants its books hold (estate-marks.ts).
      // A replicating seed acks them once that batch is at a quorum of its copies (durable-acks.ts).
      if (credit.length > 0) {
        c.journal.mark(g.node, g.epoch, c.ledger.appliedFrom(g.node, g.epoch))
        c.replication.applied(g.node, g.epoch, before)
      }
      if (result === 'gap' || result === 'wrong-epoch' || result === 'old-epoch') c.counters.grantsRejected++
      // The giver of a refused push takes its tokens back when it reads this (onReply): an honest giver loses nothing.
      // Its mark is the applied one, so a seed's credits before it that await their copies are acked with it: if the
      // seed then dies for good before a copy has them, they are lost, never doubled (a refusal is a giver's fault).
      if (refusedThis) return { ...this.ack(g, c.ledger.appliedFrom(g.node, g.epoch)), refused: true }
    }
    return this.ack(g, c.replication.ackableFrom(g.node, g.epoch, c.ledger.appliedFrom(g.node, g.epoch)))
  }

  /** Count a refused grant (public so that the simulator's position audit sees which grants were refused). */
  refuse (g: Grant, why: string): void {
    const c = this.core
    c.counters.grantsRefused++
    for (const [k, a] of g.items) {
      const n = Number.isFinite(a) ? a : 0
      c.counters.tokensRefused += n
      c.refusedTokens.set(k, (c.refusedTokens.get(k) ?? 0) + n)
    }
    c.lastRefusal = `grant ${g.seq} from ${g.node}: ${why}`
  }

  /** A push of ours was refused: take its tokens back (they were debited for it). */
  private takeBack (g: Grant, nowMs: number): void {
    const c = this.core
    const p = c.peers.get(g.to)
    const to: PeerAccount = p?.epoch === g.toEpoch ? [g.to, g.toEpoch, p.inc] : [g.to, g.toEpoch]
    for (const [k, a] of g.items) {
      const ks = c.limiter.existing(k)
      if (ks === undefined) continue
      ks.bucket.credit(a)
      c.journal.record(k, a, false, to)
      c.burn(ks, ext(ks), nowMs)
      c.limiter.touched(ks, nowMs)
      c.active.add(ks)
      c.takenBackTokens.set(k, (c.takenBackTokens.get(k) ?? 0) + a)
    }
  }

  private credit ([key, amount, at]: GrantItem, nowMs: number, from: PeerAccount): void {
    const c = this.core
    let ks: KeyState
    try {
      ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
    } catch {
      // No rule or no room: the tokens can't be placed. They are lost, never created.
      c.ledger.stranded += amount
      return
    }
    const x = ext(ks)
    x.transfersIn += amount
    c.counters.tokensIn += amount
    c.journal.record(key, amount, false, from)
    if (at > c.calendar.at(nowMs)) {
      (x.deferred ??= []).push([amount, at])
    } else {
      ks.bucket.credit(amount)
      // A burn owed is paid before the tokens can be spent.
      c.burn(ks, x, nowMs)
      c.limiter.touched(ks, nowMs)
    }
    // Tokens came: asking again (once the round's other answers are in) is progress. Only rounds that got nothing
    // wait out the gap.
    x.lastWantAt = -Infinity
    c.active.add(ks)
  }

  onReply (req: Want | Grant, reply: Grant | Ack | None, nowMs: number): void {
    const c = this.core
    if (req.t === 'want') this.wantAnswered(req)
    if (req.t === 'want' && (reply.t === 'grant' || reply.t === 'none')) {
      const given = new Map<string, number>()
      if (reply.t === 'grant') {
        // Its ack says whether this very grant was refused (an earlier one the ledger lets through with it is not its answer).
        this.wantOutcome(reply.node, this.onGrant(reply, nowMs, req).refused !== true, nowMs)
        for (const [key, n] of reply.items) given.set(key, (given.get(key) ?? 0) + n)
      } else {
        this.wantOutcome(reply.node, true, nowMs)
      }
      for (const [key] of wantItems(req)) {
        const ks = c.limiter.existing(key)
        if (ks === undefined) continue
        const n = given.get(key)
        // The donor holds that much less now: don't ask it again on a view its next gossip would correct.
        if (n !== undefined) c.view.believeHeld(reply.node, ks, -n, nowMs)
        // No surplus there: until it says otherwise, believe it needs all it holds (rate Infinity: ClusterView does
        // not ask it). Its holding stays counted in the cluster-wide remaining and its custody (shortfall.ts):
        // believing it held nothing made keys look nearer exhaustion than they were, and could tighten grants.
        else c.view.noSurplus(ks, reply.node, nowMs)
      }
    } else if (reply.t === 'grant') {
      this.onGrant(reply, nowMs)
    } else if (reply.t === 'ack') {
      // Its restart's final mark of the ended epoch this grant went to (Ack.ended): as a gossiped mark would say it.
      if (req.t === 'grant' && reply.ended !== undefined && reply.node === req.to && req.toEpoch !== reply.epoch) {
        if (req.epoch === c.epoch) c.reclaim.marks.onMarks(reply.node, reply.epoch, [[req.to, req.toEpoch, c.node, req.epoch, reply.ended]], nowMs)
        else c.reclaim.returns.onEnded(req.to, req.toEpoch, req.epoch, reply.ended, nowMs)
        return
      }
      // A probe of a crashed epoch's grant (estate-returns.ts probes): its ack's mark is of that epoch's grants, not
      // of this epoch's outbox to the receiver, so it acks nothing here.
      if (req.t === 'grant' && req.epoch !== c.epoch) return
      if (req.t === 'grant') {
        c.positions.acked(c.ledger.ack(reply.node, reply.epoch, reply.applied))
        // Taken back only from a grant the ledger is done with, and once (a stopped node keeps its snapshot as is).
        if (reply.refused === true && reply.applied >= req.seq && c.phase !== 'stopped' && c.ledger.takeBack(req)) {
          this.takeBack(req, nowMs)
          // Counted as given when acked, unless its outbox went first (stranded: never counted). A refusal names the
          // epoch the grant went to, so this ack was for the grant's own outbox.
          if ((c.ledger.ackedTo(req.to, req.toEpoch) ?? 0) >= req.seq) c.positions.takenBack(req)
        }
      }
    }
  }

  /**
   * What a want to `to` came to: `delivered`, an answer this node could use
   * (a grant credited, or `none`, an honest "no surplus"); otherwise no
   * answer in time, or a grant refused (more than it holds of ours, from a
   * member: grant-checks.ts). From the second spoiled want in a row on, `to`
   * is not asked for WANT_BACKOFF_BASE x wantTimeoutMs, doubling per spoiled
   * want up to 2^WANT_BACKOFF_DOUBLINGS of it: a peer that claims much and
   * answers nothing (or nothing creditable) stops drawing this node's wants,
   * each of which held its key's round for a want timeout, and the wants go
   * to peers that deliver. One lost message costs nothing; the next answer
   * that delivers clears it.
   */
  wantOutcome (to: string, delivered: boolean, nowMs: number): void {
    const p = this.core.peers.get(to)
    if (p === undefined) return
    if (delivered) { p.wantsSpoiled = 0; p.askAfter = -Infinity; return }
    p.wantsSpoiled++
    if (p.wantsSpoiled < 2) return
    p.askAfter = nowMs + this.core.tuning.wantTimeoutMs * WANT_BACKOFF_BASE * 2 ** Math.min(p.wantsSpoiled - 2, WANT_BACKOFF_DOUBLINGS)
  }

  /** A want has its answer (a reply or a failure): one want of each of its keys' rounds; a round is over when all have. */
  wantAnswered (req: Want): void {
    for (const [key] of wantItems(req)) {
      const ks = this.core.limiter.existing(key)
      if (ks === undefined) continue
      const x = ext(ks)
      if (x.wantsOut > 0) x.wantsOut--
      if (x.wantsOut === 0) x.wantSentAt = -Infinity
    }
  }

  /**
   * Graceful stop: hand every whole held token to alive agreeing peers that
   * are not leaving, the fastest consumer of each key first.
   */
  handoff (nowMs: number, out: Outbound[]): void {
    const c = this.core
    const alive = c.peers.alive(nowMs)
    const cal = c.calendar.at(nowMs)
    for (const ks of c.limiter.states()) {
      const x = ext(ks)
      applyDeferred(ks, x, cal)
      c.burn(ks, x, nowMs)
      ks.bucket.advance(nowMs)
      if (ks.bucket.held < 1) continue
      // The fastest consumers first; a node without a share hands each peer only what it holds of that peer's
      // tokens (give caps it), so the rest goes to the next.
      // A rate of Infinity (it answered a want with `none`) sorts first; capped, so two of them compare equal, not NaN.
      const rate = (p: Peer): number => Math.min(Number.MAX_VALUE, p.keys.get(ks.key)?.rate ?? 0)
      const takers = alive.filter(p => !p.leaving && !p.fenced && agrees(p, ks)).sort((a, b) => rate(b) - rate(a))
      for (const to of takers) {
        const n = Math.floor(ks.bucket.held)
        if (n < 1) break
        const before = c.counters.tokensOut
        this.pushMany(to, [[ks, x, n]], nowMs, out)
        c.counters.handedOff += c.counters.tokensOut - before
      }
    }
  }
}
