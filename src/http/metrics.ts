/**
 * The Prometheus metrics of one node (prom-client, text exposition).
 *
 * Collecting them must not slow the decision path, so almost everything is
 * read at scrape time from counters the node keeps anyway: per-rule decision
 * counts (the limiter's rule stats), held and stranded tokens and the
 * shortfall (a walk over the key table, only when scraped), transfers and gossip bytes (the cluster's
 * and the transport's counters), peers, rule agreement, waiters and keys.
 * The one hot-path cost is the decision-time histogram: every decision is
 * counted (one increment), one in SAMPLE_EVERY is timed (a mask), and so is
 * the first after each scrape; times go to a fixed ring (a Float64Array)
 * that the histogram takes in at scrape time (sampled-histogram.ts). Its
 * `_count` is the exact number of decisions: the timing is sampled, never
 * the count (each timed decision stands for the untimed ones around it).
 * prom-client's own observe (~0.5 µs) stays off the decision path: measured
 * in-process, observing directly cost ~40 ns per decision on average, a
 * fifth of a decision's own time.
 *
 * The process and Node.js metrics are prom-client's defaults under their
 * standard names (`process_cpu_seconds_total`, `nodejs_heap_size_used_bytes`,
 * ...), so stock dashboards read them unchanged.
 *
 * Labels are bounded: by rule and by a fixed set of values, never by key or
 * by peer.
 */
import client from 'prom-client'
import type { ClusterNode } from '../cluster/cluster-node.js'
import { deferredTotal, type KeyExt } from '../cluster/key-ext.js'
import { keyShortfall, knowsShortfall } from '../cluster/shortfall.js'
import type { Limiter } from '../core/limiter.js'
import type { UnixServer } from '../server/unix-server.js'
import { SampledHistogram } from './sampled-histogram.js'

/** One decision in this many is timed (a power of two). */
export const SAMPLE_EVERY = 16
/** Timed decisions kept between scrapes (a power of two): the newest this many; 32 KiB. */
export const TIMINGS_KEPT = 4096

export interface MetricSources {
  limiter: Limiter
  server: UnixServer
  cluster: ClusterNode | null
  /** Monotonic time, for liveness. */
  now: () => number
}

export class Metrics {
  readonly registry = new client.Registry()
  readonly decisionSeconds: SampledHistogram
  /** Decisions since the last scrape (every one: the histogram's count). */
  private n = 0
  /** Sampled decision times in seconds, since the last scrape: a ring of the newest TIMINGS_KEPT. */
  private readonly timings = new Float64Array(TIMINGS_KEPT)
  private timed = 0

  constructor (src: MetricSources) {
    const r = this.registry
    client.collectDefaultMetrics({ register: r })
    this.decisionSeconds = new SampledHistogram({
      name: 'quotad_decision_duration_seconds',
      help: `Time to decide an acquire in the daemon (server side). _count counts every decision; the time of one in ${SAMPLE_EVERY} (and of the first after each scrape) is measured, at most the newest ${TIMINGS_KEPT} per scrape, and stands for the untimed ones.`,
      buckets: [2e-6, 5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 250e-6, 1e-3, 5e-3],
      registers: [r],
      collect: () => { this.takeTimings() }
    })
    new client.Counter({
      name: 'quotad_decisions_total',
      help: 'Decisions made, by rule and result (acquires and batch items; peeks are not counted).',
      labelNames: ['rule', 'result'],
      registers: [r],
      collect () {
        this.reset()
        for (const rule of src.limiter.rules) {
          this.inc({ rule: rule.name, result: 'allowed' }, rule.stats.allowed)
          this.inc({ rule: rule.name, result: 'denied' }, rule.stats.denied)
        }
      }
    })
    new client.Gauge({
      name: 'quotad_tokens_held',
      help: 'Tokens this node holds, by rule (spendable here; deferred credits included). A rule with no key state here: what its first key would hold here at once (an exact key\'s share; a glob rule\'s stock for a key homed here).',
      labelNames: ['rule'],
      registers: [r],
      collect () { this.reset(); for (const [rule, v] of tokensByRule(src, 'held')) this.set({ rule }, v) }
    })
    new client.Gauge({
      name: 'quotad_tokens_stranded',
      help: 'Tokens known to be out of reach, by rule: in grants to incarnations that no longer exist, or last held by peers that are not alive.',
      labelNames: ['rule'],
      registers: [r],
      collect () { this.reset(); for (const [rule, v] of tokensByRule(src, 'stranded')) this.set({ rule }, v) }
    })
    new client.Gauge({
      name: 'quotad_tokens_shortfall',
      help: 'Tokens of the stock that no live node accounts for, summed by rule over the keys this node has cluster state for: held by a node that crashed, or saved by one that is down, until they come back. An estimate from gossip (rounded, up to a gossip interval or two old).',
      labelNames: ['rule'],
      registers: [r],
      collect () { this.reset(); for (const [rule, v] of tokensByRule(src, 'shortfall')) this.set({ rule }, v) }
    })
    new client.Counter({
      name: 'quotad_transfers_total',
      help: 'Tokens moved between nodes, by direction.',
      labelNames: ['direction'],
      registers: [r],
      collect () {
        this.reset()
        const c = src.cluster?.core.counters
        this.inc({ direction: 'in' }, c?.tokensIn ?? 0)
        this.inc({ direction: 'out' }, c?.tokensOut ?? 0)
      }
    })
    new client.Counter({
      name: 'quotad_forwards_total',
      help: 'Acquires sent to or decided for another node (forward.ts), by kind: at a member, sent (all it sent a seed), overflow (of those, of rules it decides itself, for want of tokens here), allowed, failed (no answer in time), from_credit, kept_denial; at a seed, served (members\' acquires decided here) and sent_on (to a glob key\'s other seed).',
      labelNames: ['kind'],
      registers: [r],
      collect () {
        this.reset()
        const f = src.cluster?.core.forwarding.counters
        if (f === undefined) return
        for (const [kind, v] of [['sent', f.forwarded], ['overflow', f.forwardOverflow], ['allowed', f.forwardAllowed], ['failed', f.forwardFailed], ['from_credit', f.forwardFromCredit], ['kept_denial', f.forwardKeptDenials], ['served', f.forwardServed], ['sent_on', f.forwardSentOn]] as const) this.inc({ kind }, v)
      }
    })
    new client.Counter({
      name: 'quotad_gossip_bytes_total',
      help: 'Gossip payload bytes, by direction (sent counts each message once, before gossipsub copies it).',
      labelNames: ['direction'],
      registers: [r],
      collect () {
        this.reset()
        const t = src.cluster?.transportStats() ?? {}
        this.inc({ direction: 'sent' }, t.publishedBytes ?? 0)
        this.inc({ direction: 'received' }, t.receivedBytes ?? 0)
      }
    })
    new client.Gauge({
      name: 'quotad_peers',
      help: 'Peers this node knows, by state.',
      labelNames: ['state'],
      registers: [r],
      collect () {
        this.reset()
        const core = src.cluster?.core
        let alive = 0
        let dead = 0
        if (core !== undefined) for (const p of core.peers.all()) { if (core.peers.isAlive(p, src.now())) alive++; else dead++ }
        this.set({ state: 'alive' }, alive)
        this.set({ state: 'dead' }, dead)
      }
    })
    new client.Gauge({
      name: 'quotad_cluster_fenced',
      help: '1 while this node holds no lease (no quorum of seeds echoed it within leaseMs): it spends no hard-mode tokens and gives none; else 0.',
      registers: [r],
      collect () {
        const core = src.cluster?.core
        this.set(core !== undefined && core.fenced(src.now()) ? 1 : 0)
      }
    })
    new client.Gauge({
      name: 'quotad_rule_agreement',
      help: '1 when every alive peer enforces the same version of the rule in the same cluster (its tokens are shared), else 0.',
      labelNames: ['rule'],
      registers: [r],
      collect () {
        this.reset()
        for (const [rule, ok] of agreement(src)) this.set({ rule }, ok ? 1 : 0)
      }
    })
    new client.Gauge({
      name: 'quotad_waiters',
      help: 'Acquires waiting for tokens.',
      registers: [r],
      collect () { this.set(src.limiter.waiterCount) }
    })
    new client.Gauge({
      name: 'quotad_keys',
      help: 'Keys with state on this node.',
      registers: [r],
      collect () { this.set(src.limiter.keyCount) }
    })
    new client.Gauge({
      name: 'quotad_connections',
      help: 'Client connections to the Unix socket.',
      registers: [r],
      collect () { this.set(src.server.stats().connections) }
    })
  }

  /** Count this decision; whether to time it (one in SAMPLE_EVERY, and the first since the last scrape, so a scrape with decisions has a time). */
  sample (): boolean {
    return (++this.n & (SAMPLE_EVERY - 1)) === 0 || this.timed === 0
  }

  /** A timed decision: kept in the ring until the next scrape (the decision path's only cost beyond `sample`). */
  record (seconds: number): void {
    this.timings[this.timed++ & (TIMINGS_KEPT - 1)] = seconds
  }

  /** At scrape time: the decisions and the ring's times into the histogram. */
  private takeTimings (): void {
    this.decisionSeconds.takeIn(this.timings, Math.min(this.timed, TIMINGS_KEPT), this.n)
    this.n = 0
    this.timed = 0
  }
}

/** Per rule name: the tokens held here, known stranded, or short (shortfall.ts; only in cluster mode). */
function tokensByRule (src: MetricSources, what: 'held' | 'stranded' | 'shortfall'): Map<string, number> {
  const out = new Map<string, number>()
  // A rule no key of which has state here: held is what its first key would hold at once (not 0: the node could spend it).
  for (const r of src.limiter.rules) out.set(r.name, what === 'held' && r.stats.keys === 0 ? src.limiter.freshShare(r) : 0)
  const now = src.now()
  const core = src.cluster?.core
  for (const ks of src.limiter.states()) {
    let v = 0
    if (what === 'held') {
      ks.bucket.advance(now)
      v = Math.max(0, ks.bucket.held) + (ks.ext === null ? 0 : deferredTotal(ks.ext as KeyExt))
    } else if (what === 'shortfall') {
      // Keys with cluster state, as status lists them (a key without has no peers' view to compare).
      if (core !== undefined && ks.ext !== null && knowsShortfall(core, ks)) v = keyShortfall(core, ks, now)
    } else if (ks.ext !== null) {
      v = (ks.ext as KeyExt).stranded
      if (core !== undefined) {
        for (const p of core.peers.all()) {
          if (core.peers.isAlive(p, now)) continue
          const e = p.keys.get(ks.key)
          if (e !== undefined) v += e.held + e.outstanding
        }
      }
    }
    out.set(ks.rule.name, (out.get(ks.rule.name) ?? 0) + v)
  }
  return out
}

/** Per rule name: whether every alive peer agrees on it (true on a lone node). */
export function agreement (src: Pick<MetricSources, 'limiter' | 'cluster' | 'now'>): Map<string, boolean> {
  const out = new Map<string, boolean>()
  const core = src.cluster?.core
  for (const r of src.limiter.rules) {
    let ok = true
    if (core !== undefined) {
      for (const p of core.peers.all()) {
        if (core.peers.isAlive(p, src.now()) && !(p.sameCluster && p.rules[r.name] === r.hash)) ok = false
      }
    }
    out.set(r.name, ok)
  }
  return out
}
