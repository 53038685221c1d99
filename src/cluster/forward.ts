/**
 * Members as proxies (rules with `"decide": "seeds"`). Pure, like the core.
 *
 * Where a member's part of a key is a token or two a window, a token waits
 * at a member that gets no request while another member's request is denied,
 * and no way of moving tokens ahead of the requests fixes that (cluster-protocol.md,
 * "Members and forwarding"). For such a rule a member holds none of the key: it
 * sends each acquire to a seed (`fwd`), which decides it as its own request,
 * with its own tokens, fence and lease, and answers (`fans`). Both go on
 * the member's call session with that seed (transport/calls.ts), compact
 * (forward-messages.ts). A member's acquire of a rule it decides itself goes
 * the same way when it holds too few tokens for it (forward-overflow.ts).
 *
 * Invariants:
 * - A forwarded acquire is decided once, at one seed, by the same
 *   `ClusterCore.acquire` as the seed's own clients: hard mode's guarantee is
 *   the seeds' as it is. The member spends nothing and holds nothing of it.
 * - An answer that does not come (loss, timeout, the seed died) is a denial
 *   at the member: the seed may have admitted it, which spent a token and
 *   admitted nothing the limit does not allow; never the other way round.
 * - A member with no seed to ask (none alive, agreeing on the rule, not
 *   leaving and not fenced in its view) decides locally, from what it holds
 *   (nothing, unless the rule changed under it).
 */
import type { Decision } from '../core/types.js'
import { fmix32 } from '../core/hash.js'
import { hash32, homeOf } from '../core/share.js'
import { QuotadError } from '../errors.js'
import type { CompiledRule } from '../core/rules.js'
import type { ClusterCore } from './cluster-core.js'
import { creditable, Credits, GIVE_SHARE } from './forward-credit.js'
import { KeyNumbers, Named, UNNAMED } from './forward-names.js'
import { answerOf, decisionOf, plainAdmission, windowDenial, type Fans, type Fwd } from './forward-messages.js'
import { keeps, KeptDenials } from './forward-kept.js'
import { Overflow } from './forward-overflow.js'
import { newForwardCounters, type ForwardCounters } from './forward-counters.js'
import { deciders, inOwnWindow, partnerFor, SEEDS_TO_FORWARD, sendsOn, upSeeds } from './forward-pair.js'

/** Where `route` sends an acquire: to seed `to`, or denied at once from a seed's denial kept here (`kept`). */
export type Routed = { to: string, msg: Fwd, denied?: undefined } | { denied: Decision, to?: undefined, msg?: undefined }

/** Peer ids whose member names a seed remembers (forwards come at client rates; membership.nameOf scans every binding). */
const MAX_NAMES = 4096

/** Forwards to one seed in a row that got no answer before a member routes around it (see `unanswered`). */
const SUSPECT_AFTER = 3

export class Forwarding {
  readonly counters: ForwardCounters = newForwardCounters()
  /** At a member: credit from the seeds, and its keys' demand (forward-credit.ts). */
  readonly credits = new Credits()
  /** At a member: the numbers its keys go under to each seed; at a seed: the keys members' numbers name (forward-names.ts). */
  private readonly numbers = new KeyNumbers()
  private readonly named = new Named()
  /** At a seed: peer id -> the name last bound to it (checked again at each forward: `admit`). */
  private readonly names = new Map<string, string>()
  /** At a member (or a seed, for what it forwards): seeds' denials kept until their window ends (forward-kept.ts). */
  private readonly denials = new KeptDenials()
  /** At a member, per seed: forwards in a row it did not answer, and when the last of them failed (see `unanswered`). */
  private readonly silent = new Map<string, { count: number, atMs: number }>()
  /** At a member: where its overflow goes, and whether it may go now (forward-overflow.ts). */
  readonly spill: Overflow

  constructor (private readonly c: ClusterCore) {
    this.spill = new Overflow(c)
  }

  /** Whether this node sends `key`'s acquires to a seed: a member, and the key's rule says `decide: "seeds"`. */
  decidesAtSeeds (key: string): boolean {
    const c = this.c
    return !c.seeds.includes(c.node) && c.limiter.ruleFor(key)?.config.decide === 'seeds'
  }

  /**
   * For a key of a `decide: "seeds"` rule, at a member, or at a seed for a
   * glob key of which it is not one of the two seeds below: the `fwd` to
   * send and the seed to send it to; else null (decide here). Among the
   * seeds alive, agreeing on the rule, not leaving and not fenced in this
   * node's view (a seed counts itself among them):
   * - a glob rule's key goes to its home (share.ts `homeOf`), where its whole
   *   stock starts, or to the seed after it (of these, in seed order), one
   *   or the other by (key, this node): two seeds decide a key's requests,
   *   so few of its tokens move between seeds for them, and when one dies
   *   the other holds part of the stock until the heir inherits. (Its home
   *   alone moved none, as gubernator shards keys over its peers, but left
   *   every key of a dead home dark until then: cluster-protocol.md, "Members and forwarding".)
   *   A seed's own clients' acquires go there too (with SEEDS_TO_FORWARD
   *   seeds or more): deciding them itself, a third seed would want the
   *   key's tokens from those two and send them back, each move a want, a
   *   grant, an ack and their journal copies. While its home is not among
   *   them, it goes to the next of them after the home alone (`deciders`).
   * - an exact key, whose stock starts split over the seeds, goes from a
   *   member to a seed drawn by (key, this node) among them all, so one
   *   key's members spread over the seeds and each seed's own rate estimate
   *   sees its part; a seed decides it itself, from its part.
   * - one of a glob key's two, out of its tokens, sends it on to the other
   *   while that one says it holds some (forward-pair.ts `partnerFor`; not
   *   with `here`: a peer's acquire sent on to this one, or decided here).
   * `denied` instead: a seed's last denial of the key, kept (forward-kept.ts).
   */
  route (key: string, count: number, waitMs: number, nowMs: number, here = false): Routed | null {
    const c = this.c
    const rule = c.limiter.ruleFor(key)
    if (c.phase !== 'running' || rule === undefined) return null
    if (!this.mayForward(rule)) return this.overflow(key, count, rule, waitMs, nowMs)
    const seed = c.seeds.includes(c.node)
    const { seeds, around } = upSeeds(c, rule, nowMs, (s, heard) => this.suspect(s, heard, nowMs))
    if (seeds.length === 0) return null
    const draw = fmix32(hash32(key) ^ hash32(c.node))
    const pair = rule.glob ? deciders(homeOf(key, c.seeds, c.view.homes), c.seeds, seeds) : []
    // At one of the two, out of tokens: to the other, which holds some (not for a peer's acquire sent on to this one: `here`).
    const other = seed && !here ? partnerFor(c, key, count, rule, pair, nowMs) : null
    if (seed && other === null && (pair.length === 0 || pair.includes(c.node) || c.seeds.length < SEEDS_TO_FORWARD)) return null
    const to = other ?? (pair.length > 0 ? pair[draw % pair.length] : seeds[draw % seeds.length])
    // A seed's last denial of the key, kept (forward-kept.ts): denied here, at once.
    const kept = this.kept(key, rule, nowMs)
    if (kept !== null) return { denied: kept }
    if (other !== null) {
      // Demand here all the same: this seed asks for its part of the next windows by it (rebalance.ts).
      c.noteDemand(key, count, nowMs)
      this.counters.forwardSentOn++
    }
    if (around) this.counters.forwardRoutedAround++
    this.counters.forwarded++
    // Credit only for an acquire the seed decides at once (one that waits goes through the seed's waiters).
    // Not for one sent on to the key's other seed: a seed takes no credit (it decides what it holds itself).
    const more = other === null && waitMs <= 0 && creditable(rule) ? this.credits.ask(key, rule, nowMs) : 0
    return { to, msg: this.fwd(to, key, count, waitMs, rule, more, other !== null) }
  }

  /** A member's acquire of a rule it decides itself, sent to a seed for want of tokens here (forward-overflow.ts). */
  private overflow (key: string, count: number, rule: CompiledRule, waitMs: number, nowMs: number): Routed | null {
    const to = this.spill.to(key, count, rule, this.counters.forwarded, nowMs, (s, heard) => this.suspect(s, heard, nowMs))
    if (to === null) return null
    this.counters.forwardOverflow++
    this.counters.forwarded++
    return { to, msg: this.fwd(to, key, count, waitMs, rule, 0, false) }
  }

  private fwd (to: string, key: string, count: number, waitMs: number, rule: CompiledRule, more: number, moved: boolean): Fwd {
    const n = this.numbers.ref(to, key)
    const ref = n === null ? {} : { ref: n.n, ...(n.naming ? { naming: true } : {}) }
    return { node: this.c.node, key, count, ...(waitMs > 0 ? { wait: waitMs } : {}), ...(more > 0 ? { more } : {}), ruleHash: rule.hash, ...ref, ...(moved ? { moved: true } : {}) }
  }

  /**
   * At a member, or a seed, before `route`: an acquire admitted from credit
   * a seed gave for this key (forward-credit.ts), and that seed; null to
   * forward it.
   * Every acquire of such a key is counted here, as the demand credit is
   * asked by.
   */
  fromCredit (key: string, count: number, nowMs: number): { seed: string, decision: Decision } | null {
    const c = this.c
    const rule = c.limiter.ruleFor(key)
    // Not at a seed for keys it never forwards: their demand would only fill the credit table.
    if (c.phase !== 'running' || rule === undefined || !creditable(rule) || !this.mayForward(rule) || (c.seeds.includes(c.node) && c.seeds.length < SEEDS_TO_FORWARD)) return null
    const r = this.credits.take(key, count, rule, nowMs)
    if (r !== null) this.counters.forwardFromCredit++
    return r
  }

  /**
   * Whether this node may send a key of `rule` to a seed (`route` says
   * whether it does): a member, for a `decide: "seeds"` rule; a seed, for
   * such a glob rule (one it does not decide, in a cluster of
   * SEEDS_TO_FORWARD seeds or more; one it decides, to the other of its
   * two while it is out of tokens: `partnerFor`).
   */
  private mayForward (rule: CompiledRule): boolean {
    const c = this.c
    if (rule.config.decide !== 'seeds') return false
    return !c.seeds.includes(c.node) || rule.glob
  }

  /**
   * At a seed: whether member `m`'s acquire goes on to the key's other seed
   * (forward-pair.ts `sendsOn`), through this seed's own path for its
   * clients (`route`, with `here` false), so that the answer comes back here
   * and goes to the member.
   */
  sendsOn (m: Fwd, nowMs: number): boolean {
    return sendsOn(this.c, m, nowMs)
  }

  /** At a seed: the member name bound to peer id `from` ('' when none is), which a forward on its session speaks for. */
  memberOf (from: string): string {
    const known = this.names.get(from)
    if (known !== undefined) return known
    const name = this.c.membership.nameOf(from)
    if (name === undefined) return ''
    if (this.names.size >= MAX_NAMES) this.names.clear()
    this.names.set(from, name)
    return name
  }

  /**
   * At a seed, first thing for each fwd from peer id `from`, in the order its
   * session delivers them: a fwd that names its key binds the number to it;
   * one that sends the number bare gets its key from that (`m.key` is set).
   * Null, or the refusal to answer when this seed holds no name for the
   * number (forward-names.ts).
   */
  resolve (m: Fwd, from: string): Fans | null {
    if (m.ref === undefined) return null
    if (m.naming === true) {
      this.named.bind(from, m.ref, m.key, this.c.limiter.ruleFor(m.key)?.hash ?? '')
      return null
    }
    const key = this.named.keyOf(from, m.ref)
    if (key === undefined) return this.refuse(UNNAMED)
    m.key = key
    return null
  }

  /**
   * At a seed, as it sends the answer to `m` from peer id `from`: a plain
   * admission, or a denial until the window's end, in the window the member
   * was last told under this key's rule goes without its `resetMs`
   * (`known`); a whole admission tells its window end; both carry the
   * window's parity (forward-names.ts). Call it in the order the answers go.
   */
  reply (m: Fwd, from: string, answer: Fans, nowMs: number): Fans {
    if (m.ref === undefined) return answer
    const admitted = plainAdmission(answer)
    if (!admitted && !windowDenial(answer)) return answer
    const rule = this.c.limiter.ruleFor(m.key)
    if (rule === undefined) return answer
    const slackMs = Math.min(1, rule.config.perMs / 4)
    const endMs = nowMs + answer.resetMs
    const t = admitted ? this.named.tell(from, m.ref, rule.hash, endMs, slackMs) : this.named.knownWindow(from, m.ref, rule.hash, endMs, slackMs)
    if (t === null) return answer
    return { ...answer, ...(t.same ? { known: true } : {}), ...(t.parity === 1 ? { parity: 1 } : {}) }
  }

  /**
   * At a member: the fwd to send again, naming its key, when seed `to`
   * answered `req` that it holds no name for its number (the seed restarted,
   * or dropped its numbers); else null.
   */
  again (req: Fwd, reply: Fans, to: string): Fwd | null {
    if (reply.code !== UNNAMED || req.ref === undefined || req.naming === true) return null
    this.numbers.forget(to, req.key)
    this.counters.forwardRenamed++
    return { ...req, naming: true }
  }

  /**
   * At a seed: whether a member's acquire from peer id `from` may be decided
   * here. Null: decide it as this node's own (`decided` then makes the
   * answer); else the refusal to answer with.
   */
  admit (m: Fwd, from: string): Fans | null {
    const c = this.c
    if (m.node === '' || c.membership.check(m.node, from) !== 'ok') {
      // The binding may have moved since it was remembered: look it up afresh next time.
      this.names.delete(from)
      return this.refuse('E_NOT_MEMBER')
    }
    if (!c.seeds.includes(c.node)) return this.refuse('E_NOT_SEED')
    if (c.phase !== 'running') return this.refuse('E_NOT_RUNNING')
    return null
  }

  /** At a seed: the answer to `m`, decided here as `d` (or, thrown while deciding, `err`). */
  decided (d: Decision | { error: unknown }): Fans {
    // A key no rule here matches, or the key table full: the member's client hears a denial, this node goes on.
    if ('error' in d) return this.refuse(d.error instanceof QuotadError ? d.error.code : 'E_INTERNAL')
    this.counters.forwardServed++
    return answerOf(d)
  }

  /** At a seed, the answer to member `m`'s acquire it sent on (`sendsOn`), decided there as `d` (forward-pair.ts `inOwnWindow`). */
  sentOn (d: Decision | { error: unknown }, m: Fwd, nowMs: number): Fans {
    return inOwnWindow(this.c, m.key, this.decided(d), nowMs)
  }

  /** At a seed: a member's acquire decided at once (a `wait` is the driver's to honour: see node-effects.ts). */
  serve (m: Fwd, from: string, nowMs: number): Fans {
    const refusal = this.admit(m, from)
    if (refusal !== null) return refusal
    try {
      // One sent on by the other seed is that seed's clients' and members' demand, counted there (`route`), not here;
      // a member's overflow (forward-overflow.ts) is counted here too.
      const d = this.c.acquire(m.key, m.count, nowMs, !(m.moved === true && this.c.seeds.includes(m.node)))
      const answer = this.decided(d)
      return d.allowed && m.more !== undefined ? this.credit(answer, m.key, m.more, d.remaining, nowMs) : answer
    } catch (error) {
      return this.decided({ error })
    }
  }

  /**
   * At a seed, an admission `answer` whose fwd asked for `more`: with credit
   * added, if the rule takes it and a second acquire of it is admitted here
   * now, decided as any (fence, lease, tightening); a part of the `remaining`
   * this seed has, so the last tokens still go where the requests are
   * (forward-credit.ts). Good no longer than this seed's lease either: a
   * member hands out none after this seed could be fenced (a cut side
   * without a quorum admits nothing once its leases lapse: reclaim's premise).
   */
  private credit (answer: Fans, key: string, more: number, remaining: number, nowMs: number): Fans {
    const rule = this.c.limiter.ruleFor(key)
    if (rule === undefined || !creditable(rule)) return answer
    const leaseLeft = this.c.tuning.leases ? Math.floor(this.c.fence.lease.validUntil - nowMs) : Infinity
    const extra = leaseLeft >= 1 ? Math.min(more, Math.floor(remaining * GIVE_SHARE)) : 0
    const e = extra >= 1 ? this.c.acquire(key, extra, nowMs) : undefined
    if (e?.allowed !== true) return answer
    this.counters.forwardCreditGiven += extra
    return { ...answer, remaining: e.remaining, credit: extra, ...(leaseLeft < e.resetMs ? { creditMs: leaseLeft } : {}) }
  }

  /**
   * At the member: a forward to seed `to` got no answer in time (a timeout,
   * or its session failed). A seed that crashed is read dead only after
   * `aliveTimeoutMs` of silence, or 4 × `quietGossipMs` when its copies come
   * at the quiet pace (member-copies.ts): until then every forward to it
   * would be denied after `forwardTimeoutMs`. After SUSPECT_AFTER such in a
   * row (one lost forward is not a dead seed), the member routes around it
   * (`route`) until it hears the seed again: an answer, or a gossip after
   * the last failure.
   */
  unanswered (to: string, nowMs: number): void {
    // Its answer may have told a window end this node never read: name every key to it again (forward-names.ts).
    this.numbers.forgetSeed(to)
    const e = this.silent.get(to)
    this.silent.set(to, { count: (e?.count ?? 0) + 1, atMs: nowMs })
    this.spill.unanswered(nowMs)
  }

  /**
   * Whether `route` skips seed `s`, last heard (gossip) at `heardMs`: forwards
   * unanswered since, SUSPECT_AFTER of them, or one while its gossip is older
   * than `aliveTimeoutMs` (a seed alive sends a copy at least every
   * `quietGossipMs`, so that is a second strong sign, and a member that
   * forwards once a second sees no three in a row soon).
   */
  private suspect (s: string, heardMs: number, nowMs: number): boolean {
    const e = this.silent.get(s)
    if (e === undefined) return false
    if (heardMs > e.atMs) { this.silent.delete(s); return false }
    return e.count >= SUSPECT_AFTER || nowMs - heardMs > this.c.tuning.aliveTimeoutMs
  }

  /**
   * At the member: the decision an answer carries (a refusal or a mismatched
   * answer is a denial), for a fwd sent at `sentMs` (monotonic; its credit,
   * if any, is good until `sentMs` + the answer's resetMs: forward-credit.ts).
   */
  answered (req: Fwd, reply: Fans, from: string, sentMs: number, nowMs: number): Decision {
    this.silent.delete(from)
    this.spill.answered(nowMs)
    if (reply.code !== undefined) return this.failed(req)
    // Decided: the seed read this frame, so the name it carried (forward-names.ts).
    if (req.ref !== undefined && req.naming === true) this.numbers.confirm(from, req.key, req.ref)
    const rule = this.c.limiter.ruleFor(req.key)
    const known = reply.known === true
    const filled = this.numbers.filled(reply, from, rule, nowMs)
    reply = filled.reply
    if (!known && req.ref !== undefined && plainAdmission(reply) && rule !== undefined) {
      this.numbers.setWindow(from, rule.hash, nowMs + reply.resetMs, reply.parity ?? 0)
    }
    // Nothing left at the seed nor, as it knew, at the key's other seed: denied here a while, if the window's end
    // is known (not the rule's per, guessed when the answer telling it was missed): forward-kept.ts.
    if (rule !== undefined && keeps(rule) && windowDenial(reply) && !filled.guessed) {
      this.denials.keep(req.key, reply.retryAfterMs, this.c.tuning.gossipIntervalMs, nowMs)
    }
    if (reply.allowed) this.counters.forwardAllowed++
    // route() sent it only to a seed agreeing on this rule's hash: its name and limit are the seed's.
    // Credit is kept only under the rule it was asked under: a reload in between drops it (forward-credit.ts).
    if (rule !== undefined && creditable(rule) && rule.hash === req.ruleHash && this.c.phase === 'running') {
      this.credits.answered(req.key, from, reply.resetMs, reply.remaining, reply.credit ?? 0, rule, sentMs, nowMs, reply.creditMs)
      this.counters.forwardCredit += reply.credit ?? 0
    }
    return decisionOf(reply, rule?.stock ?? 0, rule?.name ?? '')
  }

  /** Before `route` sends: a seed's denial of `key` kept here (forward-kept.ts), counted; else null. */
  private kept (key: string, rule: CompiledRule, nowMs: number): Decision | null {
    const d = this.denials.kept(key, rule, nowMs)
    if (d !== null) this.counters.forwardKeptDenials++
    return d
  }

  /** At the member: no answer in time (or none that decided): denied, as a central limiter out of reach would. */
  failed (req: Fwd): Decision {
    this.counters.forwardFailed++
    const rule = this.c.limiter.ruleFor(req.key)
    return { allowed: false, remaining: 0, limit: rule?.stock ?? 0, resetMs: 0, retryAfterMs: -1, rule: rule?.name ?? '' }
  }

  private refuse (code: string): Fans {
    return { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1, code }
  }
}

