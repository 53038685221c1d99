/**
 * Conservation, checked from outside the nodes. The simulator sees every
 * grant any node creates and every node that dies, so at any moment it can
 * say where each token of a key is:
 *
 *     held     in a live node's books: its bucket's share (held + spent and
 *              not yet back) plus deferred credits, less the burn it owes;
 *              or, for a key the node has no state for, the share it would
 *              create the key with
 *     transit  in a grant not applied yet, that can still be (a copy is in
 *              the network, or its giver is alive to resend it)
 *     saved    in a cleanly stopped node's saved state, or the share it would
 *              create on restart
 *     stranded held by a node when it crashed; in a grant to an incarnation
 *              that died before applying it; or in a grant lost for good
 *
 * The invariant is `held + transit + saved + stranded = stock` per key. More
 * means a token was created (a hard-mode safety failure); less means one was
 * lost without being accounted for (a bug too, if a safe one).
 *
 * Rule changes move the stock: it is the sum over seeds of each seed's
 * pre-allocated share under the rules it has now (a live or cleanly stopped
 * node that may allocate), or under the rules it had when it stopped being
 * able to (a crash: its share is stranded, and later changes leave it be).
 * A burn owed counts against its node's books, so a node that owes more than
 * it holds has negative books until it has paid.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { SavedState } from '../cluster/durable-state.js'
import { booksOf } from '../cluster/key-ext.js'
import { heirAtEnd, inheritedShares } from '../cluster/rule-change.js'
import type { Grant } from '../cluster/messages.js'
import { RuleSet, type CompiledRule } from '../core/rules.js'
import { initialShare, homeOf, type Homes } from '../core/share.js'
import type { RuleConfig } from '../config/types.js'
import { GrantFates } from './grant-fates.js'

interface Disk {
  node: string
  epoch: string
  allocate: boolean
  rules: RuleSet
  keys: Map<string, number>
  /** The dead seeds whose estates its books hold (heir.ts): their shares follow its saved rules until it restarts. */
  holds: ReadonlySet<string>
}

export interface KeyAccount {
  key: string
  stock: number
  held: number
  transit: number
  saved: number
  stranded: number
  /** held + transit + saved + stranded - stock: > 0 created, < 0 lost. */
  error: number
}

export class TokenAudit {
  private readonly seeds: readonly string[]
  private readonly initialRules: RuleSet
  /** Per node: the rules its stranded pre-allocated share was under when it lost the right to allocate. */
  private readonly frozen = new Map<string, RuleSet | null>()
  /** Live incarnations by epoch. */
  private readonly live = new Map<string, ClusterCore>()
  /** Every grant's fate: open, applied, or stranded (grant-fates.ts). */
  private readonly grants = new GrantFates(this.live, (k, n) => add(this.stranded, k, n))
  private readonly disk = new Map<string, Disk>()
  /** Per key: held by crashed nodes, and in grants that can never be applied. */
  private readonly stranded = new Map<string, number>()
  /** Crashed incarnations: they could still have materialized shares of keys they had no state for. */
  private readonly crashed: ClusterCore[] = []
  /** Per crashed epoch: its books per key at the crash (stranded until a restart recovers them). */
  private readonly crashBooks = new Map<string, Map<string, number>>()

  constructor (seeds: readonly string[], rules: RuleConfig[]) {
    this.seeds = seeds
    this.initialRules = new RuleSet(rules)
  }

  /** Tokens of grants ever applied, for the report. */
  get applied (): number {
    return this.grants.applied
  }

  /** Every incarnation ever born (refusal counters live on them). */
  private readonly everCores: ClusterCore[] = []

  born (core: ClusterCore): void {
    this.everCores.push(core)
    core.reclaim.marks.onTakeBack = g => this.estateTakeBack(core, g)
    core.reclaim.returns.onReturn = (dead, deadEpoch, _to, toEpoch, seq, items) => this.estateReturned(dead, deadEpoch, toEpoch, seq, items)
    this.live.set(core.epoch, core)
    this.disk.delete(core.node)
    // A restart of a seed already inherited carries books its heir holds now: they are the heir's until it drops them.
    // (Not one whose predecessor had dropped its share already: what it carries is its own.)
    if (core.limiter.allocate && core.carries.some(e => this.inheritedEpochs.has(e))) { this.shadows.add(core); return }
    if (core.recovery !== null) this.recovered(core)
  }

  /** Epochs of seeds whose books went to a heir (heir.ts). */
  private readonly inheritedEpochs = new Set<string>()
  /**
   * Restarts that carry such an epoch: their carried books are counted at
   * the heir, so not here, until they drop them (reclaim.ts aboutMe: at the
   * first echoing voter's attestation; they are fenced until then), and
   * what they drop was never theirs.
   */
  private readonly shadows = new Set<ClusterCore>()

  /**
   * A restart recovered its crashed predecessor's books from the journal
   * (journal.ts): they leave `stranded` for the new core's books, and its
   * predecessor's unmaterialized shares become the new core's (it allocates
   * as the predecessor did). A restart that restored more than its
   * predecessor had shows as created, like any other token from nowhere.
   */
  private recovered (core: ClusterCore): void {
    const i = this.crashed.findIndex(c => c.epoch === core.carries[0])
    if (i < 0) return
    const dead = this.crashed[i]
    this.crashed.splice(i, 1)
    if (dead.limiter.allocate) this.frozen.delete(core.node)
    const books = this.crashBooks.get(dead.epoch) ?? new Map<string, number>()
    this.crashBooks.delete(dead.epoch)
    for (const [k, b] of books) add(this.stranded, k, -b)
  }

  /** Incarnations that dropped their share before their heir inherited it (their drop is in `stranded` until then). */
  private readonly droppedInherited = new Set<ClusterCore>()

  /** Per dead seed: the heir that last inherited it, and what that heir credited. */
  private readonly estates = new Map<string, { heir: ClusterCore, credits: ReadonlyMap<string, number> }>()

  /** Per heir: the inheritances (heir.ts `log`) already taken in. */
  private readonly heirSeen = new WeakMap<ClusterCore, number>()

  /**
   * A heir inherited dead seeds (heir.ts): what those seeds held at the crash
   * leaves `stranded`, and their unmaterialized shares stop counting there;
   * the heir's credits (its books) and its homes (its glob keys' shares) hold
   * them now. A heir that credits more than the dead seed had shows as
   * created.
   */
  inheritances (core: ClusterCore): void {
    const log = core.heir.log
    const seen = this.heirSeen.get(core) ?? 0
    if (seen === log.length) return
    this.heirSeen.set(core, log.length)
    for (let i = seen; i < log.length; i++) {
      const { node, credits } = log[i]
      // A heir that died before its inheritance was in its copies (heir.ts: the record is a checkpoint) leaves the
      // estate to be inherited again by the next heir: what that one credits comes out of the first heir's books,
      // stranded at its crash, and never more than the first one credited.
      const before = this.estates.get(node)
      this.estates.set(node, { heir: core, credits })
      if (before !== undefined && before.heir !== core && !this.live.has(before.heir.epoch)) {
        for (const [k, n] of credits) add(this.stranded, k, -Math.min(n, before.credits.get(k) ?? 0))
      }
      for (let j = this.crashed.length - 1; j >= 0; j--) {
        const dead = this.crashed[j]
        if (dead.node !== node || !dead.limiter.allocate) continue
        this.crashed.splice(j, 1)
        this.inheritedEpochs.add(dead.epoch)
        this.moveToHeir(core, node, rulesOf(dead), dead.heir.homes, this.crashBooks.get(dead.epoch) ?? new Map(), credits, false)
        this.crashBooks.delete(dead.epoch)
      }
      // An incarnation that dropped its share before this (reclaim.ts: reclaimed, or a quorum attests what it
      // carried): what it dropped left `stranded` for the heir's credits.
      for (const z of this.everCores) {
        if (z === core || z.node !== node || !z.reclaim.droppedShare || z.incarnation - z.carries.length > log[i].inc) continue
        if (this.shadows.has(z) || this.droppedInherited.has(z)) continue
        this.droppedInherited.add(z)
        this.inheritedEpochs.add(z.epoch)
        this.moveToHeir(core, node, rulesOf(z), z.heir.homes, z.reclaim.droppedTokens, credits, false)
      }
      // A seed cut off for longer than reclaimMs is inherited while it lives on, fenced: its books are the heir's from
      // now on, and what it drops when it learns (reclaim.ts: reclaimed) was never its own.
      for (const z of this.live.values()) {
        // Alive (cut off), or a restart that carries the inherited incarnation's books (a journal recovery).
        if (z === core || z.node !== node || z.incarnation - z.carries.length > log[i].inc || this.shadows.has(z) || this.droppedInherited.has(z)) continue
        // A restart of an incarnation that had dropped its share holds none of it.
        if (!z.limiter.allocate) continue
        this.shadows.add(z)
        this.inheritedEpochs.add(z.epoch)
        const books = new Map<string, number>()
        for (const ks of z.limiter.states()) books.set(ks.key, booked(ks))
        this.moveToHeir(core, node, rulesOf(z), z.heir.homes, books, credits, true)
      }
      // A seed stopped while cut off (its "leaving" unheard) is inherited too: its snapshot is dropped when it restarts.
      const d = this.disk.get(node)
      if (d !== undefined && d.allocate) {
        this.disk.delete(node)
        this.inheritedEpochs.add(d.epoch)
        this.moveToHeir(core, node, d.rules, undefined, d.keys, credits, true)
      }
    }
  }

  /**
   * A dead seed's books (`books`: at its crash, stranded; or its snapshot,
   * saved) go to its heir: what the heir credits leaves `stranded` (or was
   * never in it, for a snapshot); what it holds by its homes (a glob key it
   * credited nothing for) is its share there, counted as held. What stays in
   * `stranded` is what the copy lost.
   */
  private moveToHeir (heir: ClusterCore, node: string, rules: RuleSet, homes: Homes | undefined, books: ReadonlyMap<string, number>,
    credits: ReadonlyMap<string, number>, saved: boolean): void {
    const now = rulesOf(heir)
    for (const [k, b] of books) {
      const rule = rules.match(k)
      const homed = rule?.glob === true && homeOf(k, this.seeds, homes) === node
      const taken = credits.get(k) ?? (homed && heir.limiter.existing(k) === undefined ? (rule as CompiledRule).stock : 0)
      // The heir credits the books carried over to its rules (estate.ts): a rule changed since they were written moves
      // them by the change in the dead seed's share, and in the shares it had inherited, as the stock moves (their
      // contributions follow the heir's rules now). What it credits short of that, the copy lost: it stays stranded.
      // (Beyond it is no error by itself: a copy older than the books still holds what the seed gave since, and those
      // grants are counted where they are: chaos 3+2 seed 14, a seed cut off gave 27 to a member cut off with it.)
      const lost = b + this.carried(node, rules, now, homes, k) - taken
      add(this.stranded, k, saved ? lost : lost - b)
    }
    // A key it had no state for was counted as its share (account()), which stops counting now: what the heir did not credit of it stays.
    for (const [k, n] of credits) if (!books.has(k)) add(this.stranded, k, this.share(node, true, rules, k, homes) - n)
  }

  /** A live node's rules changed (nothing to do: its contribution is read from its rules). */
  reloaded (_core: ClusterCore): void {}

  /** A grant was created or resent. */
  granted (g: Grant): void {
    this.grants.granted(g)
  }

  /** A copy of a grant entered (+1) or left (-1) the network. */
  copies (g: Grant, delta: number): void {
    this.grants.copies(g, delta)
  }

  /** An incarnation ends: a crash strands its books; a stop puts them on disk. */
  died (core: ClusterCore, how: 'crash' | 'stop', saved?: SavedState): void {
    this.settle()
    this.grants.receiverDied(core)
    this.live.delete(core.epoch)
    // A shadow's books are counted at the heir, until it drops them.
    if (this.shadows.has(core) && !core.reclaim.droppedCarried && !core.reclaim.reclaimed) return
    if (how === 'stop') {
      const keys = new Map<string, number>()
      for (const k of saved?.keys ?? []) keys.set(k.key, (keys.get(k.key) ?? 0) + k.held + k.tokens - k.burn)
      const holds = this.holdings(core)
      this.disk.set(core.node, { node: core.node, epoch: core.epoch, allocate: core.limiter.allocate, rules: rulesOf(core), keys, holds })
      return
    }
    const books = new Map<string, number>()
    for (const ks of core.limiter.states()) {
      add(this.stranded, ks.key, booked(ks))
      books.set(ks.key, booked(ks))
    }
    this.crashBooks.set(core.epoch, books)
    this.crashed.push(core)
    // Its share stays stranded under the rules it had; later incarnations start with nothing. So do the shares of the
    // dead seeds whose estates it held, until its own heir inherits them (5 seeds seed 1: a heir killed after a raise
    // read 6 over, their shares counted under the first file).
    if (core.limiter.allocate) {
      this.frozen.set(core.node, rulesOf(core))
      for (const n of this.holdings(core)) this.frozen.set(n, rulesOf(core))
    }
  }

  /**
   * Move grants whose fate is known out of `open` (grant-fates.ts). The
   * simulator calls it right after every delivery that may apply a grant: a
   * receiver drops the applied marks of a giver's ended epoch (at its new
   * epoch's gossip, or any message of it), and a grant found applied only
   * later would look unapplied, so counted both in the receiver's books and
   * as stranded.
   */
  settle (): void {
    this.grants.settle()
  }

  /** The grants whose tokens are stranded now, each with its giver's and receiver's epochs (grant-fates.ts). */
  strandedGrants (): Array<{ giverEpoch: string, toEpoch: string, seq: number, tokens: number }> {
    return this.grants.strandedGrants()
  }

  /**
   * A survivor took back its grant `g` to a dead seed (estate-marks.ts). If a
   * heir credited a copy of that seed's epoch whose mark for the pair is
   * below the grant, the copy's books lack it: its tokens were stranded
   * (unapplied at the crash, or in the books there and not in the credit)
   * and are the giver's again. Otherwise the heir credited them too: they
   * stay counted twice, and the run fails as tokens created.
   */
  /**
   * A heir took back a dead giver's grant (estate-returns.ts). One its receiver had applied, though the receiver's
   * copy had not (a receiver that died too, or lives on inherited, its heir's marks short of the grant): the
   * receiver's books went to its heir as that copy had them, and the grant counted as what the copy lost
   * (`moveToHeir`); it is back now (a receiver's live books are dropped when it learns). Otherwise the grant's fate.
   */
  private estateReturned (giver: string, giverEpoch: string, toEpoch: string, seq: number, items: ReadonlyArray<[string, number]>): void {
    const to = this.everCores.find(c => c.epoch === toEpoch)
    if (to !== undefined && this.inheritedEpochs.has(toEpoch) && to.ledger.appliedFrom(giver, giverEpoch) >= seq) {
      for (const [k, n] of items) add(this.stranded, k, -n)
      return
    }
    this.grants.estateReturn(giverEpoch, toEpoch, seq)
  }

  private estateTakeBack (taker: ClusterCore, g: Grant): void {
    // A shadow's (a seed inherited while it lives on): its books are its heir's, not counted here, and it drops them
    // when it learns; what it takes back goes with them. Its heir takes the grant back from its own copy of the
    // giver, if the receiver's copy lacks it (estate-returns.ts receiverInherited; sim chaos 5 seeds seed 37).
    if (this.shadows.has(taker) && !taker.reclaim.droppedCarried && !taker.reclaim.reclaimed) return
    // A member's own marks (its restart from its journal): a grant it never applied leaves `stranded` for its
    // giver's books; one it applied was in its crash books, which the restart's recovery took out of `stranded`
    // already (what it did not recover is the lost part). One it recovered shows as created.
    // A seed's own marks come only from a clean stop's snapshot (persist.ts), whose books the restart restored: the
    // same as a member's, unless a heir inherited that epoch (then the heir's copy is what was credited).
    for (const c of this.everCores) {
      for (const e of c.heir.log) {
        if (e.node !== g.to || e.epoch !== g.toEpoch) continue
        if (g.seq <= (e.marks.get(`${g.node}\u0000${g.epoch}`) ?? 0)) return
        for (const [k, n] of g.items) add(this.stranded, k, -n)
        return
      }
    }
    this.grants.estateReturn(g.epoch, g.toEpoch, g.seq)
  }

  /** The share a node would create `key` with under `rules`. */
  /** The dead seeds whose estates `core`'s books hold (heir.ts). */
  private holdings (core: ClusterCore): Set<string> {
    return new Set(this.seeds.filter(n => n !== core.node && (core.heir.mine.has(n) || heirAtEnd(n, core.heir.homes, this.seeds.length) === core.node)))
  }

  /** How far a seed's books move with a change from `from` to `to` (rule-change.ts carryOver): its share and the shares of the seeds it inherited. */
  private carried (node: string, from: RuleSet, to: RuleSet, homes: Homes | undefined, key: string): number {
    const a = from.match(key)
    const b = to.match(key)
    if (a === undefined || b === undefined || a.hash === b.hash) return 0
    const held = (r: CompiledRule): number => initialShare(r.stock, r.glob, key, node, this.seeds, homes) + inheritedShares(r, key, node, this.seeds, homes)
    return held(b) - held(a)
  }

  private share (node: string, allocate: boolean, rules: RuleSet, key: string, homes?: Homes): number {
    const rule = rules.match(key)
    return allocate && rule !== undefined ? initialShare(rule.stock, rule.glob, key, node, this.seeds, homes) : 0
  }

  /** A seed's part of the stock: its share under the rules it allocates with now, or had when it crashed. */
  private contribution (node: string, key: string): number {
    // Not a shadow's (a seed inherited while it lives on, cut off): its share is its heir's, under the heir's rules
    // (a reload reaches the two at different times, or only one of them).
    for (const core of this.live.values()) {
      if (core.node === node && core.limiter.allocate && !this.shadows.has(core)) return this.share(node, true, rulesOf(core), key)
    }
    const d = this.disk.get(node)
    if (d !== undefined && d.allocate) return this.share(node, true, d.rules, key)
    // Inherited: its heir's books hold its share, and carry it through the heir's rule changes (rule-change.ts); a
    // heir stopped cleanly holds it on disk, under the rules it saved.
    for (const core of this.live.values()) {
      const holds = core.heir.mine.has(node) || heirAtEnd(node, core.heir.homes, this.seeds.length) === core.node
      if (holds && core.limiter.allocate) return this.share(node, true, rulesOf(core), key)
    }
    for (const h of this.disk.values()) if (h.allocate && h.holds.has(node)) return this.share(node, true, h.rules, key)
    // Its latest incarnation dropped its share (reclaimed) and no heir holds it yet: under the rules that one had, as
    // a crash's (not the first file's: a reclaimed seed whose heir had just restarted read 12 over for 60 ms, sim
    // chaos 5 seeds seed 5).
    for (let i = this.everCores.length - 1; i >= 0; i--) {
      const z = this.everCores[i]
      if (z.node !== node) continue
      if (z.reclaim.droppedShare) return this.share(node, true, rulesOf(z), key)
      break
    }
    const f = this.frozen.get(node)
    return this.share(node, true, f ?? this.initialRules, key)
  }

  account (key: string): KeyAccount {
    this.settle()
    let stock = 0
    for (const s of this.seeds) stock += this.contribution(s, key)
    const a: KeyAccount = { key, stock, held: 0, transit: 0, saved: 0, stranded: this.stranded.get(key) ?? 0, error: 0 }
    for (const core of this.live.values()) {
      if (this.shadows.has(core) && !core.reclaim.droppedCarried && !core.reclaim.reclaimed) continue
      const ks = core.limiter.existing(key)
      a.held += ks !== undefined ? booked(ks) : this.share(core.node, core.limiter.allocate, rulesOf(core), key, core.heir.homes)
    }
    for (const d of this.disk.values()) a.saved += d.keys.get(key) ?? this.share(d.node, d.allocate, d.rules, key)
    for (const c of this.crashed) {
      if (c.limiter.existing(key) === undefined) a.stranded += this.share(c.node, c.limiter.allocate, rulesOf(c), key, c.heir.homes)
    }
    // A share dropped and not inherited yet: the keys it had no state for, as a crashed seed's.
    for (const c of this.everCores) {
      if (c.reclaim.droppedShare && !c.reclaim.droppedTokens.has(key) && !this.droppedInherited.has(c) && !this.shadows.has(c)) a.stranded += this.share(c.node, true, rulesOf(c), key, c.heir.homes)
    }
    this.grants.count(key, a)
    // Refused grants: their tokens are nowhere, unless their giver took them back (then they are in its books).
    for (const c of this.everCores) a.stranded += (c.refusedTokens.get(key) ?? 0) - (c.takenBackTokens.get(key) ?? 0)
    // Settlements of dead accounts (reclaim.ts) move tokens out of the estates into survivors' books; a reclaimed
    // node's own books, when it drops them, go back to the estate they were credited from.
    for (const c of this.everCores) a.stranded += (this.shadows.has(c) ? 0 : c.reclaim.droppedTokens.get(key) ?? 0) - (c.reclaim.settledTokens.get(key) ?? 0)
    a.error = a.held + a.transit + a.saved + a.stranded - stock
    return a
  }
}

/** A key's tokens in a node's books: its bucket's share plus deferred credits, less the burn it owes. */
export const booked = booksOf

/** A core's current rules as a RuleSet (cached per rule list: reloads replace the list). */
const ruleSets = new WeakMap<readonly CompiledRule[], RuleSet>()
export function rulesOf (core: ClusterCore): RuleSet {
  const rules = core.limiter.rules
  let rs = ruleSets.get(rules)
  if (rs === undefined) ruleSets.set(rules, rs = new RuleSet(rules.map(r => r.config)))
  return rs
}

function add (m: Map<string, number>, k: string, n: number): void {
  m.set(k, (m.get(k) ?? 0) + n)
}
