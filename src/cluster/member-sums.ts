/**
 * Members' gossip goes to the seeds alone; the seeds tell the members what
 * the other members hold, as one line per key of sums.
 *
 * Why. Every gossip used to reach every node, so what a node received grew
 * with N² (keys100 at 200 nodes of which 5 seeds: 4.7 Mbit/s per node). Yet
 * a member never takes tokens from another member: it may give a peer only
 * what it holds of that peer's tokens (no-relay.ts), and a member's own
 * account holds none. What a member reads of other members is only their
 * sums: what they hold and need (the cluster-wide remaining and `scarcity`,
 * tightening) and their custody (the shortfall). Everything else a member's
 * gossip says is for seeds: its leases are voted by seeds, its grants come
 * from seeds and are acked to them, its death is attested and settled by
 * seeds, burns are owed only by seeds (only seeds have shares).
 *
 * So a node that is not a seed publishes its gossip to the seeds only
 * (`gossipAudience`; the daemon's members' topic, cluster-node.ts; the
 * simulator's dispatch), and seeds still hear everyone. For each key, one
 * seed, its **aggregator**, sums the members' last lines (alive, same
 * cluster, same rule) and gossips `[key, held, rate, custody, spending]` in `msums`
 * when the sums move as much as a key line would have to. The aggregator is
 * the key's home (share.ts `homeOf`) while this seed sees it alive, else the
 * first such seed in seed order (`aggregatorOf`; views can differ for a
 * moment, so two seeds may both send). A member keeps one line per key it
 * has state for, from the seed it takes for the aggregator by the same rule,
 * and counts it, less its own line as it last sent it, where it counted
 * every other member's line before (cluster-view.ts, shortfall.ts), read as
 * spent since it came (`otherMembers`).
 *
 * With every node a seed nothing changes: no one sends or reads `msums`.
 */
import type { KeyState } from '../core/limiter.js'
import { homeOf, type Homes } from '../core/share.js'
import type { ClusterCore } from './cluster-core.js'
import { agrees } from './cluster-view.js'
import { compact, stale } from './gossip-builder.js'
import { decayed, type KeyExt } from './key-ext.js'
import type { MemberSum } from './messages.js'
import type { Peer, Peers } from './peers.js'
import { peerCustody } from './shortfall.js'
import type { ClusterTuning } from './tuning.js'

/** Who hears a node's gossip: everyone for a seed; the seeds alone for any other node. */
export function gossipAudience (node: string, seeds: readonly string[]): 'all' | 'seeds' {
  return seeds.includes(node) ? 'all' : 'seeds'
}

/** The other members' sums of a key, as a member last heard them from a seed. */
export class MemberSumLine {
  constructor (
    public held: number,
    public rate: number,
    public custody: number,
    /** The rates of the members that held a token or more: how fast what they hold is being spent. */
    public spending: number,
    /** The seed and its epoch it came from, and that gossip's seq (a later one replaces it). */
    public from: string,
    public epoch: string,
    public seq: number,
    /** When it came (monotonic): what the members held has been spent since at up to their rate (otherMembers). */
    public at: number
  ) {}
}

interface Acc { ks: KeyState, held: number, rate: number, custody: number, spending: number }

/**
 * A seed's side: what it last sent per key (only keys with members' tokens
 * or demand; a key whose sums fell to nothing gets one zero line and leaves).
 */
export class MemberSums {
  private readonly sent = new Map<string, [held: number, rate: number, custody: number, spending: number]>()
  private readonly amSeed: boolean
  private readonly seedSet: ReadonlySet<string>

  constructor (private readonly c: ClusterCore) {
    this.amSeed = c.seeds.includes(c.node)
    this.seedSet = new Set(c.seeds)
  }

  isSeed (name: string): boolean { return this.seedSet.has(name) }

  /**
   * The `msums` of this seed's next gossip: the keys it aggregates whose
   * sums moved (all of them on a full sync's first message), at most `max`
   * lines and `budget` bytes. O(members' lines); nothing without members.
   */
  build (nowMs: number, all: boolean, max: number, budget: number): { lines: MemberSum[], bytes: number } {
    const lines: MemberSum[] = []
    if (!this.amSeed) return { lines, bytes: 0 }
    const c = this.c
    const acc = new Map<string, Acc>()
    const mine = new Map<string, boolean>()
    for (const p of c.peers.alive(nowMs)) {
      if (this.seedSet.has(p.name) || !p.sameCluster) continue
      for (const [key, line] of p.keys) {
        let a = acc.get(key)
        if (a === undefined) {
          let m = mine.get(key)
          if (m === undefined) mine.set(key, m = this.aggregates(key, nowMs))
          const ks = m ? c.limiter.existing(key) : undefined
          if (ks === undefined) continue
          acc.set(key, a = { ks, held: 0, rate: 0, custody: 0, spending: 0 })
        }
        if (!agrees(p, a.ks)) continue
        const r = c.view.lineRate(line, nowMs)
        // As spent since its gossip came, at up to its rate (see otherMembers: a hop older than a line heard directly).
        const held = Number.isFinite(r) ? Math.max(0, line.held - r * Math.max(0, nowMs - p.lastHeard) / 1000) : line.held
        a.held += held
        a.rate += Number.isFinite(r) ? r : line.held * 1000 / c.tuning.horizonMs
        if (held >= 1 && Number.isFinite(r)) a.spending += r
        a.custody += peerCustody(line, 0, a.ks.rule.stock)
      }
    }
    let bytes = 0
    const take = (key: string, held: number, rate: number, custody: number, spending: number): boolean => {
      const cost = Buffer.byteLength(key) + 30
      if (lines.length >= max || bytes + cost > budget) return false
      lines.push([key, compact(held), compact(rate), compact(custody), compact(spending)])
      bytes += cost
      return true
    }
    for (const [key, a] of acc) {
      const s = this.sent.get(key)
      const moved = s === undefined
        ? a.held >= 0.5 || a.rate >= 0.05 || a.custody >= 0.5
        : stale(s[0], a.held, 0.5) || stale(s[1], a.rate, 0.05) || Math.abs(s[2] - a.custody) >= 0.5 || (a.rate === 0 && s[1] !== 0) || stale(s[3], a.spending, 0.05)
      if (!(moved || (all && s !== undefined)) || !take(key, a.held, a.rate, a.custody, a.spending)) continue
      this.sent.set(key, [a.held, a.rate, a.custody, a.spending])
    }
    // Keys whose members' lines went (or that another seed aggregates now): one last zero line, then forgotten.
    for (const key of [...this.sent.keys()]) {
      if (acc.has(key)) continue
      if (take(key, 0, 0, 0, 0)) this.sent.delete(key)
    }
    return { lines, bytes }
  }

  /** Whether this seed sums `key` (aggregatorOf, in this seed's view). */
  private aggregates (key: string, nowMs: number): boolean {
    const c = this.c
    return aggregatorOf(key, c.seeds, c.heir.homes, name => name === c.node ? !c.leaving && !c.fence.fenced : usable(c.peers, name, nowMs)) === c.node
  }

  /** A member's side: a seed's `msums` (its gossip `seq`), kept on the keys this node has state for. */
  onSums (p: Peer, seq: number, lines: readonly MemberSum[], nowMs: number): void {
    if (this.amSeed || !this.seedSet.has(p.name) || !p.sameCluster) return
    const c = this.c
    for (const [key, held, rate, custody, spending] of lines) {
      const ks = c.limiter.existing(key)
      // Only the key's aggregator as this member sees it: a seed that has just stopped summing the key (its last
      // zero line) must not overwrite the new aggregator's sums.
      if (ks === undefined || aggregatorSeen(key, c.seeds, c.heir.homes, c.peers, nowMs) !== p.name) continue
      const x = ks.ext as KeyExt | null
      if (x === null) continue
      const old = x.msum
      // A reordered older message of the same seed epoch never overwrites a newer line.
      if (old !== null && old.from === p.name && old.epoch === p.epoch && old.seq >= seq) continue
      x.msum = new MemberSumLine(held, rate, custody, spending, p.name, p.epoch, seq, nowMs)
      // The key's sums are walked again at their next read (cluster-view.ts `current`).
      x.walkPeers = null
    }
  }
}

/** A seed a member reads sums from, and a seed passes the summing on to: alive, of our cluster, not leaving or fenced. */
function usable (peers: Peers, name: string, nowMs: number): boolean {
  const p = peers.get(name)
  return p !== undefined && !p.leaving && !p.fenced && p.sameCluster && peers.isAlive(p, nowMs)
}

/**
 * The seed that sums a key's members' lines: the key's home while it is
 * usable, else the first usable seed in seed order (each node by its own
 * view, so for a moment two seeds may both send, and a member reads only
 * the one it takes for the aggregator).
 */
export function aggregatorOf (key: string, seeds: readonly string[], homes: Homes, usable: (name: string) => boolean): string | undefined {
  const home = homeOf(key, seeds, homes)
  if (home !== undefined && usable(home)) return home
  for (const s of seeds) if (usable(s)) return s
  return undefined
}

/** The key's aggregator as a member sees it: the seed whose sums it reads (onSums, otherMembers). */
function aggregatorSeen (key: string, seeds: readonly string[], homes: Homes, peers: Peers, nowMs: number): string | undefined {
  return aggregatorOf(key, seeds, homes, name => usable(peers, name, nowMs))
}

/**
 * What the other members hold and need of a key, and their custody, as this
 * member reads them: the seed's line less this node's own line as it last
 * sent it (the seed summed that too). Nothing at a seed, or when the line's
 * seed is no longer the key's aggregator (not usable, or restarted since).
 */
export function otherMembers (c: { peers: Peers, tuning: ClusterTuning, seeds: readonly string[], homes: Homes }, ks: KeyState, nowMs: number): { held: number, rate: number, custody: number } | null {
  const x = ks.ext as KeyExt | null
  const m = x?.msum
  if (x == null || m == null) return null
  const p = c.peers.get(m.from)
  if (p === undefined || p.epoch !== m.epoch || aggregatorSeen(ks.key, c.seeds, c.homes, c.peers, nowMs) !== m.from) return null
  const ownHeld = Number.isNaN(x.sentHeld) ? 0 : x.sentHeld
  const ownRate = Number.isNaN(x.sentRate) ? 0 : decayed(x.sentRate, x.sentDecays === 1, nowMs - x.sentAt, c.tuning.rateHalfLifeMs)
  const ownCustody = Number.isNaN(x.sentCustody) ? 0 : x.sentCustody
  const rate = Math.max(0, m.rate - ownRate)
  // The sums are a hop older than a line heard directly (the seed summed lines up to a gossip interval old, then
  // gossiped them): under load the members' holdings fall as they spend, so the seed reads each line as spent since
  // it came, and a member reads the sums as spent since they came, at up to the members' rates. Read as said, a
  // member counted a median 204 tokens more than the cluster held mid-window (zipf, 5 seeds of 200; 73 when members
  // heard each other; 19 now) and asked for twice its need while tokens were short. Only members holding tokens
  // spend them (`spending`): at the members' whole rate it counted 64 too few at 1000 nodes, where most hold none.
  const spending = Math.max(0, m.spending - (ownHeld >= 1 ? ownRate : 0))
  const held = Math.max(0, m.held - ownHeld)
  return { held: Math.max(0, held - spending * Math.max(0, nowMs - m.at) / 1000), rate, custody: Math.max(0, m.custody - ownCustody) }
}
