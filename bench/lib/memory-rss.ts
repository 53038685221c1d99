/**
 * The RSS part of bench/memory.ts: fresh child processes fill N fixed-window
 * keys under a V8 configuration, gc, and report their resident set size and
 * where the V8 heap's part of it is.
 *
 * Why several runs per configuration: the RSS of the same fill varies by
 * 20-30 MB from run to run (measured at 2dfd705: 194-222 MB for one
 * configuration), mostly in the old space's free pages left after the
 * collections (which pages V8 compacts depends on GC timing) and in memory
 * the allocator keeps for V8's GC threads. One run can land on either side
 * of a 200 MB target; the median of several says where the code is.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'

export interface RssConfig {
  /** What the table prints. */
  label: string
  /** Node flags on the child's command line. */
  nodeArgs: string[]
  /** A V8 flag the child sets itself, first thing (v8.setFlagsFromString), as a daemon could at startup. */
  runtimeFlag?: string
}

/**
 * The node flags the daemon is launched with: those on the first line of
 * its entry point (`#!/usr/bin/env -S node FLAGS`), which the `quotad` bin
 * runs with and deploy/ passes too.
 */
export const LAUNCH_FLAGS: string[] = readFileSync(fileURLToPath(new URL('../../src/cli/quotad.js', import.meta.url)), 'utf8')
  .split('\n', 1)[0].split(/\s+/).filter(a => a.startsWith('--'))

/**
 * Node's defaults; the daemon as launched (a 1 MiB semi-space on the
 * command line: the young generation V8 otherwise grows to 2 x 16 MiB,
 * resident for good); and the same cap set by the process itself at run time. `--max-semi-space-size`
 * set at run time does nothing (V8 reads it once, when it sets up the heap),
 * but `--semi-space-growth-factor` is read each time the young generation
 * would grow: at 1 it stays at its initial 1 MiB semi-space.
 */
export const RSS_CONFIGS: readonly RssConfig[] = [
  { label: 'node defaults', nodeArgs: [] },
  { label: `as launched: ${LAUNCH_FLAGS.join(' ')}`, nodeArgs: LAUNCH_FLAGS },
  { label: 'growth factor 1, set at run time', nodeArgs: [], runtimeFlag: '--semi-space-growth-factor=1' }
]

/** Runs per configuration and key count (the median is printed). */
export const RSS_RUNS = 3

export interface RssSample {
  keys: number
  rss: number
  heapUsed: number
  /** Every V8 heap space, resident (the rest of the RSS is node, its libraries and malloc). */
  heapPhysical: number
  /** Young generation, resident. */
  young: number
  /** Old space: pages held, and the bytes of live objects in them. */
  oldSize: number
  oldUsed: number
  /** Large objects (the key table's hash table is one). */
  large: number
}

/** In the child, after its fill and gc: what it holds. */
export function rssSample (keys: number): RssSample {
  const space = (name: string): v8.HeapSpaceInfo | undefined => v8.getHeapSpaceStatistics().find(s => s.space_name === name)
  const old = space('old_space')
  return {
    keys,
    rss: process.memoryUsage().rss,
    heapUsed: process.memoryUsage().heapUsed,
    heapPhysical: v8.getHeapStatistics().total_physical_size,
    young: space('new_space')?.physical_space_size ?? 0,
    oldSize: old?.physical_space_size ?? 0,
    oldUsed: old?.space_used_size ?? 0,
    large: space('large_object_space')?.physical_space_size ?? 0
  }
}

/** Child arguments for `--rss-child`: the runtime flag first, so it is set before anything grows. */
export function childArgs (cfg: RssConfig, n: number): string[] {
  return [...(cfg.runtimeFlag !== undefined ? ['--rss-runtime-flag', cfg.runtimeFlag] : []), '--rss-child', String(n)]
}

/** Run `script` in a fresh node `runs` times under `cfg`, filling `n` keys; the samples sorted by RSS. */
export function rssRuns (script: string, cfg: RssConfig, n: number, runs: number): RssSample[] {
  const out: RssSample[] = []
  for (let i = 0; i < runs; i++) {
    const r = spawnSync(process.execPath, ['--expose-gc', ...cfg.nodeArgs, script, ...childArgs(cfg, n)], { encoding: 'utf8' })
    const s = r.status === 0 ? JSON.parse(r.stdout) as RssSample : undefined
    if (s?.keys !== n) throw new Error(`rss child failed (status ${r.status}): ${r.stderr}`)
    out.push(s)
  }
  return out.sort((a, b) => a.rss - b.rss)
}

const mb = (b: number): string => (b / 1e6).toFixed(1)

/** One line per configuration: median RSS (range), with no keys, and where the median run's heap part is. */
export function rssLine (cfg: RssConfig, full: RssSample[], empty: RssSample[]): string {
  const m = full[Math.floor(full.length / 2)]
  const e = empty[Math.floor(empty.length / 2)]
  return `  ${cfg.label.padEnd(36)} ${mb(m.rss)} MB (${mb(full[0].rss)}-${mb(full[full.length - 1].rss)}); no keys ${mb(e.rss)} MB` +
    ` | heap used ${mb(m.heapUsed)}, young gen ${mb(m.young)}, old space ${mb(m.oldSize)} (${mb(m.oldSize - m.oldUsed)} free),` +
    ` large objects ${mb(m.large)}; outside the heap ${mb(m.rss - m.heapPhysical)} (no keys ${mb(e.rss - e.heapPhysical)})\n`
}
