/**
 * Whether an incoming grant is one an honest giver sends (Transfers.onGrant
 * credits only those; the rest are refused, and an honest giver that was
 * refused takes its tokens back). Apart from transfers.ts because it is a
 * trust boundary of its own: a member's grant is credited only against
 * this node's books of what it lent that member (the threat model in
 * operations.md).
 *
 * It remembers the wants this node sent lately, by (peer, key), because a
 * grant that answers one may come back as a resend after its first reply
 * was lost, and is then judged as that answer.
 */
import type { ClusterCore } from './cluster-core.js'
import { wantItems, type Grant, type Want } from './messages.js'
import { lentTo, mayReturn } from './no-relay.js'
import { mostTokens } from './caution.js'
import type { KeyExt } from './key-ext.js'

/** A pushed grant may exceed what its giver last said it had by this fraction of the stock. */
export const PUSH_TOLERANCE = 0.25
/** How long a sent want may be answered by a resent grant. */
const RESEND_WINDOW_MS = 30_000

export class GrantChecks {
  private readonly core: ClusterCore

  constructor (core: ClusterCore) {
    this.core = core
  }

  /**
   * Why a grant can't be what an honest giver sends, or null. Every amount is
   * a whole number from 1 to the key's stock (plus the burns owed of it
   * after a lowered rule: caution.ts `mostTokens`), from a known peer of this
   * cluster (its cluster hash is ours). A peer whose rule differs is neither
   * asked nor served; its grants are judged as anyone's, since during a
   * reload an honest giver is a version ahead or behind.
   *
   * A giver without a pre-allocated share (a member; `Peer.alloc`, which
   * only a seed of the cluster file can have) is judged by this node's books
   * alone, never by its word: per key, the grant gives at most what it holds
   * of this node's tokens (`mayReturn`: lent and not given back), whether
   * it is pushed, answers our want, or is a resend. An honest member keeps
   * to that anyway (the no-relay rule, `giveCap`). Each credit lowers it
   * (Positions.received, before the next grant is judged), so nothing a
   * member says or sends can credit here more than this node lent it: the
   * most a member takes out of the cluster is what it was granted.
   *
   * A seed's (its name is pinned, its share set by the file): a grant that
   * answers our want gives that key and at most what we asked. A pushed
   * grant (a handoff, a return home, a resend) gives no more than the giver
   * last said it had in custody (held, outstanding, deferred and in its
   * unacked grants: a gossip sent after the push may arrive first and show
   * the pushed tokens in transit), plus a tolerance of a quarter of the
   * stock (tokens it may have received since) and what we lent it and did
   * not get back, unless it matches a want we sent it lately (a reply that
   * was lost and resent).
   */
  implausible (g: Grant, asked: Want | undefined, nowMs: number): string | null {
    const c = this.core
    for (const [key, amount] of g.items) {
      const rule = c.limiter.existing(key)?.rule ?? c.limiter.ruleFor(key)
      if (!Number.isSafeInteger(amount) || amount < 1) return `amount ${amount} is not a whole number of tokens`
      if (rule !== undefined && amount > rule.stock) {
        // More than the stock exists while burns are owed (a rule lowered while the tokens were elsewhere): a
        // giver may hold them all and give them back, so the bound is the stock plus every burn owed of the key.
        const most = mostTokens(c.caution, rule, key, ext0(c, key))
        if (amount > most) return `amount ${amount} is over the stock of ${rule.stock}${most > rule.stock ? ` and the ${most - rule.stock} owed in burns` : ''}`
      }
    }
    const p = c.peers.get(g.node)
    if (p === undefined) return 'its giver is not a peer this node has heard'
    if (!p.sameCluster) return 'its giver\'s cluster file differs (clusterHash)'
    // Not refused for a rule that differs: while a reload spreads over the cluster, an honest giver is a version
    // ahead or behind, and a want's answer refused is lost for good (reload-lower seed 14). A member's grant is
    // bounded by what this node lent it whatever its rules say, a seed's by its custody; and a node whose rules
    // differ is neither asked nor served (cluster-view.ts `agrees`).
    if (!p.alloc) {
      const given = new Map<string, number>()
      for (const [key, amount] of g.items) given.set(key, (given.get(key) ?? 0) + amount)
      for (const [key, amount] of given) {
        const lent = mayReturn(c, p, key)
        if (amount > lent) return `a member gives ${amount} of ${key}, this node's books say it holds ${lent} of ours`
      }
      return asked === undefined ? null : overAsked(g, new Map(wantItems(asked)))
    }
    if (asked !== undefined) return overAsked(g, new Map(wantItems(asked)))
    // A resent answer to a want of ours (its first reply was lost) is judged as that answer: every key in it
    // asked of that giver lately, none over what was asked.
    const resent = new Map<string, number>()
    for (const [key] of g.items) {
      const want = this.recentWant(g.node, key, nowMs)
      if (want !== undefined) resent.set(key, want)
    }
    if (resent.size > 0 && overAsked(g, resent) === null) return null
    for (const [key, amount] of g.items) {
      const ks = c.limiter.existing(key)
      const e = p.keys.get(key)
      const stock = ks?.rule.stock ?? c.limiter.ruleFor(key)?.stock ?? 0
      // What it said in gossip, or, never having said, the share it would create the key with; or this node's
      // belief since, if higher: a belief rises only by what this node pushed it (which it may push straight back).
      const believed = e === undefined ? 0 : e.held + e.outstanding + e.deferred + e.inTransitOut
      const said = Math.max(believed, e !== undefined && !Number.isNaN(e.said) ? e.said : (ks !== undefined ? c.view.peerShare(p, ks) : stock))
      // Plus what this node lent it and did not get back: it may return those at once, before a gossip says it has them
      // (a want's grant can reach it after the gossip this node last heard, the more so while a seed's grant waits
      // for its journal to be copied: replication.ts).
      const lent = lentTo(c, p, key)
      if (amount > said + lent + Math.max(1, Math.ceil(PUSH_TOLERANCE * stock))) {
        // The line it was judged by, so that a refusal in a log says which gossip it trusted.
        const line = e === undefined ? 'never said' : `gossip ${e.seq} of epoch ${p.epoch}: held ${e.held}, outstanding ${e.outstanding}, deferred ${e.deferred}, in transit ${e.inTransitOut}`
        return `pushes ${amount}, said it had ${said} (${line})`
      }
    }
    return null
  }

  /**
   * Whether a member's grant must wait, unapplied, for an estate this node
   * is about to inherit. When a seed D dies, each member relabels what it
   * held of D's tokens as held of D's heir's at once (reclaim-settle.ts),
   * but the heir books them only once it has read D's copies (heir.ts), a
   * few round trips later. A member's push in between gives more than the
   * heir's books say it holds: refused, a want's answer would be lost. So
   * while this node is the heir of a settled seed it has not inherited, a
   * member's next grant over its books is left unapplied (acked below it):
   * the member keeps it in transit and resends it, and it is judged once the
   * estate is in the books. Never applied, nothing is credited; if the
   * heir never inherits (it dies too), the grant is its successor's.
   *
   * The member may also settle D before this node does: a quorum's
   * attestations reach it first, and its relabelled push arrives while D is
   * only attested here (sim cut-heirs-chain on 4 seeds, hard seeds 26 and
   * 66 of 1-70 refused one without this). So a seed that any voter
   * attests, not settled here yet, whose heir this node will be, counts as
   * one about to be inherited.
   */
  waitsForEstate (g: Grant): boolean {
    const c = this.core
    if (!c.tuning.inheritSeeds) return false
    const p = c.peers.get(g.node)
    if (p === undefined || p.alloc || !p.sameCluster || g.epoch !== p.epoch) return false
    if (g.seq !== c.ledger.appliedFrom(g.node, g.epoch) + 1) return false
    const heirHere = (d: string): boolean => c.heir.heirOf(d, n => c.reclaim.settled.has(n) || n === d) === c.node
    const settling = (s: string): boolean => {
      const q = s === c.node ? undefined : c.peers.get(s)
      return q !== undefined && c.reclaim.settling(s, q.inc)
    }
    if (![...c.heir.dead.keys()].some(heirHere) && !c.seeds.some(s => settling(s) && heirHere(s))) return false
    const given = new Map<string, number>()
    for (const [key, amount] of g.items) given.set(key, (given.get(key) ?? 0) + amount)
    for (const [key, amount] of given) if (amount > mayReturn(c, p, key)) return true
    return false
  }

  /** What this node asked for lately, by (peer, key): a grant that answers a want may come back as a resend. */
  private readonly wants = new Map<string, { want: number, at: number }>()

  noteWant (to: string, w: Want, nowMs: number): void {
    for (const [key, want] of wantItems(w)) {
      if (this.wants.size >= 4096) this.wants.delete(this.wants.keys().next().value as string)
      this.wants.set(`${to}\u0000${key}`, { want, at: nowMs })
    }
  }

  private recentWant (from: string, key: string, nowMs: number): number | undefined {
    const k = `${from}\u0000${key}`
    const r = this.wants.get(k)
    if (r === undefined) return undefined
    if (nowMs - r.at > RESEND_WINDOW_MS) { this.wants.delete(k); return undefined }
    return r.want
  }
}

/** Why a grant is not an answer to what was asked (`asked`: key -> how many), or null: every key in it asked, none over. */
function overAsked (g: Grant, asked: ReadonlyMap<string, number>): string | null {
  const given = new Map<string, number>()
  for (const [key, amount] of g.items) {
    const want = asked.get(key)
    if (want === undefined) return `gives ${key}, which was not asked for`
    const total = (given.get(key) ?? 0) + amount
    if (total > want) return `gives ${total} of ${key}, ${want} were asked`
    given.set(key, total)
  }
  return null
}

/** The burn this node owes of `key` (0 without state for it). */
function ext0 (c: ClusterCore, key: string): number {
  return (c.limiter.existing(key)?.ext as KeyExt | null | undefined)?.burn ?? 0
}
