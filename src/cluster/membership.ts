/**
 * Who may speak for which node name. Every cluster message names its
 * sender (`node`), and the transport tells us who really sent it: the
 * gossip's signing peer id, or the stream's remote peer id. A message counts
 * only when its name is bound to that peer id. Anything else is dropped
 * before it touches the books, and its name never enters the peer table.
 *
 * How a name gets bound:
 * - A node in the cluster file with a `peerId` (written by `quotad peer-id`)
 *   is bound to it for good: pinned.
 * - A node in the file without one is bound to the first peer id that speaks
 *   for it in this process (trust on first use). Pin seeds' ids in
 *   production: an insider with the swarm key could otherwise take a name
 *   that has not spoken yet.
 * - A member not in the file (it joined with --node/--listen/...) is bound
 *   by the seeds: each seed admits the first peer id that speaks for a free
 *   name, up to `maxMembers`, and says so in its gossip (`members`). A node
 *   takes the binding once a majority of the seeds say the same. So one
 *   node, or one lying seed, can't give a name away.
 *
 * Admission can't be exhausted (issue 46: 1,000 made-up names from one
 * insider filled every slot, and a slot was never freed). A seed admits a
 * member only
 * - from a peer id it is connected to now (`hostOf`: a name's slot needs a
 *   live peer, not a gossip relayed from somewhere);
 * - from a peer id that holds no other name here: one libp2p identity is one
 *   node (MAX_NAMES_PER_PEER);
 * - from an address (the connection's remote IP) holding fewer than
 *   `maxMembersPerHost` admitted names (a host can mint peer ids cheaply,
 *   not addresses). Keyed by IP, not by connection: a connection is as
 *   cheap as a peer id. Many sidecars on one host (tests run everything on
 *   127.0.0.1) fit under the default.
 * And a slot is a lease: a name silent here for `reclaimMs` (the same
 * silence after which voters attest a dead member: reclaim.ts) is freed
 * (`expire`), but only where nothing is owed either way: a name this node
 * has books with (tokens lent, grants unacked) or that the dead-member
 * settlement will take (it is in the peer table and attestable) keeps its
 * slot until that settlement releases it (reclaim.ts markSettled). So a
 * freed name never comes back with books under a binding that forgot them,
 * and one that holds tokens goes through the settlement like any dead
 * member. The core decides what "nothing owed" is (cluster-core.ts).
 *
 * A name that is taken is an error on both sides: the seed logs the
 * messages it drops, and lists the last few (name, peer id) pairs it refused
 * in its gossip (`refused`); a node that finds its own name there with its
 * own peer id knows the cluster will not hear it (`takenBy`).
 *
 * Memory is bounded: the bindings are the file's nodes plus at most
 * `maxMembers` admitted by this node (if it is a seed) plus what the seeds
 * attest, each seed's list capped at `maxMembers`.
 */

import { DEFAULT_LIMITS } from '../config/types.js'
import { MAX_REFUSED } from './messages.js'

/** Member names one peer id may hold at a seed: one libp2p identity is one node. */
export const MAX_NAMES_PER_PEER = 1

/** A member this seed admitted: its peer id, the address it was admitted from, when (monotonic) it last spoke here. */
interface Slot {
  id: string
  host: string
  lastMs: number
}

export type Verdict = 'ok' | 'unknown' | 'impostor'

export interface MembershipOptions {
  me: string
  /** The cluster file's nodes: name -> pinned peer id (undefined: bind on first use). */
  listed: ReadonlyMap<string, string | undefined>
  seeds: readonly string[]
  /** Most members not in the file a seed admits. */
  maxMembers: number
  /** Most admitted members from one address (remote IP). @default DEFAULT_LIMITS.maxMembersPerHost */
  maxMembersPerHost?: number
}

/** Why a seed did not admit a new member (counted in `admission`). */
export type NotAdmitted = 'full' | 'perPeer' | 'perHost' | 'notConnected'

export class Membership {
  private readonly o: MembershipOptions
  /** Bindings of the file's nodes (pinned, or first use). */
  private readonly listed = new Map<string, string>()
  /** Members this node, a seed, has admitted: name -> slot. */
  private readonly admitted = new Map<string, Slot>()
  /**
   * The remote address of peer id `id` if this node is connected to it now,
   * else undefined (the driver's transport). Null: the driver knows no
   * connections (pure tests): no liveness or address bound.
   */
  hostOf: ((id: string) => string | undefined) | null = null
  /** A seed's admissions refused, by reason, and slots freed by their lease (status). */
  readonly admission = { full: 0, perPeer: 0, perHost: 0, notConnected: 0, freed: 0 }
  /** What each seed says it admitted: seed -> (name -> peer id). */
  private readonly attested = new Map<string, Map<string, string>>()
  private readonly majority: number
  private readonly amSeed: boolean
  /** Messages dropped: their name was not bound to their sender (or not bound at all). */
  readonly refused = { impostor: 0, unknown: 0 }
  /** This node, a seed: the latest (name -> peer id) it refused as impostors, oldest first, at most MAX_REFUSED. */
  private readonly impostors = new Map<string, string>()
  /** Seeds that said they refused a peer id speaking in this node's name: seed -> that peer id. */
  readonly refusedMe = new Map<string, string>()
  /** Seeds that vouch for some peer id under this node's name: seed -> that peer id. */
  private readonly heldMe = new Map<string, string>()

  constructor (o: MembershipOptions) {
    this.o = o
    for (const [name, id] of o.listed) if (id !== undefined) this.listed.set(name, id)
    this.majority = Math.floor(o.seeds.length / 2) + 1
    this.amSeed = o.seeds.includes(o.me)
  }

  /**
   * May peer `id` speak as `name`? Binds the name on first use where the
   * rules above allow it. `fromGossip`: only gossip may bind a new member
   * (a request from an unknown name is refused); `nowMs` (monotonic), a
   * gossip's arrival: it renews the name's slot here.
   */
  check (name: string, id: string, fromGossip = false, nowMs?: number): Verdict {
    const v = this.judge(name, id, fromGossip, nowMs)
    if (v !== 'ok') this.refused[v]++
    if (v === 'impostor' && this.amSeed && name !== this.o.me && this.impostors.get(name) !== id) {
      this.impostors.delete(name)
      if (this.impostors.size >= MAX_REFUSED) this.impostors.delete(this.impostors.keys().next().value as string)
      this.impostors.set(name, id)
      this.version++ // the gossip sends the list when it changes
    }
    return v
  }

  private judge (name: string, id: string, fromGossip: boolean, nowMs?: number): Verdict {
    if (name === this.o.me) return 'impostor'
    if (this.o.listed.has(name)) {
      const bound = this.listed.get(name)
      if (bound === undefined) {
        if (!fromGossip) return 'unknown'
        this.listed.set(name, id)
        return 'ok'
      }
      return bound === id ? 'ok' : 'impostor'
    }
    // A member not in the file.
    if (this.amSeed && fromGossip) {
      const slot = this.admitted.get(name)
      if (slot === undefined) this.admit(name, id, nowMs ?? 0)
      else if (slot.id === id && nowMs !== undefined) slot.lastMs = nowMs
    }
    let votes = 0
    let against = 0
    for (const s of this.o.seeds) {
      const said = s === this.o.me ? this.admitted.get(name)?.id : this.attested.get(s)?.get(name)
      if (said === id) votes++
      else if (said !== undefined) against++
    }
    if (votes >= this.majority) return 'ok'
    return against > 0 ? 'impostor' : 'unknown'
  }

  /** A seed: admit peer id `id` for the free name `name` if the bounds in the header allow it. */
  private admit (name: string, id: string, nowMs: number): void {
    if (this.boundElsewhere(name, id)) return
    const why = this.refuse(id)
    if (typeof why === 'string') { this.admission[why]++; return }
    this.admitted.set(name, { id, host: why.host, lastMs: nowMs })
    this.version++
  }

  /** Why peer id `id` may not take one more slot here, or the address it would take it from. */
  private refuse (id: string): NotAdmitted | { host: string } {
    if (this.admitted.size >= this.o.maxMembers) return 'full'
    let names = 0
    for (const b of this.listed.values()) if (b === id) names++
    for (const s of this.admitted.values()) if (s.id === id) names++
    if (names >= MAX_NAMES_PER_PEER) return 'perPeer'
    if (this.hostOf === null) return { host: '' }
    const host = this.hostOf(id)
    if (host === undefined) return 'notConnected'
    let onHost = 0
    for (const s of this.admitted.values()) if (s.host === host) onHost++
    if (onHost >= (this.o.maxMembersPerHost ?? DEFAULT_LIMITS.maxMembersPerHost)) return 'perHost'
    return { host }
  }

  /**
   * A seed: free the slots of admitted names silent here for `leaseMs`
   * whose binding `owes` nothing (see the header); returns the names freed.
   * Each tick; a scan of at most `maxMembers` slots.
   */
  expire (nowMs: number, leaseMs: number, owes: (name: string) => boolean): string[] {
    const freed: string[] = []
    for (const [name, s] of this.admitted) {
      if (nowMs - s.lastMs < leaseMs || owes(name)) continue
      this.admitted.delete(name)
      freed.push(name)
    }
    if (freed.length > 0) {
      this.admission.freed += freed.length
      this.version++
    }
    return freed
  }

  /** A seed's gossip said which members it admitted (only call with a seed's authenticated gossip). */
  attest (seed: string, members: ReadonlyArray<readonly [string, string]>): void {
    if (!this.o.seeds.includes(seed)) return
    const m = new Map<string, string>()
    this.heldMe.delete(seed)
    for (const [name, id] of members) {
      if (m.size >= this.o.maxMembers) break
      // This node's own entry (it may be in its own file only by its flags): who the seed vouches for under our name.
      if (name === this.o.me) this.heldMe.set(seed, id)
      if (!this.o.listed.has(name)) m.set(name, id)
    }
    this.attested.set(seed, m)
  }

  /** A seed's gossip listed its recent refusals (only call with a seed's authenticated gossip). */
  noteRefusals (seed: string, refused: ReadonlyArray<readonly [string, string]>): void {
    if (!this.o.seeds.includes(seed)) return
    const mine = refused.find(([name]) => name === this.o.me)
    if (mine !== undefined) this.refusedMe.set(seed, mine[1])
    else this.refusedMe.delete(seed)
  }

  /**
   * The seeds that refuse peer id `myId` in this node's name, and the peer id
   * they hold the name for (if one is known): empty when the name is ours.
   */
  takenBy (myId: string): { seeds: string[], heldBy: string | undefined } {
    const seeds = [...this.refusedMe].filter(([, id]) => id === myId).map(([s]) => s)
    let heldBy: string | undefined = this.o.listed.get(this.o.me)
    for (const id of this.heldMe.values()) heldBy ??= id
    return { seeds, heldBy: heldBy === myId ? undefined : heldBy }
  }

  /** What this node, a seed, refused lately (for its gossip). */
  refusals (): Array<[string, string]> {
    return this.amSeed ? [...this.impostors] : []
  }

  /** Bumped when this node's admitted list changes (the gossip sends the list then). */
  version = 0

  /** What this node, if a seed, has admitted (for its gossip). */
  members (): Array<[string, string]> {
    return this.amSeed ? [...this.admitted].map(([n, s]) => [n, s.id]) : []
  }

  /** The peer id bound to `name`, if any (where to send a request). */
  idOf (name: string): string | undefined {
    const l = this.listed.get(name)
    if (l !== undefined || this.o.listed.has(name)) return l
    for (const s of this.o.seeds) {
      const said = s === this.o.me ? this.admitted.get(name)?.id : this.attested.get(s)?.get(name)
      if (said !== undefined && this.judge(name, said, false) === 'ok') return said
    }
    return undefined
  }

  /** The name bound to peer `id`, if any (for logs). */
  nameOf (id: string): string | undefined {
    for (const [n, i] of this.listed) if (i === id) return n
    for (const [n, s] of this.admitted) if (s.id === id) return n
    for (const m of this.attested.values()) for (const [n, i] of m) if (i === id) return n
    return undefined
  }

  /** Another seed already vouches for `name` with a different id: don't split the vote by admitting a second. */
  private boundElsewhere (name: string, id: string): boolean {
    for (const m of this.attested.values()) {
      const other = m.get(name)
      if (other !== undefined && other !== id) return true
    }
    return false
  }

  /** A member left for good: its name is free again (a seed stops vouching for it). */
  release (name: string): void {
    if (this.admitted.delete(name)) this.version++
  }

  get size (): number {
    let n = this.listed.size + this.admitted.size
    for (const m of this.attested.values()) n += m.size
    return n
  }
}
