/**
 * Grants in flight to a seed that died for good (cluster-protocol.md, "The heir of a dead seed",
 * step 5, estate marks).
 *
 * When a survivor L settles a dead seed D (reclaim.ts settleSeed), its
 * unacked grants to D are in one of three states: D applied them and the
 * credit is in D's copied journal (so in the estate its heir credits); D
 * applied them but the credit never reached a copy; or D never applied them.
 * L cannot tell which. Before this module L dropped them all: tokens lost,
 * never doubled (in CI, 24 of a 300-token stock in one run).
 *
 * D's journal writes, in the batch that credits a grant, the pair's new
 * applied mark (journal.ts `mark`), and its checkpoints carry all its marks.
 * Any prefix of the journal is then a consistent cut: its books hold
 * exactly the grants up to its marks. The heir credits the books of the copy
 * it read (estate.ts), and gossips that copy's marks (`estateMarks`: [D, D's
 * epoch, giver, giver epoch, seq]). A survivor then:
 *
 * - counts its grants at or below the mark as delivered: their credit is in
 *   the estate;
 * - takes back those above it, as a credit deferred to the rule's horizon
 *   (D may have applied one and spent it before it died: the horizon is
 *   after every spend D made), and, having counted them as returned to D's
 *   account at the settlement, as held of the heir's account again.
 *
 * Why nothing is counted twice: a grant above the mark has no credit in the
 * copy, so none in the estate; D may have applied it, but then either spent
 * it (back by the horizon), or given it on, and every give is covered by the
 * copy's reservation, which the heir's credit deducts whether or not the
 * give is in the copy (estate.ts). So the heir's credit plus the take-backs
 * are at most D's books at its death plus the tokens in grants D never
 * applied, which no one else holds.
 *
 * A survivor waits for the marks at most `waitMs` after its settlement
 * (the heir may have read no copy, or died): then the grants are dropped,
 * counted stranded, as before. The heir gossips its marks for the same time
 * after its inheritance, to the peers alive then, a slice per gossip.
 * Marks are accepted only from the dead seed's heir as this node knows it
 * (the `estates` in the same gossip are read first).
 *
 * A member that restarts from its journal (its own marks). A member's
 * journal writes the same marks (a crediting batch names the pair's new
 * mark), and nothing inherits it: the restart itself credits the journal's
 * books, so its journal's marks are what it holds. When a giver sees the
 * member's new epoch, its unacked grants to the old one wait here, as for a
 * dead seed, and the restart gossips its old epoch's marks for `waitMs`
 * (`announceOwn`): at or below a mark the grant is in its recovered books,
 * above it the giver takes it back at the horizon. Before, those grants were
 * lost for good: a kill -9 while tokens moved to a member shrank the limit
 * until the whole cluster restarted (crash-recovery.test.ts saw 33 of 100).
 * A seed's restart from its journal announces them only once no heir can
 * inherit the crashed epoch (`announceOwnOnceSafe`): that journal can be
 * shorter than the copy a heir would credit (a write the replicas had and
 * this disk did not), and a seed that was inherited drops what it recovers,
 * so until then only a heir may speak for it. A clean stop's snapshot is
 * different (any node's, seed or member): it is final, no copy holds more,
 * so its restart announces its marks at once (persist.ts), and a heir's
 * marks for the same epoch are never above them: whichever come first, no
 * grant a heir credited is taken back. A member that is settled instead
 * (reclaim-settle.ts) takes these grants back from here (`release`), and
 * its restart drops what it recovered.
 */
import type { ClusterCore } from './cluster-core.js'
import type { EstateMark, Grant } from './messages.js'
import { ext } from './key-ext.js'
import { creditAtHorizon } from './recovery.js'

/** Entries per gossip (the list rotates through the peers). */
export const MARKS_PER_GOSSIP = 64
/** Marks heard for a settlement not made here yet, kept at most. */
const MAX_EARLY_MARKS = 1024

interface Held {
  node: string
  epoch: string
  grants: Grant[]
  /** The account our positions of the dead seed were moved to at the settlement (none: the heir is this node, or unknown). */
  heir?: readonly [string, string]
  /** A restart's ended epoch (intake.ts), not a settled seed: its account lives on in the restart's books. */
  restart: boolean
  until: number
  /** When one of them last went to the restart as a probe (`probes`). */
  probedAt: number
}

interface Announced {
  dead: string
  epoch: string
  marks: ReadonlyMap<string, number>
  until: number
}

export class EstateMarks {
  private readonly c: ClusterCore
  /** Survivor: `${dead}\0${epoch}` -> our unacked grants to it, waiting for its heir's marks. */
  private readonly held = new Map<string, Held>()
  /** Survivor: marks heard before this node settled that seed. */
  private readonly early = new Map<string, { mark: number, until: number }>()
  /** Heir: the copies' marks it gossips. */
  private readonly announced: Announced[] = []
  private cursor = 0
  /** Per key: tokens taken back (the simulator's audits read it). */
  readonly takenBack = new Map<string, number>()
  readonly counters = { tokensTakenBack: 0, tokensDelivered: 0, tokensExpired: 0 }
  /** Told of each grant taken back (the simulator's token audit checks it against the heir's copy). */
  onTakeBack: ((g: Grant) => void) | null = null
  /** Told of each grant to a restart's ended epoch counted as given by its marks (the simulator's position audit: as an ack). */
  onDelivered: ((g: Grant) => void) | null = null

  constructor (core: ClusterCore) {
    this.c = core
  }

  /** How long a survivor waits for a heir's marks, and a heir gossips them. */
  get waitMs (): number {
    return Math.max(60_000, 10 * this.c.tuning.reclaimMs)
  }

  /**
   * Survivor, at the settlement of dead seed `node`: our unacked grants to its `epoch` wait for its heir's marks;
   * or at any node's new epoch (intake.ts), for the restart's own.
   */
  hold (node: string, epoch: string, grants: Grant[], heir: readonly [string, string] | undefined, nowMs: number, restart = false): void {
    if (grants.length === 0) return
    const id = `${node}\u0000${epoch}`
    const h: Held = { node, epoch, grants, restart, until: nowMs + this.waitMs, probedAt: -Infinity, ...(heir === undefined ? {} : { heir }) }
    this.held.set(id, h)
    const e = this.early.get(id)
    if (e !== undefined) {
      this.early.delete(id)
      this.resolve(id, h, e.mark, nowMs)
    }
  }

  /** Heir: the copy it credited had these marks (`${giver}\0${epoch}` -> seq); its own grants are settled at once. */
  announce (dead: string, epoch: string, marks: ReadonlyMap<string, number>, nowMs: number): void {
    this.announced.push({ dead, epoch, marks, until: nowMs + this.waitMs })
    this.mark(dead, epoch, marks.get(`${this.c.node}\u0000${this.c.epoch}`) ?? 0, nowMs)
    // Dead givers' grants to it, where this node holds their estates too (estate-returns.ts `receiverInherited`).
    for (const [id, seq] of marks) {
      const i = id.indexOf('\u0000')
      this.c.reclaim.returns.receiverInherited(dead, epoch, id.slice(0, i), id.slice(i + 1), seq, nowMs)
    }
  }

  /** For gossip: a slice of [dead, epoch, peer, peer epoch, mark] over the alive peers, while announcements last. */
  take (nowMs: number): EstateMark[] {
    const c = this.c
    while (this.announced.length > 0 && this.announced[0].until <= nowMs) this.announced.shift()
    if (this.announced.length === 0) return []
    const all: EstateMark[] = []
    for (const a of this.announced) {
      const told = new Set<string>()
      for (const p of c.peers.all()) {
        if (p.name === a.dead || !p.sameCluster || !c.peers.isAlive(p, nowMs)) continue
        const id = `${p.name}\u0000${p.epoch}`
        told.add(id)
        all.push([a.dead, a.epoch, p.name, p.epoch, a.marks.get(id) ?? 0])
      }
      // And every giver the marks name that this node has not heard alive under that epoch: a giver whose gossip
      // does not reach us (a stopping node's, sim `stops` seed 24) still waits for its mark to settle its grants.
      for (const [id, seq] of a.marks) {
        if (told.has(id)) continue
        const i = id.indexOf('\u0000')
        if (id.slice(0, i) !== a.dead) all.push([a.dead, a.epoch, id.slice(0, i), id.slice(i + 1), seq])
      }
    }
    if (all.length <= MARKS_PER_GOSSIP) return all
    const out: EstateMark[] = []
    for (let i = 0; i < MARKS_PER_GOSSIP; i++) out.push(all[(this.cursor + i) % all.length])
    this.cursor = (this.cursor + MARKS_PER_GOSSIP) % all.length
    return out
  }

  /**
   * This node restarted (a member from its journal, any node from a clean stop's snapshot, a seed's journal once
   * safe): its ended epoch's marks (`${giver}\0${giverEpoch}` -> seq), gossiped to its givers for `waitMs` so they
   * settle their grants in flight to that epoch (see the header).
   */
  announceOwn (epoch: string, marks: ReadonlyMap<string, number>, nowMs: number): void {
    this.announced.push({ dead: this.c.node, epoch, marks, until: nowMs + this.waitMs })
  }

  /**
   * A seed restarted from its journal: its crashed epoch's marks, announced
   * only once its carried books are its own for good (carrier.ts `isSafe`:
   * a quorum of voters echoed this incarnation without attesting the
   * crashed one, so none ever will, and no heir inherits it). Until then a
   * heir might still credit a copy of that epoch that is longer than this
   * journal (a write the replicas had and this disk did not), and these
   * marks would take back grants the copy holds. If a quorum attests it
   * instead, the books are dropped and only the heir's marks count.
   */
  announceOwnOnceSafe (epoch: string, marks: ReadonlyMap<string, number>): void {
    this.ownOnceSafe = { epoch, marks }
  }

  private ownOnceSafe: { epoch: string, marks: ReadonlyMap<string, number> } | null = null

  /**
   * A gossip's marks from `from` (at its epoch `fromEpoch`): those for this incarnation, if `from` is the dead
   * seed's heir here, or the node itself speaking of an earlier epoch of its own (a seed only after a clean stop,
   * or once no heir can inherit the crashed epoch: announceOwnOnceSafe).
   */
  onMarks (from: string, fromEpoch: string, entries: readonly EstateMark[], nowMs: number): void {
    const c = this.c
    for (const [dead, epoch, giver, giverEpoch, seq] of entries) {
      // Another giver's: a dead one's grants, if this node is its heir, wait for it (estate-returns.ts).
      if (giver !== c.node) { if (c.heir.homes.get(dead) === from) c.reclaim.returns.receiverInherited(dead, epoch, giver, giverEpoch, seq, nowMs); continue }
      const own = dead === from && epoch !== fromEpoch
      // A restart's mark of our crashed epoch's grants: for this node's own restart's take-backs (estate-returns.ts).
      if (giverEpoch !== c.epoch) { if (own) c.reclaim.returns.onEnded(dead, epoch, giverEpoch, seq, nowMs); continue }
      if (!own && c.heir.homes.get(dead) !== from) continue
      this.mark(dead, epoch, seq, nowMs)
    }
  }

  /** A member settled (reclaim-settle.ts): its grants still waiting here for its marks, taken out to be credited. */
  release (node: string, epoch: string): Grant[] {
    const id = `${node}\u0000${epoch}`
    const h = this.held.get(id)
    if (h === undefined) return []
    this.held.delete(id)
    return h.grants
  }

  /**
   * Tokens of `key` in our grants to a restarted `node`'s ended epochs that wait for its marks: it may hold them
   * (no-relay.ts `mayReturn` counts them as in transit until the marks tell).
   */
  heldFor (node: string, key: string): number {
    let n = 0
    for (const h of this.held.values()) {
      if (h.node !== node || !h.restart) continue
      for (const g of h.grants) for (const [k, a] of g.items) if (k === key) n += a
    }
    return n
  }

  /**
   * This node's restart speaks for its ended `epoch` (announceOwn, or announceOwnOnceSafe once safe): that epoch's
   * final mark of `giver`'s epoch `giverEpoch` (0: it applied none of them), for the reply to a grant addressed to it
   * (messages.ts Ack.ended). Undefined while no announcement of it lasts.
   */
  ownEnded (epoch: string, giver: string, giverEpoch: string): number | undefined {
    for (const a of this.announced) if (a.dead === this.c.node && a.epoch === epoch) return a.marks.get(`${giver}\u0000${giverEpoch}`) ?? 0
    return undefined
  }

  /**
   * Grants to restarts' ended epochs to send again, one per ended epoch every `everyMs`, as probes: never applied
   * there (addressed to an epoch that ended), the reply carries the restart's final mark of them (Ack.ended). The
   * gossiped marks reach only the givers the restart has heard alive; a giver whose gossip does not reach it (a
   * stopping node's: sim `stops`, seeds 95 and 102) waited for them until its stop ended, and lost the grants.
   */
  probes (nowMs: number, everyMs: number): Grant[] {
    const out: Grant[] = []
    for (const h of this.held.values()) {
      if (!h.restart || nowMs - h.probedAt < everyMs) continue
      h.probedAt = nowMs
      out.push(h.grants[h.grants.length - 1])
    }
    return out
  }

  /** Grants waiting here for marks (a stop waits for them too: lifecycle.ts). */
  get waiting (): number {
    let n = 0
    for (const h of this.held.values()) n += h.grants.length
    return n
  }

  /** Epochs of `node` with grants waiting here. */
  epochsOf (node: string): string[] {
    const out: string[] = []
    for (const h of this.held.values()) if (h.node === node) out.push(h.epoch)
    return out
  }

  private mark (dead: string, epoch: string, seq: number, nowMs: number): void {
    const id = `${dead}\u0000${epoch}`
    const h = this.held.get(id)
    if (h !== undefined) { this.resolve(id, h, seq, nowMs); return }
    if (this.early.size < MAX_EARLY_MARKS && !this.early.has(id)) this.early.set(id, { mark: seq, until: nowMs + this.waitMs })
  }

  /** Settle `h` by the mark: delivered at or below it, taken back above it. */
  private resolve (id: string, h: Held, mark: number, nowMs: number): void {
    const c = this.c
    this.held.delete(id)
    for (const g of h.grants) {
      if (g.seq > mark) this.onTakeBack?.(g)
      // In the restart's recovered books: given to that account, as an ack would have counted it (positions.ts),
      // so that what it returns of them is credited (grant-checks.ts: a member's grant only against our books).
      if (g.seq <= mark && h.restart) { c.positions.acked([g]); this.onDelivered?.(g) }
      for (const [k, n] of g.items) {
        if (g.seq <= mark) { this.counters.tokensDelivered += n; continue }
        if (!creditAtHorizon(c, k, n, nowMs)) continue
        // Counted as returned to the dead seed's account at the settlement, and moved to its heir's: held again.
        if (h.heir !== undefined) c.reclaim.restore(h.heir[0], h.heir[1], k, n)
        this.takenBack.set(k, (this.takenBack.get(k) ?? 0) + n)
        this.counters.tokensTakenBack += n
      }
    }
    // What it holds of the heir's tokens goes to disk with the credit (the checkpoint's `peers`).
    c.journal.checkpointNeeded = true
  }

  /** Housekeeping: a seed's own marks once safe; grants that waited too long are dropped, stranded (the heir read no copy, or died; the node came back without marks). */
  update (nowMs: number): void {
    const own = this.ownOnceSafe
    if (own !== null && (this.c.reclaim.carrier.isSafe || this.c.reclaim.carrier.dropped)) {
      this.ownOnceSafe = null
      if (!this.c.reclaim.carrier.dropped) this.announceOwn(own.epoch, own.marks, nowMs)
    }
    for (const [id, h] of this.held) {
      if (nowMs < h.until) continue
      this.held.delete(id)
      for (const g of h.grants) {
        for (const [k, n] of g.items) {
          this.c.ledger.stranded += n
          this.counters.tokensExpired += n
          const ks = this.c.limiter.existing(k)
          if (ks !== undefined) ext(ks).stranded += n
        }
      }
    }
    for (const [id, e] of this.early) if (nowMs >= e.until) this.early.delete(id)
  }

  status (): Record<string, unknown> {
    const waiting = [...this.held.values()].map(h => ({ node: h.node, epoch: h.epoch, tokens: h.grants.reduce((a, g) => a + g.items.reduce((b, [, n]) => b + n, 0), 0) }))
    return { waiting, announcing: this.announced.length, ...this.counters }
  }
}
