/**
 * Memory per active key in the decision core: fill a `Limiter` with N keys of
 * one glob rule (one acquire each) and divide the V8 heap growth by N, for
 * every algorithm.
 *
 * Why the keys are made the way they are: on the daemon a key string is
 * decoded from a msgpack frame, it is flat, and only the key table holds it. So
 * keys here are built from a Buffer (`latin1Slice` returns a flat sequential
 * string, as a decoder does) inside the timed loop and are not kept anywhere
 * else: their bytes count as the key's. A control run measures those strings
 * alone, so the core's own overhead is the difference.
 *
 * Then the resident set size of a fresh process holding 1M fixed-window keys
 * (and of one holding none): what the operating system sees, heap slack and
 * Node itself included.
 *
 * Run: node --expose-gc dist/bench/memory.js [--n 100000,1000000] [--rss-keys 1000000] [--json FILE]
 */
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Limiter } from '../src/core/limiter.js'
import { ALGORITHMS, DEFAULT_LIMITS, type Algorithm, type RuleConfig } from '../src/config/types.js'
import { machineInfo, printMachine } from './lib/machine.js'

const KEY_PREFIX = 'mem:user:'

/** The sliding log's memory grows with the limit: one more row at a small one. */
const SMALL_LOG_LIMIT = 10

interface Row {
  algorithm: Algorithm | 'key strings only' | `sliding-log limit ${number}`
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

function fill (algorithm: Algorithm, n: number, limit: number, maker: KeyMaker): Limiter {
  const limits = { ...DEFAULT_LIMITS, maxKeys: n * 2 }
  const limiter = new Limiter({ node: 'a', limits, rules: [rule(algorithm, limit)] })
  const now = Date.now()
  for (let i = 0; i < n; i++) {
    const d = limiter.acquire(maker.key(i), 1, now)
    if (!d.allowed) throw new Error(`key ${i} was denied; the bench expects every first acquire to be allowed`)
  }
  return limiter
}

function measure (algorithm: Algorithm, n: number, keyStringBytes: number, limit = 1000): Row {
  const maker = new KeyMaker(KEY_PREFIX)
  gc()
  const before = process.memoryUsage().heapUsed
  const t0 = performance.now()
  const limiter = fill(algorithm, n, limit, maker)
  const ms = performance.now() - t0
  gc()
  const heapBytes = process.memoryUsage().heapUsed - before
  // Keep the limiter alive across the measurement.
  if (limiter.keyCount !== n) throw new Error(`expected ${n} keys, the limiter holds ${limiter.keyCount}`)
  const bytesPerKey = heapBytes / n
  const name = limit === 1000 ? algorithm : `sliding-log limit ${limit}` as const
  return { algorithm: name, keys: n, heapBytes, bytesPerKey, coreBytesPerKey: bytesPerKey - keyStringBytes, keysPerSec: n / ms * 1000 }
}

/** In a child of its own (a fresh heap): fill N fixed-window keys, gc, and print the RSS in bytes. */
function rssChild (n: number): void {
  const limiter = n > 0 ? fill('fixed-window', n, 1000, new KeyMaker(KEY_PREFIX)) : null
  gc()
  process.stdout.write(`${process.memoryUsage().rss} ${limiter?.keyCount ?? 0}\n`)
}

function rssOf (n: number): number {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--rss-child', String(n)], { encoding: 'utf8' })
  const [rss, keys] = r.stdout.trim().split(' ').map(Number)
  if (r.status !== 0 || keys !== n) throw new Error(`rss child failed (status ${r.status}): ${r.stderr}`)
  return rss
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
    if (a === '--rss-child') {
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

function main (): void {
  const { sizes, rssKeys, json } = parseArgs(process.argv.slice(2))
  const machine = machineInfo()
  printMachine(machine)
  process.stdout.write(`config: rule match "${KEY_PREFIX}*" limit 1000 per 1m, one acquire per key, keys "${KEY_PREFIX}<i>" (${KEY_PREFIX.length + 1}-${KEY_PREFIX.length + String(Math.max(...sizes) - 1).length} chars, flat one-byte strings)\n`)
  process.stdout.write('bytes/key = V8 heapUsed delta (after gc) / N; core bytes/key excludes the key string itself\n\n')

  const rows: Row[] = []
  const head = ['algorithm', 'keys', 'heap delta MiB', 'bytes/key', 'core bytes/key', 'keys created/s']
  const widths = [20, 11, 15, 10, 15, 15]
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
    const r = measure('sliding-log', n, control.bytesPerKey, SMALL_LOG_LIMIT)
    rows.push(r)
    line([r.algorithm, fmt(n), fmt(r.heapBytes / 1048576, 1), fmt(r.bytesPerKey, 1), fmt(r.coreBytesPerKey ?? 0, 1), fmt(r.keysPerSec)])
  }
  let rss: { keys: number, bytes: number, emptyBytes: number } | null = null
  if (rssKeys > 0) {
    rss = { keys: rssKeys, bytes: rssOf(rssKeys), emptyBytes: rssOf(0) }
    process.stdout.write(`\nRSS of a fresh process (after gc): ${fmt(rss.keys)} fixed-window keys ${fmt(rss.bytes / 1e6, 1)} MB (${fmt(rss.bytes / 1048576, 1)} MiB); with no keys ${fmt(rss.emptyBytes / 1e6, 1)} MB\n`)
  }
  if (json !== undefined) {
    writeFileSync(json, JSON.stringify({ machine, keyPrefix: KEY_PREFIX, rows, rss }, null, 2) + '\n')
    process.stdout.write(`\nwrote ${json}\n`)
  }
}

main()
