/**
 * Latency samples and the summaries the benches print.
 *
 * Samples go into one growable Float64Array (no per-sample allocation on the
 * measured path); percentiles sort a copy once per trial. Percentile p is the
 * nearest-rank value: the smallest sample with at least p of all samples at or
 * below it.
 */

export interface LatencySummary {
  n: number
  meanUs: number
  p50Us: number
  p99Us: number
  p999Us: number
  maxUs: number
}

export class LatencyLog {
  private buf: Float64Array
  private n = 0

  constructor (capacity = 1 << 16) {
    this.buf = new Float64Array(capacity)
  }

  get count (): number { return this.n }

  /** One sample in milliseconds (performance.now() units). */
  push (ms: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2)
      next.set(this.buf)
      this.buf = next
    }
    this.buf[this.n++] = ms
  }

  summary (): LatencySummary {
    const n = this.n
    if (n === 0) return { n: 0, meanUs: NaN, p50Us: NaN, p99Us: NaN, p999Us: NaN, maxUs: NaN }
    const sorted = this.buf.slice(0, n).sort()
    let sum = 0
    for (let i = 0; i < n; i++) sum += sorted[i]
    return {
      n,
      meanUs: sum / n * 1000,
      p50Us: percentile(sorted, 0.5) * 1000,
      p99Us: percentile(sorted, 0.99) * 1000,
      p999Us: percentile(sorted, 0.999) * 1000,
      maxUs: sorted[n - 1] * 1000
    }
  }
}

/** Nearest-rank percentile of an ascending array. */
export function percentile (sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN
  const rank = Math.max(1, Math.ceil(p * sorted.length))
  return sorted[Math.min(sorted.length, rank) - 1]
}

export function median (xs: readonly number[]): number {
  const s = xs.filter(x => !Number.isNaN(x)).sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

export function geomean (xs: readonly number[]): number {
  if (xs.length === 0) return NaN
  return Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length)
}
