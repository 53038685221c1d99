/**
 * Memory per active key in the decision core: fill a `Limiter` with N keys of
 * one glob rule (one acquire each; the sliding log's `full` rows spend the
 * whole limit) and divide the growth of the V8 heap and of typed arrays'
 * backing stores by N, for every algorithm.
 *
 * Why the keys are made the way they are: on the daemon a key string is
 * decoded from a msgpack frame, it is flat, and only the key table holds it. So
 * keys here are built from a Buffer (`latin1Slice` returns a flat sequential
 * string, as a decoder does) inside the timed loop and are not kept anywhere
 * else: their bytes count as the key's. A control run measures those strings
 * alone, so the core's own overhead is the difference.
 *
 * Time is monotonic and fractional, as the daemon's (performance.now), and
 * before measuring, every bucket class is put through what a running daemon
 * puts it through at once (a refill between spends at fractional times,
 * windows rolling over): V8 decides per class whether a field holds small
 * integers in place or boxes every value in a heap number, and a field that
 * ever held a fraction is boxed in every object of that class from then on.
 * A bench that never did so would count a token bucket's `held` as free.
 *
 * `cluster <algorithm>` rows drive the keys through a ClusterCore of this
 * node and one peer (no network: nothing is delivered), then run one tick
 * as the daemon does: what the cluster keeps per key beside the limiter.
 *
 * Then the resident set size of a fresh process holding 1M fixed-window keys
 * (and of one holding none): what the operating system sees, heap slack and
 * Node itself included; under node's defaults and two ways to cap the young
 * generation, the median of a few runs each (bench/lib/memory-rss.ts).
 *
 * Run: node --expose-gc dist/bench/memory.js [--n 100000,1000000] [--rss-keys 1000000] [--json FILE]
 */
import { writeFileSync } from 'node:fs'
import v8 from 'node:v8'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Limiter } from '../src/core/limiter.js'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { ALGORITHMS, DEFAULT_LIMITS, type Algorithm, type RuleConfig } from '../src/config/types.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { RSS_CONFIGS, RSS_RUNS, rssLine, rssRuns, rssSample, type RssSample } from './lib/memory-rss.js'

const KEY_PREFIX = 'mem:user:'

/**
 * The sliding log's memory grows with the spends it keeps, up to the limit:
 * more rows at a small limit, one spend per key and the whole limit spent
 * (one token at a time, each at its own time: the log's worst case), and
 * the whole of a larger limit spent (the per-token cost, not the fixed part).
 */
const SMALL_LOG_LIMIT = 10
const LARGE_LOG_LIMIT = 100

/** Algorithms driven through a ClusterCore (all by default). */
const CLUSTER_ALGORITHMS: readonly Algorithm[] = ALGORITHMS

interface Row {
  algorithm: Algorithm | 'key strings only' | `sliding-log limit ${number}` | `sliding-log limit ${number} full` | `cluster ${Algorithm}`
  keys: number
  heapBytes: number
  bytesPerKey: number
  coreBytesPerKey: number | null
  keysPerSec: number
}

function gc (): void {
  const g = (globalThis as { gc?: () => void }).gc
  if (g === undefined) {
    process.stderr.write('memory bench needs --expose-gc: node --expose-gc dist/bench/memory.js\n')
    process.exit(2)
  }
  // Twice: the first pass may only promote; weak callbacks free more on the second.
  g()
  g()
}

/** Flat one-byte strings, like those a msgpack decoder hands the server. */
class KeyMaker {
  private readonly buf = Buffer.alloc(64)
  private readonly prefixLength: number

  constructor (prefix: string) {
    this.prefixLength = this.buf.write(prefix, 0, 'latin1')
  }

  key (i: number): string {
    const n = this.buf.write(String(i), this.prefixLength, 'latin1')
    return this.buf.toString('latin1', 0, this.prefixLength + n)
  }
}

function rule (algorithm: Algorithm, limit = 1000): RuleConfig {
  return {
    name: `mem-${algorithm}`,
    match: `${KEY_PREFIX}*`,
    limit,
    perMs: 60_000,
    per: '1m',
    algorithm,
    burst: limit,
    mode: 'hard',
    onPartition: 'local-share',
    maxDebt: 1000
  }
}

function measureKeysOnly (n: number): Row {
  const maker = new KeyMaker(KEY_PREFIX)
  gc()
  const before = process.memoryUsage().heapUsed
  const t0 = performance.now()
  const keys: string[] = new Array(n)
  for (let i = 0; i < n; i++) keys[i] = maker.key(i)
  const ms = performance.now() - t0
  gc()
  const heapBytes = process.memoryUsage().heapUsed - before
  if (keys.length !== n) throw new Error('unreachable')
  // The array's own slot (8 bytes per element) is not part of a key string.
  const bytesPerKey = heapBytes / n - 8
  return { algorithm: 'key strings only', keys: n, heapBytes, bytesPerKey, coreBytesPerKey: null, keysPerSec: n / ms * 1000 }
}

/** Monotonic, fractional, like the daemon's clock (performance.now) and far from 0, as after some uptime. */
function monoNow (): number {
  return 86_400_000.123 + performance.now()
}

/**
 * What a running daemon does to every bucket class at once (see the header):
 * spends at fractional times, a refill in between, windows rolling over.
 */
function warmUp (): void {
  for (const algorithm of ALGORITHMS) {
    const limiter = new Limiter({ node: 'a', limits: DEFAULT_LIMITS, rules: [rule(algorithm, 1000)] })
    let t = monoNow()
    for (let i = 0; i < 50; i++) {
      for (let k = 0; k < 20; k++) limiter.acquire(`${KEY_PREFIX}warm${k}`, 1 + (i % 3), t)
      // Short steps refill a token bucket part way (a fraction); long ones roll windows over.
      t += i % 2 === 0 ? 7.31 : 1_234.567
    }
    limiter.sweep(t + 3 * 60_000, 1_000)
  }
}

/**
 * Apart by more than the sliding log's time unit (1/64 ms at this period):
 * spends in one unit merge into one entry, and the `full` rows measure a
 * log whose every token is an entry of its own.
 */
const SPEND_GAP_MS = 1 / 32

/** N keys, each spent `spends` times, one token each time (the clock moves on between any two, by SPEND_GAP_MS at least). */
function fill (algorithm: Algorithm, n: number, limit: number, maker: KeyMaker, spends = 1): Limiter {
  const limits = { ...DEFAULT_LIMITS, maxKeys: n * 2 }
  const limiter = new Limiter({ node: 'a', limits, rules: [rule(algorithm, limit)] })
  let last = -Infinity
  for (let i = 0; i < n; i++) {
    const key = maker.key(i)
    for (let j = 0; j < spends; j++) {
      last = spends === 1 ? monoNow() : Math.max(monoNow(), last + SPEND_GAP_MS)
      const d = limiter.acquire(key, 1, last)
      if (!d.allowed) throw new Error(`key ${i} was denied at spend ${j + 1}; the bench expects every spend up to the limit to be allowed`)
    }
  }
  return limiter
}

/** Keys through the cluster core of node `a`, with one peer `b` that never answers; then one tick. */
/** Loaded only for the cluster rows, so the RSS child's module graph stays as it was. */
let Core: typeof ClusterCore | undefined

function fillCluster (algorithm: Algorithm, n: number, maker: KeyMaker): ClusterCore {
  if (Core === undefined) throw new Error('unreachable: main loads the cluster core first')
  const limits = { ...DEFAULT_LIMITS, maxKeys: n * 2 }
  const start = monoNow()
  const core = new Core({ node: 'a', epoch: 'bench', seeds: ['a', 'b'], rules: [rule(algorithm, 1000)], limits, allocate: true, wallMs: Date.now(), monoMs: start })
  core.init(start)
  for (let i = 0; i < n; i++) core.acquire(maker.key(i), 1, monoNow())
  core.tick(monoNow())
  return core
}

/**
 * The heap's live bytes and typed arrays' backing stores, which V8 keeps
 * outside its heap (so `heapUsed` alone would not count them).
 */
function usedBytes (): number {
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}

function measure (algorithm: Algorithm, n: number, keyStringBytes: number, limit = 1000, cluster = false, spends = 1): Row {
  const maker = new KeyMaker(KEY_PREFIX)
  gc()
  const before = usedBytes()
  const t0 = performance.now()
  const filled = cluster ? fillCluster(algorithm, n, maker) : fill(algorithm, n, limit, maker, spends)
  const ms = performance.now() - t0
  gc()
  const heapBytes = usedBytes() - before
  // Keep the limiter (and the cluster core) alive across the measurement.
  const limiter = filled instanceof Limiter ? filled : filled.limiter
  if (limiter.keyCount !== n) throw new Error(`expected ${n} keys, the limiter holds ${limiter.keyCount}`)
  const bytesPerKey = heapBytes / n
  const name = cluster
    ? `cluster ${algorithm}` as const
    : limit === 1000 ? algorithm : spends === limit ? `sliding-log limit ${limit} full` as const : `sliding-log limit ${limit}` as const
  return { algorithm: name, keys: n, heapBytes, bytesPerKey, coreBytesPerKey: bytesPerKey - keyStringBytes, keysPerSec: n / ms * 1000 }
}

/** In a child of its own (a fresh heap): fill N fixed-window keys, gc, and print what it holds (memory-rss.ts). */
function rssChild (n: number): void {
  warmUp()
  const limiter = n > 0 ? fill('fixed-window', n, 1000, new KeyMaker(KEY_PREFIX)) : null
  gc()
  process.stdout.write(JSON.stringify(rssSample(limiter?.keyCount ?? 0)) + '\n')
}

function count (flag: string, v: string | undefined, min: number): number {
  const n = Number((v ?? '').replace(/_/g, ''))
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${flag} wants an integer >= ${min}`)
  return n
}

function parseArgs (argv: string[]): { sizes: number[], rssKeys: number, json: string | undefined } {
  let sizes = [100_000, 1_000_000]
  let rssKeys = 1_000_000
  let json: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--rss-runtime-flag') {
      // A child of rssRuns: set the flag before anything grows, as a daemon would at startup.
      v8.setFlagsFromString(argv[++i] ?? '')
    } else if (a === '--rss-child') {
      rssChild(count(a, argv[++i], 0))
      process.exit(0)
    } else if (a === '--rss-keys') {
      rssKeys = count(a, argv[++i], 0)
    } else if (a === '--n') {
      sizes = (argv[++i] ?? '').split(',').map(s => Number(s.replace(/_/g, '')))
      if (sizes.some(s => !Number.isSafeInteger(s) || s <= 0)) throw new Error('--n wants positive integers, e.g. --n 100000,1000000')
    } else if (a === '--json') {
      json = argv[++i]
      if (json === undefined) throw new Error('--json wants a file name')
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: node --expose-gc dist/bench/memory.js [--n 100000,1000000] [--rss-keys 1000000 (0: skip)] [--json FILE]\n')
      process.exit(0)
    } else {
      throw new Error(`unknown argument ${a}; see --help`)
    }
  }
  return { sizes, rssKeys, json }
}

function fmt (n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

async function main (): Promise<void> {
  const { sizes, rssKeys, json } = parseArgs(process.argv.slice(2))
  Core = (await import('../src/cluster/cluster-core.js')).ClusterCore
  warmUp()
  const machine = machineInfo()
  printMachine(machine)
  process.stdout.write(`config: rule match "${KEY_PREFIX}*" limit 1000 per 1m, one acquire per key (the "full" rows: the limit, one token at a time), keys "${KEY_PREFIX}<i>" (${KEY_PREFIX.length + 1}-${KEY_PREFIX.length + String(Math.max(...sizes) - 1).length} chars, flat one-byte strings)\n`)
  process.stdout.write('bytes/key = (V8 heapUsed + arrayBuffers) delta (after gc) / N; core bytes/key excludes the key string itself\n\n')

  const rows: Row[] = []
  const head = ['algorithm', 'keys', 'delta MiB', 'bytes/key', 'core bytes/key', 'keys created/s']
  const widths = [26, 11, 15, 10, 15, 15]
  const line = (cells: string[]): void => {
    process.stdout.write(cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join(' ') + '\n')
  }
  line(head)
  line(widths.map(w => '-'.repeat(w)))
  for (const n of sizes) {
    const control = measureKeysOnly(n)
    rows.push(control)
    line([control.algorithm, fmt(n), fmt(control.heapBytes / 1048576, 1), fmt(control.bytesPerKey, 1), '-', fmt(control.keysPerSec)])
    for (const algorithm of ALGORITHMS) {
      const r = measure(algorithm, n, control.bytesPerKey)
      rows.push(r)
      line([algorithm, fmt(n), fmt(r.heapBytes / 1048576, 1), fmt(r.bytesPerKey, 1), fmt(r.coreBytesPerKey ?? 0, 1), fmt(r.keysPerSec)])
    }
    const more = [
      measure('sliding-log', n, control.bytesPerKey, SMALL_LOG_LIMIT),
      measure('sliding-log', n, control.bytesPerKey, SMALL_LOG_LIMIT, false, SMALL_LOG_LIMIT),
      measure('sliding-log', n, control.bytesPerKey, LARGE_LOG_LIMIT, false, LARGE_LOG_LIMIT)
    ]
    for (const algorithm of CLUSTER_ALGORITHMS) more.push(measure(algorithm, n, control.bytesPerKey, 1000, true))
    for (const r of more) {
      rows.push(r)
      line([r.algorithm, fmt(n), fmt(r.heapBytes / 1048576, 1), fmt(r.bytesPerKey, 1), fmt(r.coreBytesPerKey ?? 0, 1), fmt(r.keysPerSec)])
    }
  }
  const rss: Array<{ config: string, nodeArgs: string[], runtimeFlag: string | null, keys: RssSample[], empty: RssSample[] }> = []
  if (rssKeys > 0) {
    process.stdout.write(`\nRSS of a fresh process (after gc), ${fmt(rssKeys)} fixed-window keys, median of ${RSS_RUNS} runs (range), and with no keys:\n`)
    const script = fileURLToPath(import.meta.url)
    for (const cfg of RSS_CONFIGS) {
      const keys = rssRuns(script, cfg, rssKeys, RSS_RUNS)
      const empty = rssRuns(script, cfg, 0, RSS_RUNS)
      rss.push({ config: cfg.label, nodeArgs: cfg.nodeArgs, runtimeFlag: cfg.runtimeFlag ?? null, keys, empty })
      process.stdout.write(rssLine(cfg, keys, empty))
    }
  }
  if (json !== undefined) {
    writeFileSync(json, JSON.stringify({ machine, keyPrefix: KEY_PREFIX, rows, rss }, null, 2) + '\n')
    process.stdout.write(`\nwrote ${json}\n`)
  }
}

await main()
