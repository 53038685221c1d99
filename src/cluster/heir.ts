/**
 * The heir of a seed that died for good (cluster-protocol.md, "The heir of a dead seed"). Pure;
 * owned by the core, driven by its tick and by jcopy replies.
 *
 * A seed D with a share copies its books journal to its replica group
 * (replication.ts). Once a quorum of voters attests D/inc (silence for
 * `reclaimMs`, reclaim.ts), every survivor settles it: what it held of D's
 * tokens is relabelled as held of D's heir's (reclaim.ts `settleSeed`), and
 * D's grants are refused. The heir then:
 *
 * 1. **Reads** D's copies with jget/jcopy from a read set of D's group: one
 *    that meets every write quorum outside D (`sufficient`), so it holds
 *    every write that was durable, and every give whose grant left D. It
 *    takes the newest generation of an incarnation up to D/inc, then the
 *    longest (copies of one generation are prefixes of one text).
 * 2. **Credits** the estate (estate.ts: books less the reservation left, per
 *    key) as deferred credits at the rule's horizon counted from now: D may
 *    have spent any of it before it died, and every such spend has returned
 *    by then. What D held of members' tokens joins `reclaim.restored`.
 * 3. **Homes** D's glob keys here (`homes`, share.ts `homeOf`): a key D
 *    never changed is at its stock here, materialized on first use (before
 *    the horizon, as a deferred credit: `materialized`); keys the copy names
 *    are credited in 2 and their share here becomes the stock.
 * 4. **Records** the inheritance in its journal's next checkpoint
 *    (`inherited`), which its own copies carry: the credits and the record
 *    become durable together, and no grant of the estate leaves before they
 *    are (a checkpoint is written before any later give).
 *
 * One heir: the first seed after D in name order that is alive here (not
 * settled). It acts only when every dead seed between D and itself has been
 * inherited (nearest first), so a heir that dies after inheriting is
 * inherited in turn, with D's estate in its books and D in its copy's
 * `inherited`: D is never inherited twice. A heir that dies before its
 * record is durable gave nothing of the estate, so its successor inherits
 * D again. Two heirs at once would need two seeds each alive in the other's
 * view, and both first in the ring after D: impossible.
 */
import { seedOrder, homeOf } from '../core/share.js'
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { estateOf } from './estate.js'
import { ext } from './key-ext.js'
import { Quorum } from './quorum.js'
import { horizonAt } from './recovery.js'
import { CLUSTER_VERSION } from './messages.js'
import { chunkEnd, type Jcopy, type Jget } from './replica-messages.js'
import { replicaGroup } from './replication.js'

/** What one replica said it holds of the writer, and the text read from it so far. */
interface Answer { inc: number, gen: number, have: number, text: string }

interface Read {
  writer: string
  inc: number
  group: string[]
  quorum: Quorum
  answers: Map<string, Answer>
  /** Replica -> when its request may be sent again (in flight: Infinity until answered or failed). */
  nextAt: Map<string, number>
  /** The replica whose copy is read to its end, once the answers suffice. */
  best: string | null
  startedAt: number
}

export interface Inheritance { node: string, inc: number, calMs: number }

export class Heir {
  private readonly c: ClusterCore
  /** Dead seed -> the seed whose books hold its estate (its glob keys' home). Shared with the limiter. */
  readonly homes = new Map<string, string>()
  /** Dead seed -> the incarnation whose estate was inherited (the later ones hold no share: reclaim.ts settles them as members). */
  readonly through = new Map<string, number>()
  /** This account's inheritances (the journal's checkpoint and the state file keep them). */
  readonly mine = new Map<string, Inheritance>()
  /** Seeds with a share settled here and not known to be inherited: node -> incarnation. */
  readonly dead = new Map<string, number>()
  private read: Read | null = null
  /** Each inheritance, in order (the simulator's audit reads them). */
  readonly log: Array<{ node: string, inc: number, tokens: number, unspent: number, lost: ReadonlyMap<string, number>, credits: Map<string, number>, epoch: string | null, marks: ReadonlyMap<string, number> }> = []
  readonly counters = { inherited: 0, tokensInherited: 0, shares: 0, jgetsSent: 0, jgetsFailed: 0, jgetsServed: 0 }

  constructor (core: ClusterCore, inherited: ReadonlyArray<readonly [string, number, number]>, estates: ReadonlyArray<readonly [string, string, number]> = []) {
    this.c = core
    // Others' inheritances heard before a restart: which incarnations of a dead seed are settled as its heir's (reclaim.ts settle).
    for (const [node, home, inc] of estates) {
      if (node === core.node) continue
      this.homes.set(node, home)
      this.through.set(node, inc)
    }
    for (const [node, inc, calMs] of inherited) {
      this.mine.set(node, { node, inc, calMs })
      this.homes.set(node, core.node)
      this.through.set(node, inc)
    }
  }

  /** The dead seed whose copies this node reads now, or null. */
  get reading (): string | null {
    return this.read?.writer ?? null
  }

  /** A seed with a share was settled here (reclaim.ts): its estate waits for its heir. */
  died (node: string, inc: number): void {
    if (this.homes.has(node) || inc <= (this.dead.get(node) ?? 0)) return
    this.dead.set(node, inc)
  }

  /**
   * A seed's gossip names the seeds it inherited: their glob keys are homed
   * there. This node among them: it came back after its share was inherited
   * (reclaim.ts dropBooks, once it has no share): its glob keys are homed at
   * its heir here too, or it would take itself for their home, holding none
   * of them, and deny a key never used since for good.
   */
  onEstates (from: string, entries: ReadonlyArray<readonly [string, number]>): void {
    const c = this.c
    if (!c.seeds.includes(from)) return
    for (const [node, inc] of entries) {
      if (node === c.node && !c.reclaim.hasBase) { this.homes.set(node, from); continue }
      if (node === c.node || node === from || !c.seeds.includes(node) || this.mine.has(node)) continue
      this.homes.set(node, from)
      this.through.set(node, Math.max(inc, this.through.get(node) ?? 0))
      if (inc >= (this.dead.get(node) ?? 0)) this.dead.delete(node)
      if (this.read?.writer === node) this.read = null
    }
  }

  /** For gossip: the inheritances of this account. */
  list (): Array<[string, number]> {
    return [...this.mine.values()].map(m => [m.node, m.inc])
  }

  /** For the journal's checkpoint and the state file. */
  saved (): Array<[string, number, number]> {
    return [...this.mine.values()].map(m => [m.node, m.inc, m.calMs])
  }

  /** Others' inheritances heard here, for the journal's checkpoint and the state file: [node, home, inc]. */
  known (): Array<[string, string, number]> {
    const out: Array<[string, string, number]> = []
    for (const [node, home] of this.homes) {
      const inc = this.through.get(node)
      if (inc !== undefined && !this.mine.has(node)) out.push([node, home, inc])
    }
    return out
  }

  /** D's heir as this node sees it: the first seed after D in name order that is alive here (`settled`: dead here). */
  heirOf (d: string, settled: (n: string) => boolean): string | undefined {
    const ring = seedOrder(this.c.seeds)
    const i = ring.indexOf(d)
    for (let k = 1; k < ring.length; k++) {
      const s = ring[(i + k) % ring.length]
      if (!settled(s) && !this.homes.has(s) && !this.dead.has(s)) return s
    }
    return undefined
  }

  /**
   * The seed this node should inherit now, or null: walking the ring back
   * from this node, the nearest dead seed not yet inherited, if only
   * inherited seeds lie between it and this node.
   */
  private target (): string | null {
    const c = this.c
    const ring = seedOrder(c.seeds)
    const i = ring.indexOf(c.node)
    if (i < 0) return null
    for (let k = 1; k < ring.length; k++) {
      const s = ring[(i - k + ring.length) % ring.length]
      if (this.homes.has(s)) continue
      return this.dead.has(s) ? s : null
    }
    return null
  }

  /** Each tick: start or continue reading a dead seed's copies; the jgets to send. */
  update (nowMs: number): Array<{ to: string, msg: Jget }> {
    const c = this.c
    // Nothing to do (the usual case, every tick): no fence recomputation either. The tick computed the fence already.
    if (this.read === null && this.dead.size === 0) return []
    if (!c.reclaim.hasBase || c.fence.fenced || c.leaving) return []
    if (this.read === null) {
      const d = this.target()
      if (d === null) return []
      const group = replicaGroup(d, c.seeds)
      this.read = { writer: d, inc: this.dead.get(d) as number, group, quorum: new Quorum([d, ...group]), answers: new Map(), nextAt: new Map(), best: null, startedAt: nowMs }
      const own = c.replicas?.upTo(d, this.dead.get(d) as number)
      if (group.includes(c.node)) this.read.answers.set(c.node, own === undefined ? { inc: 0, gen: 0, have: 0, text: '' } : { inc: own.inc, gen: own.gen, have: own.text.length, text: own.text })
    }
    const r = this.read
    if (r.best === null && this.sufficient(r)) r.best = this.choose(r)
    if (r.best !== null) {
      const a = r.answers.get(r.best) as Answer
      if (a.text.length >= a.have) { this.inherit(r, a, nowMs); return [] }
      return this.ask(r, r.best, a, nowMs)
    }
    const out: Array<{ to: string, msg: Jget }> = []
    // Every member of the group is asked, a seed inherited or dead too: one inherited before may be back without a
    // share and still hold its copy (a write counted durable there), and the read is not sufficient without it
    // whenever the others are no write quorum (chaos 5 seeds, seed 2: skipped, the read waited forever and the
    // dead seed's estate, with what it had inherited, was lost). A dead one fails and is asked again later.
    for (const g of r.group) {
      if (g === c.node || r.answers.has(g)) continue
      out.push(...this.ask(r, g, undefined, nowMs))
    }
    return out
  }

  private ask (r: Read, to: string, a: Answer | undefined, nowMs: number): Array<{ to: string, msg: Jget }> {
    if ((r.nextAt.get(to) ?? -Infinity) > nowMs) return []
    r.nextAt.set(to, Infinity)
    this.counters.jgetsSent++
    const c = this.c
    // A first ask names the attested incarnation (gen 0: from the start), so a replica answers from its copy of it if
    // it kept one aside (replica-store.ts `upTo`); an older replica answers with its copy, as for inc 0.
    return [{ to, msg: { v: CLUSTER_VERSION, t: 'jget', node: c.node, epoch: c.epoch, writer: r.writer, inc: a?.inc ?? r.inc, gen: a?.gen ?? 0, from: a?.text.length ?? 0 } }]
  }

  /**
   * Whether the replicas that answered with a copy of an incarnation up to
   * the attested one (or none) meet every write quorum of the writer's group
   * outside the writer. A copy of a later incarnation does not count: the
   * writer restarted, and that replica's copy of the attested incarnation
   * was replaced (a restart's first jreps can reach a replica before it
   * settles the dead incarnation), so it no longer holds that incarnation's
   * durable writes. Counting it, a heir read a set that missed a quorum's
   * writes and credited a lagging copy's books, tokens given since included
   * (heir-crash, 4 seeds: 12 tokens over the limit in hard mode).
   */
  private sufficient (r: Read): boolean {
    const missing = r.group.filter(g => !this.holdsAttested(r, r.answers.get(g)))
    return !r.quorum.isQuorum([r.writer, ...missing])
  }

  /** Whether an answer's copy may stand for the attested incarnation: of it, of an earlier one, or none. */
  private holdsAttested (r: Read, a: Answer | undefined): a is Answer {
    return a !== undefined && a.inc <= r.inc
  }

  /** The newest generation of an incarnation up to the attested one, then the longest (only after `sufficient`). */
  private choose (r: Read): string {
    let best: string | null = null
    let b: Answer | null = null
    for (const [g, a] of r.answers) {
      if (!this.holdsAttested(r, a)) continue
      if (b === null || a.inc > b.inc || (a.inc === b.inc && (a.gen > b.gen || (a.gen === b.gen && a.have > b.have)))) { best = g; b = a }
    }
    if (best === null) throw new Error('heir: choose before the answers suffice')
    return best
  }

  /** A replica's answer to a jget. */
  onJcopy (from: string, m: Jcopy, nowMs: number): void {
    const r = this.read
    if (r === null || m.writer !== r.writer || !r.group.includes(from)) return
    r.nextAt.set(from, nowMs)
    const a = r.answers.get(from)
    if (a === undefined || a.inc !== m.inc || a.gen !== m.gen) {
      // A first answer, or the replica's copy changed generation: its text from the start.
      if (m.offset !== 0) return
      r.answers.set(from, { inc: m.inc, gen: m.gen, have: m.have, text: m.data })
      if (r.best === from) r.best = null
      return
    }
    a.have = Math.max(a.have, m.have)
    if (m.offset === a.text.length) a.text += m.data
  }

  /** A jget got no answer: asked again after a gossip interval. */
  onJgetFailed (to: string, writer: string, nowMs: number): void {
    this.counters.jgetsFailed++
    if (this.read?.writer === writer) this.read.nextAt.set(to, nowMs + this.c.tuning.gossipIntervalMs)
  }

  /** A replica's side: what it holds of `m.writer`. */
  serve (m: Jget): Jcopy {
    const c = this.c
    this.counters.jgetsServed++
    // inc 0: whatever it holds (a heir before the superseded copies asked so first).
    const s = m.inc === 0 ? c.replicas?.get(m.writer) : c.replicas?.upTo(m.writer, m.inc)
    const reply = (inc: number, gen: number, text: string, from: number): Jcopy =>
      ({ v: CLUSTER_VERSION, t: 'jcopy', node: c.node, epoch: c.epoch, writer: m.writer, inc, gen, have: text.length, offset: from, data: text.slice(from, chunkEnd(text, from)) })
    if (s === undefined) return reply(0, 0, '', 0)
    const same = s.inc === m.inc && s.gen === m.gen && m.from <= s.text.length
    return reply(s.inc, s.gen, s.text, same ? m.from : 0)
  }

  /** Credit the estate in `a` (see the header). */
  private inherit (r: Read, a: Answer, nowMs: number): void {
    const c = this.c
    this.read = null
    const d = r.writer
    const est = estateOf(a.have === 0 ? null : a.text, d, c.cluster, { rules: c.limiter.rules, match: k => c.limiter.ruleFor(k) }, c.seeds)
    const cal = c.calendar.at(nowMs)
    const skew = c.tuning.maxClockSkewMs
    // The seeds D had inherited are homed at D until now: their keys move with D's.
    const moved = new Set([d, ...est.inherited.map(([n]) => n).filter(n => n !== c.node && !this.homes.has(n))])
    const homesBefore = new Map(this.homes)
    for (const n of moved) if (n !== d) homesBefore.set(n, d)
    const homedAtD = (ks: KeyState): boolean => ks.rule.glob && moved.has(homeOf(ks.key, c.seeds, homesBefore) as string)
    let tokens = 0
    const credits = new Map<string, number>()
    const credit = (ks: KeyState, n: number): void => {
      if (n > 1e-9) (ext(ks).deferred ??= []).push([n, horizonAt(ks.rule.config, cal, skew)])
      c.active.add(ks)
      tokens += n
      credits.set(ks.key, (credits.get(ks.key) ?? 0) + n)
    }
    // Glob keys here homed at D and not in the copy: D's books of them are their stock (never changed).
    for (const ks of c.limiter.states()) {
      if (!homedAtD(ks) || est.copied.has(ks.key)) continue
      credit(ks, ks.rule.stock)
      ks.initial = ks.rule.stock
    }
    for (const [key, n] of est.credits) {
      let ks: KeyState | undefined
      try {
        ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
      } catch {
        c.ledger.stranded += n
        continue
      }
      credit(ks, n)
      if (homedAtD(ks)) ks.initial = ks.rule.stock
    }
    // What the estate owes under the rules in force (estate.ts): burned here, as a reload would have had D burn it.
    for (const [key, n] of est.burns) {
      try {
        const ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
        ext(ks).burn += n
        c.active.add(ks)
      } catch {
        // No state can be made for it here (its rule gone, a full table): the heir spends none of it either.
      }
    }
    // The copy's incarnations of those accounts come with them: a settlement of an older incarnation of a peer,
    // heard before the peer's newer one, must leave the newer one's alone (reclaim-settle.ts).
    c.journal.restoreIncs(est.incs)
    for (const [node, byEpoch] of est.peers) {
      if (node === c.node) continue
      for (const [epoch, keys] of byEpoch) {
        // An account settled here before D was inherited (a member that died first) can never give back what it
        // held of D's tokens: credited now, as its settlement would have had it known (reclaim.ts settle).
        const gone = c.reclaim.settledAccount(node, epoch)
        for (const [key, n] of keys) {
          if (!gone) { c.reclaim.restore(node, epoch, key, n); continue }
          let ks: KeyState
          try {
            ks = c.limiter.existing(key) ?? c.limiter.keyState(key, 1, nowMs)
          } catch {
            c.ledger.stranded += Math.max(0, -n)
            continue
          }
          // (Below zero only if D broke the no-relay rule: destroying is the safe side, as in a settlement.)
          if (n < 0) credit(ks, -n)
          else { ext(ks).burn += n; c.active.add(ks) }
        }
      }
    }
    for (const n of moved) {
      const inc = n === d ? r.inc : (est.inherited.find(e => e[0] === n)?.[1] ?? 0)
      this.homes.set(n, c.node)
      this.through.set(n, inc)
      this.mine.set(n, { node: n, inc, calMs: cal })
      this.dead.delete(n)
    }
    // The credits and the record go to disk together, in one checkpoint, before any later give.
    c.journal.checkpointNeeded = true
    this.counters.inherited++
    this.counters.tokensInherited += tokens
    this.log.push({ node: d, inc: r.inc, tokens, unspent: est.unspent, lost: est.lost, credits, epoch: est.epoch, marks: est.marks })
    // Our grants in flight to D, and everyone's: the copy's marks say which its books hold (estate-marks.ts).
    if (est.epoch !== null) c.reclaim.marks.announce(d, est.epoch, est.marks, nowMs)
    // D's grants in the copy that their receivers never applied: taken back as the receivers report (estate-returns.ts).
    if (est.epoch !== null) c.reclaim.returns.inherited(d, est.epoch, est.sent, nowMs)
  }

  /**
   * A key was just created here with its share in the bucket: a glob key
   * homed here by an inheritance, before that inheritance's horizon, gets
   * its stock as a deferred credit instead (the dead seed may have spent it).
   */
  materialized (ks: KeyState, calMs: number): boolean {
    if (this.mine.size === 0 || !ks.rule.glob || ks.initial <= 0) return false
    const c = this.c
    let h = homeOf(ks.key, c.seeds)
    let m: Inheritance | undefined
    for (let i = 0; i < c.seeds.length && h !== undefined && h !== c.node; i++) {
      m ??= this.mine.get(h)
      h = this.homes.get(h)
    }
    if (m === undefined) return false
    const at = horizonAt(ks.rule.config, m.calMs, c.tuning.maxClockSkewMs)
    if (at <= calMs) return false
    const moved = ks.bucket.debit(ks.initial)
    if (moved <= 0) return false
    ;(ext(ks).deferred ??= []).push([moved, at])
    this.counters.shares += moved
    return true
  }

  status (): Record<string, unknown> {
    return {
      estates: [...this.mine.values()],
      homes: Object.fromEntries(this.homes),
      waiting: [...this.dead].map(([node, inc]) => ({ node, inc })),
      reading: this.read === null ? null : { writer: this.read.writer, inc: this.read.inc, answers: [...this.read.answers].map(([g, a]) => ({ replica: g, inc: a.inc, gen: a.gen, have: a.have, read: a.text.length })), best: this.read.best },
      ...this.counters
    }
  }
}
