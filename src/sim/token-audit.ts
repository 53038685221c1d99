/**
 * Conservation, checked from outside the nodes. The simulator sees every
 * grant any node creates and every node that dies, so at any moment it can
 * say where each token of a key is:
 *
 *     held     in a live node's books: its bucket's share (held + spent and
 *              not yet back) plus deferred credits; or, for a key the node
 *              has no state for, the share it would create the key with
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
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { SavedKey } from '../cluster/durable-state.js'
import { deferredTotal, type KeyExt } from '../cluster/key-ext.js'
import type { Grant } from '../cluster/messages.js'
import type { KeyState } from '../core/key-state.js'
import { RuleSet, type CompiledRule } from '../core/rules.js'
import { initialShare } from '../core/share.js'
import type { RuleConfig } from '../config/types.js'

interface GrantRecord {
  giverEpoch: string
  toEpoch: string
  giver: string
  seq: number
  items: Grant['items']
  /** Copies in the network right now. */
  copies: number
}

interface Disk {
  node: string
  allocate: boolean
  keys: Map<string, number>
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
  private ruleSet: RuleSet | null = null
  /** Live incarnations by epoch. */
  private readonly live = new Map<string, ClusterCore>()
  private readonly open = new Map<string, GrantRecord>()
  private readonly disk = new Map<string, Disk>()
  /** Per key: held by crashed nodes, and in grants that can never be applied. */
  private readonly stranded = new Map<string, number>()
  /** Grants whose fate is known (a resend of one must not reopen it). */
  private readonly settled = new Set<string>()
  /** Crashed incarnations: they could still have materialized shares of keys they had no state for. */
  private readonly crashed: ClusterCore[] = []
  /** Tokens of grants ever applied, for the report. */
  applied = 0

  constructor (seeds: readonly string[]) {
    this.seeds = seeds
  }

  private static id (g: { giverEpoch: string, toEpoch: string, seq: number }): string {
    return `${g.giverEpoch}>${g.toEpoch}#${g.seq}`
  }

  born (core: ClusterCore): void {
    this.live.set(core.epoch, core)
    this.disk.delete(core.node)
    // Every incarnation runs the same rules in the simulator.
    this.ruleSet ??= new RuleSet(core.limiter.rules.map(r => r.config as RuleConfig))
  }

  /** A grant was created or resent. */
  granted (g: Grant): void {
    const id = TokenAudit.id({ giverEpoch: g.epoch, toEpoch: g.toEpoch, seq: g.seq })
    if (!this.open.has(id) && !this.settled.has(id)) {
      this.open.set(id, { giverEpoch: g.epoch, toEpoch: g.toEpoch, giver: g.node, seq: g.seq, items: g.items, copies: 0 })
    }
  }

  /** A copy of a grant entered (+1) or left (-1) the network. */
  copies (g: Grant, delta: number): void {
    const r = this.open.get(TokenAudit.id({ giverEpoch: g.epoch, toEpoch: g.toEpoch, seq: g.seq }))
    if (r !== undefined) r.copies += delta
  }

  /** An incarnation ends: a crash strands its books; a stop puts them on disk. */
  died (core: ClusterCore, how: 'crash' | 'stop', saved?: SavedKey[]): void {
    this.settle()
    for (const [id, r] of this.open) {
      if (r.toEpoch !== core.epoch) continue
      // What it applied is in its books; what it did not can never be applied now.
      if (core.ledger.appliedFrom(r.giver, r.giverEpoch) < r.seq) this.strand(r.items)
      else this.applied += sum(r.items)
      this.open.delete(id)
      this.settled.add(id)
    }
    this.live.delete(core.epoch)
    if (how === 'stop') {
      const keys = new Map<string, number>()
      for (const k of saved ?? []) keys.set(k.key, (keys.get(k.key) ?? 0) + k.held + k.tokens)
      this.disk.set(core.node, { node: core.node, allocate: core.limiter.allocate, keys })
      return
    }
    for (const ks of core.limiter.states()) add(this.stranded, ks.key, booked(ks))
    this.crashed.push(core)
  }

  private strand (items: Grant['items']): void {
    for (const [k, n] of items) add(this.stranded, k, n)
  }

  /** Move grants whose fate is known out of `open`. */
  private settle (): void {
    for (const [id, r] of this.open) {
      const to = this.live.get(r.toEpoch)
      if (to !== undefined && to.ledger.appliedFrom(r.giver, r.giverEpoch) >= r.seq) {
        this.applied += sum(r.items)
        this.open.delete(id)
        this.settled.add(id)
      } else if (to === undefined && !this.live.has(r.giverEpoch) && r.copies === 0) {
        // Its receiver is gone without applying it: stranded. (died() settles those too.)
        this.strand(r.items)
        this.open.delete(id)
        this.settled.add(id)
      }
    }
  }

  private rule (key: string): CompiledRule | undefined {
    return this.ruleSet?.match(key)
  }

  /** The share a node would create `key` with. */
  private share (node: string, allocate: boolean, rule: CompiledRule, key: string): number {
    return allocate ? initialShare(rule.stock, rule.glob, key, node, this.seeds) : 0
  }

  account (key: string): KeyAccount {
    this.settle()
    const rule = this.rule(key)
    const stock = rule?.stock ?? 0
    const a: KeyAccount = { key, stock, held: 0, transit: 0, saved: 0, stranded: this.stranded.get(key) ?? 0, error: 0 }
    if (rule === undefined) return a
    for (const core of this.live.values()) {
      const ks = core.limiter.existing(key)
      a.held += ks !== undefined ? booked(ks) : this.share(core.node, core.limiter.allocate, rule, key)
    }
    for (const d of this.disk.values()) a.saved += d.keys.get(key) ?? this.share(d.node, d.allocate, rule, key)
    for (const c of this.crashed) {
      if (c.limiter.existing(key) === undefined) a.stranded += this.share(c.node, c.limiter.allocate, rule, key)
    }
    for (const r of this.open.values()) {
      const lost = !this.live.has(r.toEpoch) || (!this.live.has(r.giverEpoch) && r.copies === 0)
      for (const [k, n] of r.items) {
        if (k !== key) continue
        if (lost) a.stranded += n
        else a.transit += n
      }
    }
    a.error = a.held + a.transit + a.saved + a.stranded - stock
    return a
  }
}

/** A key's tokens in a node's books: its bucket's share plus deferred credits. */
function booked (ks: KeyState): number {
  return ks.bucket.share + (ks.ext === null ? 0 : deferredTotal(ks.ext as KeyExt))
}

function add (m: Map<string, number>, k: string, n: number): void {
  m.set(k, (m.get(k) ?? 0) + n)
}

function sum (items: Grant['items']): number {
  let s = 0
  for (const [, n] of items) s += n
  return s
}
