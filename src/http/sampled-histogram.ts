/**
 * A Prometheus histogram whose count is exact and whose timing is sampled.
 *
 * Timing every decision would cost the decision path more than the decision
 * (metrics.ts), so only some are timed. A plain histogram fed those samples
 * would then count samples: its `_count` read 0 after 2 decisions, and
 * `rate(_count)` was a sixteenth of the decision rate. Here `takeIn(times,
 * n, decisions)` adds `decisions` to the count, and spreads them over the
 * `n` timed ones: each timed decision stands for about `decisions / n` of
 * them, in whole numbers that add up exactly. So `_count` and the `+Inf`
 * bucket are the number of decisions, and `_sum` and the buckets are that
 * count distributed as the samples are (an estimate, like any sampled
 * latency).
 *
 * It speaks prom-client's metric interface (name, help, type, get()) so it
 * sits in the same registry as the others; prom-client's Histogram has no
 * weighted observe, and observing each decision once per weight would cost
 * a scrape one call per decision.
 */
import type client from 'prom-client'

interface Sample { metricName: string, labels: Record<string, string | number>, value: number }

export class SampledHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram' as const
  readonly aggregator = 'sum' as const
  private readonly bounds: readonly number[]
  /** Per bucket (not cumulative): decisions whose time fell in it; the last is +Inf. */
  private readonly counts: Float64Array
  private sum = 0
  private count = 0
  private readonly collect: () => void

  /** `collect` runs before every read (it calls `takeIn` with what came since the last). */
  constructor (o: { name: string, help: string, buckets: readonly number[], registers: client.Registry[], collect: () => void }) {
    this.name = o.name
    this.help = o.help
    this.bounds = [...o.buckets].sort((a, b) => a - b)
    this.counts = new Float64Array(this.bounds.length + 1)
    this.collect = o.collect
    // The registry needs only name, help, type and get(); prom-client's types ask for a Metric.
    for (const r of o.registers) r.registerMetric(this as unknown as client.Metric)
  }

  /**
   * `decisions` decisions, of which the first `n` of `times` (seconds) were
   * timed. With no time (n = 0) the decisions are counted in `+Inf` only,
   * never in a finite bucket: nothing says how long they took.
   */
  takeIn (times: ArrayLike<number>, n: number, decisions: number): void {
    if (decisions <= 0) return
    this.count += decisions
    if (n <= 0) {
      this.counts[this.bounds.length] += decisions
      return
    }
    // Never more samples than decisions: a sample stands for at least one.
    const used = Math.min(n, decisions)
    const each = Math.floor(decisions / used)
    const extra = decisions - each * used
    for (let i = 0; i < used; i++) {
      const w = each + (i < extra ? 1 : 0)
      const t = times[i]
      this.sum += t * w
      this.counts[this.bucketOf(t)] += w
    }
  }

  private bucketOf (t: number): number {
    for (let i = 0; i < this.bounds.length; i++) if (t <= this.bounds[i]) return i
    return this.bounds.length
  }

  /** What prom-client's registry reads from a metric (its text exposition prints `metricName` and `labels`). */
  async get (): Promise<{ name: string, help: string, type: string, aggregator: string, values: Sample[] }> {
    this.collect()
    const values: Sample[] = []
    let acc = 0
    for (let i = 0; i < this.bounds.length; i++) {
      acc += this.counts[i]
      values.push({ metricName: `${this.name}_bucket`, labels: { le: this.bounds[i] }, value: acc })
    }
    values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf' }, value: this.count })
    values.push({ metricName: `${this.name}_sum`, labels: {}, value: this.sum })
    values.push({ metricName: `${this.name}_count`, labels: {}, value: this.count })
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}
