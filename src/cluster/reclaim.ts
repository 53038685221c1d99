/**
 * Reclaim of a dead account that holds no pre-allocated share
 * (cluster-protocol.md, "Reclaim of dead members"): a member, or a seed whose share is gone, that
 * crashed and does not come back. Pure; owned by the core.
 *
 * No relay. Such an account gives a peer at most what it holds of that
 * peer's tokens: per key, its position with the peer's account (credited
 * from it, less acked to it) less its own unacked grants to it
 * (`giveCap`). So whatever a dead account D holds, it holds of some
 * survivor L's tokens, and only L has lent them.
 *
 * Attestation (voters). A voter attests incarnation D/inc when it has not
 * heard D for `reclaimMs`, D said it holds no share, D did not announce it
 * was leaving (a clean stop saves its books), and the voter itself has run
 * for `reclaimMs`. It never echoes D/inc again (so, by the lease lemma, D
 * can never hold a lease again: lease.ts, cluster-protocol.md I4), keeps
 * its attestations on disk before it gossips them (a restarted voter must
 * not echo D again), and gossips them (`attest`).
 *
 * Settlement (every node; reclaim-settle.ts). Once a quorum of voters
 * attests D/inc, each survivor L, on its own and once, credits per key
 *
 *     S_L(k) = −pos_L[D](k) + U_L[D](k)      (U: L's unacked grants to D)
 *
 * as a deferred credit at the rule's horizon (D may have spent them before
 * it was fenced), drops those outboxes and positions, and refuses every
 * later grant from D's epochs. With no relay, `S_L` is exactly what D held
 * of L's tokens, plus D's returns to L that L now refuses, plus L's own
 * grants that never arrived; each term is L's alone, so no survivor's
 * settlement depends on another's (§11.3 has the argument).
 *
 * The dead account itself. If it is alive after all (it was cut off), it
 * learns that a quorum attests it from the voters' gossip: it drops its
 * books (they are credited elsewhere) and is `reclaimed`; the driver
 * restarts it as a new incarnation. A restart that carries an attested
 * incarnation's books (journal recovery or a clean restart) drops them once
 * a quorum attests it, and does not count an attesting voter's echo for
 * its lease meanwhile (carrier.ts).
 */
import type { ClusterCore } from './cluster-core.js'
import { booksOf, deferredTotal, ext } from './key-ext.js'
import { Carrier } from './carrier.js'
import { EstateMarks } from './estate-marks.js'
import { EstateReturns } from './estate-returns.js'
import type { AttestEntry } from './messages.js'
import { incOfEpoch, settleMember, settleSeed } from './reclaim-settle.js'
import type { Peer } from './peers.js'

/** Attestations kept (and persisted) per voter; the oldest go first past this. */
export const MAX_ATTESTED = 4096
/** Most attestations one gossip carries (the parser's bound, DEFAULT_BOUNDS.maxPeers, is higher). */
export const MAX_ATTEST_PER_GOSSIP = 512

export class Reclaim {
  private readonly c: ClusterCore
  /**
   * Since when this node has run without a pause: its start, or the end of
   * its last stall (SIGSTOP, a VM freeze, a loop blocked) longer than
   * `gossipIntervalMs + maxClockSkewMs`. A voter judges a peer silent only
   * over time it was awake itself: after its own pause every peer looks
   * silent for as long, and attesting them then settled live members (issue
   * 43: two of three seeds stopped for 9 s attested both members on resume).
   * Attesting later is always safe; only attesting is not.
   */
  private awakeSince: number
  /** The last `update` (each housekeeping tick). */
  private lastUpdate: number
  /** The last time a settled incarnation without a share spoke (a cut-off member after the heal): see `zombieSpoke`. */
  private zombieAt = -Infinity
  /** Voter: node -> the highest incarnation it attests (sticky; restored from disk). */
  readonly attested = new Map<string, number>()
  /** Voter: attestations changed since the driver last persisted them (it must before gossiping them). */
  dirty = false
  /** `${node}/${inc}` -> the voters that attest it. */
  private readonly attesters = new Map<string, Set<string>>()
  /** The seeds this process has heard (any incarnation): see attestSilent. Bounded by the seed list. */
  private readonly heardSeeds = new Set<string>()
  /** node -> the highest incarnation settled here: its grants are refused, its gossip ignored. */
  readonly settled = new Map<string, number>()
  /** node -> when (monotonic) it was last settled here. */
  private readonly settledAt = new Map<string, number>()
  /**
   * `${node}\u0000${epoch}` -> its heir: accounts settled here as a seed's
   * (reclaim-settle.ts settleSeed). What anyone held of such an account's
   * tokens is held of its heir's from then on (`restore`).
   */
  private readonly seedAccounts = new Map<string, string>()
  /** A quorum attests this incarnation: its books are dropped; the driver restarts it. */
  reclaimed = false
  /** What this incarnation carries, and whether a quorum attests it (carrier.ts). */
  readonly carrier: Carrier
  /** Our unacked grants to dead seeds, waiting for their heirs' marks; a heir's marks to gossip (estate-marks.ts). */
  readonly marks: EstateMarks
  /** Dead seeds' grants their receivers never applied: our final marks to gossip; a heir's to take back (estate-returns.ts). */
  readonly returns: EstateReturns
  /** The books dropped were a seed's share (its heir inherits them): the simulator's audit reads it. */
  droppedShare = false
  readonly counters = { settlements: 0, tokensSettled: 0 }
  /**
   * What a crashed predecessor held of each peer account's tokens, as its
   * journal says (net of its gives): node -> epoch -> key -> tokens. Added to
   * the positions wherever they say what this node holds of a peer's tokens.
   */
  readonly restored = new Map<string, Map<string, Map<string, number>>>()
  /** Per key: tokens credited by settlements, and tokens this node's own books dropped (the simulator's audit reads them). */
  readonly settledTokens = new Map<string, number>()
  readonly droppedTokens = new Map<string, number>()

  constructor (core: ClusterCore, startMs: number) {
    this.c = core
    this.awakeSince = this.lastUpdate = startMs
    this.carrier = new Carrier(core.node, core.fence.quorum, core.carriedAtRisk)
    this.marks = new EstateMarks(core)
    this.returns = new EstateReturns(core)
  }

  /** This account holds a pre-allocated share: it may relay, and is never attested. */
  get hasBase (): boolean {
    return this.c.limiter.allocate && this.c.seeds.includes(this.c.node)
  }

  /** Whether this voter attests `node`'s incarnation `inc` (it must never echo it). */
  attestedByMe (node: string, inc: number): boolean {
    return inc <= (this.attested.get(node) ?? 0)
  }

  /** Whether `node`/`inc` was settled here (its messages are a dead process's). */
  isSettled (node: string, inc: number): boolean {
    return inc <= (this.settled.get(node) ?? 0)
  }

  /** Whether some voter (this one included) attests `node`'s incarnation `inc`, not settled here yet: its settlement is under way. */
  settling (node: string, inc: number): boolean {
    if (this.isSettled(node, inc)) return false
    return this.attestedByMe(node, inc) || (this.attesters.get(`${node}/${inc}`)?.size ?? 0) > 0
  }

  /** A voter with leases on: it attests, and gossips its attestations. */
  get voting (): boolean {
    return this.c.tuning.leases && this.c.fence.quorum.isVoter(this.c.node)
  }

  /** Each housekeeping tick: a voter attests the silent peers without a share, and counts its own word. */
  update (nowMs: number): void {
    if (nowMs - this.lastUpdate > this.c.tuning.gossipIntervalMs + this.c.tuning.maxClockSkewMs) this.awakeSince = nowMs
    this.lastUpdate = nowMs
    this.marks.update(nowMs)
    this.returns.update(nowMs)
    if (!this.voting) return
    this.attestSilent(nowMs)
    this.onAttest(this.c.node, this.list(nowMs) ?? [], nowMs)
  }

  /**
   * The attestations to gossip (undefined: not a voter). Persisted first when
   * `dirty` (the driver's job). An attestation is gossiped while its node is
   * in the peer table (so a restart that carries the attested incarnation
   * learns it at once, whenever it comes), and for `listForMs` after this
   * node settled it (so that slower peers reach their quorum); after that it
   * is only kept, sticky, on disk: gossip stays small however many members
   * died over the months.
   */
  list (nowMs: number): AttestEntry[] | undefined {
    if (!this.voting) return undefined
    const out: AttestEntry[] = []
    const keep = this.listForMs
    const seeds: AttestEntry[] = []
    for (const [n, inc] of this.attested) {
      // A seed's attestation is always listed (there are few): a heir, or any survivor, that restarted after it was
      // settled and never hears the dead seed again must still learn it (its share is inherited once, by all alike).
      if (this.seedsInherit && this.c.seeds.includes(n)) seeds.push([n, inc])
      else if (this.c.peers.get(n) !== undefined || nowMs - (this.settledAt.get(n) ?? -Infinity) < keep) out.push([n, inc])
    }
    return [...seeds, ...out.slice(-(MAX_ATTEST_PER_GOSSIP - seeds.length))]
  }

  /** A settled incarnation spoke again (a cut-off process after the heal): gossip its attestation again, so it learns. */
  sawZombie (node: string, nowMs: number): void {
    if (!this.settledAt.has(node)) return
    this.settledAt.set(node, nowMs)
    if (!this.c.seeds.includes(node)) this.zombieAt = nowMs
  }

  /**
   * Whether a settled member spoke lately (within `aliveTimeoutMs`): a seed
   * then publishes its members' copy (member-gossip.ts `hasMembers`) even
   * with no member alive in its view. A member hears the seeds only through
   * that copy, so without it a member whose every peer settled it (two of
   * three seeds back from a pause, a cut of every member) never learned it,
   * and stayed fenced for good (issue 43).
   */
  zombieSpoke (nowMs: number): boolean {
    return nowMs - this.zombieAt < this.c.tuning.aliveTimeoutMs
  }

  /** How long a settled attestation is still gossiped: ten reclaim periods. */
  get listForMs (): number {
    return 10 * this.c.tuning.reclaimMs
  }

  /** Seeds with a share copy their journals (replication.ts), so a heir can inherit one that dies (heir.ts). */
  get seedsInherit (): boolean {
    const c = this.c
    return c.tuning.inheritSeeds && c.tuning.leases && c.tuning.replicateJournal && c.seeds.length > 1
  }

  private attestSilent (nowMs: number): void {
    const c = this.c
    const reclaimMs = c.tuning.reclaimMs
    // A voter attests only while it holds a lease itself, a member as a seed: in a cut into groups none of which is
    // a quorum, every voter would attest the peers it cannot hear, and once the cut heals the attestations add up to
    // a quorum against every one of them, alive all along. Nor need the groups exist at once: a voter cut off alone
    // attested both members, and another cut off alone 15 s later attested them again, which made a quorum against
    // members that had been on the quorum's side throughout (sim chaos 3+2 seed 24; the harness saw it settle both
    // members). A voter with a lease is on a quorum's side.
    const leased = !c.fence.fenced
    const seeds = this.seedsInherit && leased
    const awake = nowMs - this.awakeSince >= reclaimMs
    for (const p of c.peers.all()) {
      if (p.seq > 0 && c.seeds.includes(p.name)) this.heardSeeds.add(p.name)
      if (leased && awake && this.attestable(p, this.seedsInherit) && nowMs - p.lastHeard >= reclaimMs) this.attest(p.name, p.inc)
    }
    if (!awake) return
    // A seed incarnation another voter attests that this process never heard at all (it started after that seed
    // died): attested too, as one silent for all of this process's life, which is at least reclaimMs. The promise
    // holds (never echoed: a predecessor's last echo came before this start), and without it a voter that restarted
    // after a seed died could never attest it, so with the dead seed's own vote gone no quorum ever formed (sim
    // heal-settle seed 6: n2 restarted after n3 died; n1 alone attested n3, and n3's share was lost for good). Only a
    // seed never heard: one heard and later forgotten was perhaps echoed in an incarnation that carries this one.
    // (Nothing to do once every other seed was heard: the steady state, so the scans below are skipped.)
    if (!seeds || this.heardSeeds.size >= c.seeds.length - 1) return
    const unheard = (node: string, inc: number): boolean => node !== c.node && c.seeds.includes(node) && !this.heardSeeds.has(node) && !this.isSettled(node, inc)
    for (const id of this.attesters.keys()) {
      const i = id.lastIndexOf('/')
      const node = id.slice(0, i)
      const inc = Number(id.slice(i + 1))
      if (unheard(node, inc)) this.attest(node, inc)
    }
    // Likewise the incarnation this node's copy of a seed's journal names (replica-store.ts, kept on disk): with no
    // other voter left to name it (two seeds, one dead, the other restarted after: sim heal-settle seed 10, 32 of 65
    // lost), it is the only record of which incarnation died.
    for (const w of c.replicas?.writers() ?? []) {
      const inc = c.replicas?.get(w)?.inc
      if (inc !== undefined && inc > 0 && unheard(w, inc)) this.attest(w, inc)
    }
  }

  /** Attest `node`'s incarnation `inc` (and every earlier one): sticky, persisted before it is gossiped. */
  private attest (node: string, inc: number): void {
    if (this.attestedByMe(node, inc)) return
    this.attested.delete(node)
    this.attested.set(node, inc)
    if (this.attested.size > MAX_ATTESTED) this.attested.delete(this.attested.keys().next().value as string)
    this.dirty = true
  }

  /** Whether a voter attests peer `p` once it falls silent (`seeds`: seeds with a share are attested too, see attestSilent). */
  private attestable (p: Peer, seeds: boolean): boolean {
    return !(p.alloc && !(seeds && this.c.seeds.includes(p.name))) && !p.leaving && p.sameCluster && p.seq > 0
  }

  /**
   * Whether the dead-member settlement will take peer `p` once it is
   * silent: the voters attest it (leases on, and it is attestable), and the
   * settlement releases its name (markSettled). Membership slots wait for it
   * (intake.ts freeSilentSlots).
   */
  settles (p: Peer): boolean {
    return this.c.tuning.leases && this.attestable(p, this.seedsInherit)
  }

  /** Voter `voter`'s attestations, from its gossip: settle what a quorum attests; drop carried books attested at all. */
  onAttest (voter: string, entries: readonly AttestEntry[], nowMs: number): void {
    const c = this.c
    if (!c.fence.quorum.isVoter(voter)) return
    for (const [node, inc] of entries) {
      if (node === c.node) { this.aboutMe(voter, inc); continue }
      if (this.isSettled(node, inc)) continue
      const id = `${node}/${inc}`
      let set = this.attesters.get(id)
      if (set === undefined) {
        this.attesters.set(id, set = new Set())
        if (this.attesters.size > MAX_ATTESTED) this.attesters.delete(this.attesters.keys().next().value as string)
      }
      set.add(voter)
      if (c.fence.quorum.isQuorum([...set])) this.settle(node, inc, nowMs)
    }
  }

  private aboutMe (voter: string, inc: number): void {
    const c = this.c
    // Carried incarnations are the consecutive ones before this (each clean or recovered restart carries the last);
    // those an earlier incarnation settled (dropped, or made its own for good) are past any attestation: the books
    // carried now are what that incarnation held since, its own (chaos seed 8 lost 129 tokens to an old one).
    if (inc < c.incarnation && inc >= c.incarnation - c.carriedAtRisk) {
      if (this.carrier.attested(voter)) this.dropBooks()
      return
    }
    if (inc !== c.incarnation || this.reclaimed) return
    const id = `${c.node}/${inc}`
    let set = this.attesters.get(id)
    if (set === undefined) this.attesters.set(id, set = new Set())
    set.add(voter)
    if (!c.fence.quorum.isQuorum([...set])) return
    this.reclaimed = true
    this.dropBooks()
  }

  /** How many carried incarnations a quorum might still attest: none once the carrier is safe or dropped its books. */
  get carriedAtRisk (): number {
    return this.carrier.isSafe || this.carrier.dropped ? 0 : this.c.carriedAtRisk
  }

  /** The carried books were dropped (a quorum attests a carried incarnation). */
  get droppedCarried (): boolean {
    return this.carrier.dropped
  }

  /** Whether voter `voter`'s echo may count for this incarnation's lease, given its gossip's attestations (carrier.ts). */
  echoCounts (voter: string, attest: readonly AttestEntry[] | undefined): boolean {
    // No list is an empty one (the gossip leaves it out); a full one may have been cut short.
    const safe = this.carrier.isSafe
    const counts = this.carrier.echoCounts(voter, attest === undefined || attest.length < MAX_ATTEST_PER_GOSSIP)
    // The journal says so at once: a recovery from it carries this incarnation alone (persist.ts recoverCore).
    if (!safe && this.carrier.isSafe) this.c.journal.checkpointNeeded = true
    return counts
  }

  /** Every key's books to zero: what this account held is credited elsewhere (or never was its own). */
  private dropBooks (): void {
    const c = this.c
    for (const ks of c.limiter.states()) {
      const x = ext(ks)
      const dropped = deferredTotal(x)
      x.deferred = null
      const held = Math.max(0, ks.bucket.held)
      ks.bucket.debit(held)
      const books = booksOf(ks)
      // What is spent comes back and is burned then.
      x.burn += books
      c.journal.record(ks.key, -(books + held + dropped), true)
      this.droppedTokens.set(ks.key, (this.droppedTokens.get(ks.key) ?? 0) + books + held + dropped)
      c.active.add(ks)
    }
    c.ledger.dropAll()
    // What it held of each peer's tokens went with the books.
    this.restored.clear()
    // A seed's share was inherited (heir.ts): it must never materialize it again, nor copy its journal for a heir.
    if (this.hasBase) {
      this.droppedShare = true
      c.limiter.allocate = false
      c.replication.disable()
    }
    c.journal.checkpointNeeded = true
  }

  /**
   * Settle a dead account (reclaim-settle.ts): credit what it held of our
   * tokens (see the header), or hand it to its heir if it is a seed's; drop
   * our outboxes and positions with it, and refuse its grants.
   */
  settle (node: string, inc: number, nowMs: number): void {
    // A seed with a share is inherited (heir.ts); once inherited, its later incarnations hold none and are settled as
    // members. Not by whether the incarnation said it held a share: a survivor may not have heard it, or heard it only
    // after it dropped its share, and every survivor must settle one incarnation alike (the heir's copy holds what it
    // held of each survivor's tokens: a survivor that credited them itself as well would count them twice).
    // Nor by whether the inheritance is known here yet: the heir's gossip names the incarnation it inherited.
    if (this.asSeed(node, inc)) settleSeed(this.c, this, node, inc, nowMs)
    else settleMember(this.c, this, node, inc, nowMs)
    this.markSettled(node, inc, nowMs)
    // To disk as one checkpoint, not a batch: the checkpoint's `sent` no longer names the grants to the dead account
    // that the settlement credited (its outboxes are dropped), so a restart from this journal can't take them back.
    this.c.journal.checkpointNeeded = true
  }

  /**
   * Whether account (node, epoch) is an incarnation settled here as a
   * member's (its settlement credited this node: not a seed's, whose heir
   * takes its books), that no live incarnation carries.
   */
  settledAccount (node: string, epoch: string): boolean {
    const inc = this.settled.get(node)
    if (inc === undefined || this.asSeed(node, inc)) return false
    const p = this.c.peers.get(node)
    return p === undefined || (p.epoch !== epoch && !p.carries.includes(epoch))
  }

  /** Whether node/inc is settled as a seed's (its heir inherits it) rather than a member's (see `settle`). */
  private asSeed (node: string, inc: number): boolean {
    return this.seedsInherit && this.c.seeds.includes(node) && inc <= (this.c.heir.through.get(node) ?? Infinity)
  }

  /** Account (node, epoch) was settled here as a seed's: `heir` inherits it (reclaim-settle.ts settleSeed). */
  seedAccountSettled (node: string, epoch: string, heir: string | undefined): void {
    this.seedAccounts.set(`${node}\u0000${epoch}`, heir ?? '')
    if (this.seedAccounts.size > MAX_ATTESTED) this.seedAccounts.delete(this.seedAccounts.keys().next().value as string)
  }

  /**
   * Add to what this node holds of account (node, epoch)'s tokens of `key`.
   * An account settled here as a seed's is its heir's: the entry is the
   * heir's account, or none when the heir is this node (its own tokens).
   * Entries name such accounts after their settlement when a dead seed's
   * copy held of them, inherited here later (chaos 5 seeds, seed 2: a heir of
   * two seeds that had traded tokens kept both sides' entries, and a later
   * settlement of one's next incarnation credited them).
   */
  restore (node: string, epoch: string, key: string, n: number): void {
    if (Math.abs(n) < 1e-9) return
    const heir = this.seedAccounts.get(`${node}\u0000${epoch}`)
    if (heir !== undefined) {
      const heirEpoch = heir === '' || heir === this.c.node ? undefined : this.c.peers.get(heir)?.epoch
      if (heirEpoch !== undefined) this.restore(heir, heirEpoch, key, n)
      return
    }
    let byEpoch = this.restored.get(node)
    if (byEpoch === undefined) this.restored.set(node, byEpoch = new Map())
    let byKey = byEpoch.get(epoch)
    if (byKey === undefined) byEpoch.set(epoch, byKey = new Map())
    byKey.set(key, (byKey.get(key) ?? 0) + n)
  }

  private markSettled (node: string, inc: number, nowMs: number): void {
    const c = this.c
    const p = c.peers.get(node)
    this.settled.set(node, Math.max(inc, this.settled.get(node) ?? 0))
    this.settledAt.set(node, nowMs)
    if (this.settled.size > MAX_ATTESTED) {
      const old = this.settled.keys().next().value as string
      this.settled.delete(old)
      this.settledAt.delete(old)
    }
    // The epochs of its later incarnations keep their marks: the live one's, those it carries, those the journal names.
    const epochs = [...(p === undefined ? [] : [p.epoch, ...p.carries]), ...c.ledger.appliedEpochs(node)]
    c.ledger.deadGiver(node, inc, new Set(epochs.filter(e => (incOfEpoch(c, p, node, e) ?? 0) > inc)))
    for (const id of [...this.attesters.keys()]) if (id.startsWith(`${node}/`) && Number(id.slice(node.length + 1)) <= inc) this.attesters.delete(id)
    this.counters.settlements++
    if (p !== undefined && p.inc <= inc) {
      c.peers.forget(node)
      c.membership.release(node)
    }
  }

  /** For the journal's checkpoint: what this node holds of each peer account's tokens, net of its unacked grants. */
  held (): Array<[string, string, string, number]> {
    const m = new Map<string, number>()
    const add = (node: string, epoch: string, key: string, n: number): void => {
      const id = `${node}\u0000${epoch}\u0000${key}`
      m.set(id, (m.get(id) ?? 0) + n)
    }
    for (const node of this.c.positions.nodes()) for (const [e, keys] of this.c.positions.accounts(node)) for (const [k, n] of keys) add(node, e, k, n)
    for (const [node, byEpoch] of this.restored) for (const [e, keys] of byEpoch) for (const [k, n] of keys) add(node, e, k, n)
    for (const [to, e, keys] of this.c.ledger.unackedByReceiver()) for (const [k, n] of keys) add(to, e, k, -n)
    const out: Array<[string, string, string, number]> = []
    for (const [id, n] of m) {
      if (Math.abs(n) < 1e-9) continue
      const [node, epoch, key] = id.split('\u0000')
      out.push([node, epoch, key, n])
    }
    return out
  }

  /** For status. */
  status (): Record<string, unknown> {
    return {
      hasShare: this.hasBase,
      attests: this.c.fence.quorum.isVoter(this.c.node) ? [...this.attested].map(([n, inc]) => ({ node: n, inc })) : null,
      settled: [...this.settled].map(([n, inc]) => ({ node: n, inc })),
      reclaimed: this.reclaimed,
      droppedCarried: this.droppedCarried,
      inFlightToDeadSeeds: this.marks.status(),
      inFlightFromDeadSeeds: this.returns.status(),
      ...this.counters
    }
  }
}
