/**
 * What the metrics cost the decision path, in-process: LocalQuota.acquire on
 * 1,000 keys of an always-allowing rule, with no metrics attached and with the
 * daemon's Metrics attached (decision-time sampling), in alternating trials.
 * The socket bench (`--metrics`) measures the same end to end, where the
 * difference drowns in the machine's noise; this isolates it.
 *
 *   npm run build && node dist/bench/metrics-cost.js [--trials 7] [--ops 2000000]
 */
import { intFlag, parseCli } from '../src/cli/common.js'
import { systemClock } from '../src/clock.js'
import { DEFAULT_LIMITS, type RuleConfig } from '../src/config/types.js'
import { Metrics } from '../src/http/metrics.js'
import { LocalQuota } from '../src/node/local-quota.js'
import type { UnixServer } from '../src/server/unix-server.js'
import { machineInfo, printMachine } from './lib/machine.js'

const RULES: RuleConfig[] = [{ name: 'bench', match: 'bench:*', limit: 1e9, perMs: 1000, per: '1s', algorithm: 'fixed-window', burst: 1e9, mode: 'hard', onPartition: 'local-share', maxDebt: 0 }]
const KEYS = Array.from({ length: 1000 }, (_, i) => `bench:${i}`)

function quota (withMetrics: boolean): LocalQuota {
  const q = new LocalQuota({ node: 'a', seeds: ['a'], rules: RULES, limits: DEFAULT_LIMITS, clock: systemClock })
  // The server is read only at scrape time, and nothing scrapes here.
  if (withMetrics) q.timing = new Metrics({ limiter: q.limiter, server: null as unknown as UnixServer, cluster: null, now: () => systemClock.mono() })
  return q
}

function nsPerAcquire (q: LocalQuota, ops: number): number {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < ops; i++) q.acquire(KEYS[i % KEYS.length], 1, 0)
  return Number(process.hrtime.bigint() - t0) / ops
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]

const { values } = parseCli({ args: process.argv.slice(2), options: { trials: { type: 'string' }, ops: { type: 'string' } } })
const trials = intFlag('trials', values.trials, 7, 1)
const ops = intFlag('ops', values.ops, 2_000_000, 1000)
printMachine(machineInfo())
const off = quota(false)
const on = quota(true)
nsPerAcquire(off, ops) // warm-up, both
nsPerAcquire(on, ops)
const r = { off: [] as number[], on: [] as number[] }
for (let t = 0; t < trials; t++) {
  r.off.push(nsPerAcquire(off, ops))
  r.on.push(nsPerAcquire(on, ops))
}
const fmt = (xs: number[]): string => xs.map(x => x.toFixed(0)).join(' ')
process.stdout.write(`ns per acquire (${trials} trials of ${ops} each, alternating)\n`)
process.stdout.write(`  metrics off: ${fmt(r.off)}  median ${median(r.off).toFixed(0)}\n`)
process.stdout.write(`  metrics on:  ${fmt(r.on)}  median ${median(r.on).toFixed(0)}\n`)
process.stdout.write(`  cost: ${(median(r.on) - median(r.off)).toFixed(0)} ns per decision (${(100 * (median(r.on) / median(r.off) - 1)).toFixed(0)}% of an in-process decision)\n`)
process.exit(0)
