/**
 * Crash recovery by the books journal (journal.ts), before and after:
 *
 * 1. Simulator: utilization and stranded tokens of the scenarios with
 *    crashes (churn, crash-restart, heal-settle; crash-forever, where the
 *    crashed node never returns, is the control that should not move), run
 *    by this build's `quotad simulate` and by an older build's, same seeds,
 *    hard mode. Before the journal a node restarted after kill -9 started
 *    with nothing and its share stayed stranded; after, it recovers it.
 * 2. What the journal costs: JournalFile.write of a small batch, append +
 *    fdatasync (`sync: true`, every give: the grant waits for it) vs append
 *    only, in a temp dir on this machine's disk.
 * 3. The want -> grant round trip between two real quotad processes, which
 *    now carries one fdatasync (lib/want-rtt.ts), this build vs the old one.
 *
 *   npx tsc -p . && node dist/bench/crash-recovery.js --old /path/to/old-worktree
 *
 * `--old DIR` (or QUOTAD_OLD_BUILD) is the root of a built checkout of the
 * commit before the journal (DIR/dist/src/cli/quotad.js); without it parts 1
 * and 3 run this build only. A scenario the old build lacks is `n/a` there.
 */
import { execFileSync } from 'node:child_process'
import { constants as fsc, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { intFlag, parseCli } from '../src/cli/common.js'
import { JournalFile } from '../src/cluster/journal-file.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { simScenarios, simulateRuns, summarizeRuns, type SimSummary } from './lib/sim-compare.js'
import { LatencyLog, median } from './lib/stats.js'
import { fmtRatio, fmtUs, renderTable } from './lib/table.js'
import { rttTrial, startPair, stopPair, type RttPair } from './lib/want-rtt.js'

const NEW_CLI = fileURLToPath(new URL('../src/cli/quotad.js', import.meta.url))
const NEW_ROOT = fileURLToPath(new URL('../..', import.meta.url))

const { values } = parseCli({
  args: process.argv.slice(2),
  options: {
    old: { type: 'string' },
    seeds: { type: 'string' },
    nodes: { type: 'string' },
    scenarios: { type: 'string' },
    writes: { type: 'string' },
    dir: { type: 'string' },
    'rtt-trials': { type: 'string' },
    'rtt-keys': { type: 'string' },
    'no-sim': { type: 'boolean' },
    'no-fsync': { type: 'boolean' },
    'no-rtt': { type: 'boolean' },
    'no-tmpfs': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' }
  }
})
if (values.help === true) {
  process.stdout.write('usage: node dist/bench/crash-recovery.js [--old DIR] [--seeds 10] [--nodes 10,50] [--scenarios churn,crash-restart,heal-settle,crash-forever]\n' +
    '  [--writes 2000] [--dir TMPPARENT] [--rtt-trials 20] [--rtt-keys 200] [--no-sim] [--no-fsync] [--no-rtt] [--no-tmpfs]\n' +
    '  --old DIR (or QUOTAD_OLD_BUILD): a built checkout of the commit before the journal\n')
  process.exit(0)
}
const seeds = intFlag('seeds', values.seeds, 10, 1)
const sizes = (values.nodes ?? '10,50').split(',').map(Number)
const scenarios = (values.scenarios ?? 'churn,crash-restart,heal-settle,crash-forever').split(',')
const writes = intFlag('writes', values.writes, 2000, 10)
const rttTrials = intFlag('rtt-trials', values['rtt-trials'], 20, 1)
const rttKeys = intFlag('rtt-keys', values['rtt-keys'], 200, 1)
const oldRoot = values.old ?? process.env.QUOTAD_OLD_BUILD
const oldCli = oldRoot === undefined ? undefined : path.resolve(oldRoot, 'dist/src/cli/quotad.js')
if (oldCli !== undefined && !existsSync(oldCli)) throw new Error(`--old: ${oldCli} does not exist (build that checkout with npx tsc -p .)`)

/** A checkout's short commit, with "+local changes" when its tree differs from it. */
function describe (root: string): string {
  try {
    const sha = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
    // Porcelain lines are "XY path": the path starts at column 3.
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).split('\n').filter(l => l.length > 3)
    return dirty.length > 0 ? `${sha} + local changes (${dirty.map(l => l.slice(3)).join(', ')})` : sha
  } catch {
    return 'unknown commit'
  }
}

const pct = (x: number): string => Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '-'

// ---------------------------------------------------------------------------
// 1. Simulator, before and after

async function simPart (): Promise<void> {
  process.stdout.write(`\n## 1. Simulator: ${scenarios.join(', ')}; N = ${sizes.join(', ')}; seeds 1..${seeds}; hard mode; 10 virtual s per run, gossip 250 ms, ` +
    'rule fixed-window 1000/1s (quotad simulate defaults)\n\n')
  const oldHas = oldCli === undefined ? new Set<string>() : await simScenarios(oldCli)
  const rows: string[][] = []
  const cell = (s: SimSummary | null, f: (s: SimSummary) => string): string => s === null ? 'n/a' : f(s)
  for (const sc of scenarios) {
    for (const n of sizes) {
      const after = summarizeRuns(await simulateRuns(NEW_CLI, sc, n, seeds))
      const before = oldCli !== undefined && oldHas.has(sc) ? summarizeRuns(await simulateRuns(oldCli, sc, n, seeds)) : null
      rows.push([
        sc, String(n),
        cell(before, s => `${pct(s.utilMedian)} (${pct(s.utilMin)})`),
        `${pct(after.utilMedian)} (${pct(after.utilMin)})`,
        before === null ? 'n/a' : fmtRatio(after.utilMedian / before.utilMedian),
        cell(before, s => pct(s.staticMedian)) + ' / ' + pct(after.staticMedian),
        cell(before, s => String(s.overshootMax)) + ' / ' + String(after.overshootMax),
        cell(before, s => `${s.strandedMedian} (${s.strandedMax})`) + ' / ' + `${after.strandedMedian} (${after.strandedMax})`,
        cell(before, s => String(Math.round(s.lostMedian))) + ' / ' + String(Math.round(after.lostMedian)),
        cell(before, s => String(s.failed)) + ' / ' + String(after.failed)
      ])
      process.stdout.write(`  ${sc} N=${n} done\n`)
    }
  }
  process.stdout.write('\n' + renderTable(
    ['scenario', 'N', 'before util med (min)', 'after util med (min)', 'after/before', 'static b / a', 'overshoot b / a', 'stranded med (max) b / a', 'lost b / a', 'failed b / a'],
    rows))
  process.stdout.write('\nutil = admitted / what an exact central limiter admits on the same arrivals; median (min) over seeds. static = a static even split ' +
    '(the same in both columns: same arrivals). overshoot = max over seeds (must be 0). stranded = tokens held by crashed incarnations at the end ' +
    'of the run, median (max) over seeds. lost = central admitted - cluster admitted, median over seeds. failed = runs whose oracle or audit failed.\n')
}

// ---------------------------------------------------------------------------
// 2. JournalFile.write: append + fdatasync vs append

/** A batch line as journal.ts writes it: [[key, delta], ..]; gives are negative. */
function batchLine (keys: number, i: number): string {
  return JSON.stringify(Array.from({ length: keys }, (_, j) => [`user:${(i * 7919 + j * 104729) % 1_000_000}`, -(1 + (i + j) % 5)]))
}

async function fsyncPart (): Promise<void> {
  const dir = mkdtempSync(path.join(values.dir ?? os.tmpdir(), 'quotad-journal-bench-'))
  let fsLine = 'df unavailable'
  try {
    fsLine = execFileSync('df', ['-T', dir], { encoding: 'utf8' }).trim().split('\n').slice(-1)[0].replace(/\s+/g, ' ')
  } catch { /* no df: say so */ }
  process.stdout.write(`\n## 2. JournalFile.write (src/cluster/journal-file.ts) of one batch, in ${dir}\n   df -T: ${fsLine}\n\n`)
  const file = new JournalFile(dir)
  // For comparison, not JournalFile: the append and the sync in one write() on an O_DSYNC descriptor (one thread-pool
  // hop, where JournalFile.write makes two: write, then datasync; each hop is an event-loop wake-up in a daemon).
  const dsync = await open(path.join(dir, 'dsync.jsonl'), fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT | fsc.O_DSYNC, 0o600)
  const journal = (keys: number, sync: boolean) => async (i: number) => { await file.write({ checkpoint: null, batch: batchLine(keys, i), sync }) }
  const rowsSpec = [
    { label: 'append, 1 key (sync: false)', write: journal(1, false) },
    { label: 'append + fdatasync, 1 key (sync: true)', write: journal(1, true) },
    { label: 'append, 10 keys (sync: false)', write: journal(10, false) },
    { label: 'append + fdatasync, 10 keys (sync: true)', write: journal(10, true) },
    { label: 'not JournalFile: one write() on an O_DSYNC fd, 1 key', write: async (i: number) => { await dsync.write(`${batchLine(1, i)}\n`) } }
  ]
  const logs = rowsSpec.map(() => new LatencyLog(writes))
  try {
    // Warm-up (JIT, the files' first blocks), not counted.
    for (let i = 0; i < 50; i++) for (const r of rowsSpec) await r.write(i)
    // Rounds of 50 writes per row, interleaved, so background load hits every row alike.
    const busy0 = machineBusyMs()
    const own0 = cpuMs(null)
    const t0 = performance.now()
    for (let done = 0; done < writes; done += 50) {
      for (let ri = 0; ri < rowsSpec.length; ri++) {
        const r = rowsSpec[ri]
        for (let i = done; i < Math.min(writes, done + 50); i++) {
          const s = performance.now()
          await r.write(i)
          logs[ri].push(performance.now() - s)
        }
      }
    }
    const wallMs = performance.now() - t0
    const other = (machineBusyMs() - busy0 - (cpuMs(null) - own0)) / wallMs * 100
    const rows = rowsSpec.map((r, i) => {
      const s = logs[i].summary()
      return [r.label, String(s.n), fmtUs(s.p50Us), fmtUs(s.p99Us), fmtUs(s.meanUs), fmtUs(s.maxUs)]
    })
    process.stdout.write(renderTable(['write', 'n', 'p50 µs', 'p99 µs', 'mean µs', 'max µs'], rows))
    const p50 = rowsSpec.map((_, i) => logs[i].summary().p50Us)
    process.stdout.write(`\nfdatasync adds (p50): ${fmtUs(p50[1] - p50[0])} µs at 1 key, ${fmtUs(p50[3] - p50[2])} µs at 10 keys; ` +
      `other processes used ${other.toFixed(0)}% of a core meanwhile\n`)
  } finally {
    await file.close()
    await dsync.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------
// 3. want -> grant between two real processes

async function rttPart (): Promise<void> {
  const tmp = mkdtempSync(path.join(values.dir ?? os.tmpdir(), 'quotad-rtt-bench-'))
  // The same build with its data dirs on tmpfs, where fdatasync costs next to nothing: splits what the journal adds into
  // the disk's flush and the rest of the code path (the extra writes, thread-pool hops and awaits).
  const shm = values['no-tmpfs'] !== true && existsSync('/dev/shm') ? mkdtempSync('/dev/shm/quotad-rtt-bench-') : null
  process.stdout.write(`\n## 3. want -> grant round trip, two real quotad processes (a, b) on loopback, data dirs in ${tmp}${shm !== null ? ` (tmpfs row: ${shm})` : ''}\n` +
    '   c=1 acquire at a of a fresh glob key homed at b (a holds none: the acquire waits for a want to b and its grant), and of a key a holds (no transfer); ' +
    `${rttTrials} trials x ${rttKeys} acquires per row, rows alternating, every pair running throughout\n\n`)
  const pairs: Array<{ p: RttPair, name: string }> = []
  try {
    pairs.push({ p: await startPair(path.join(tmp, 'after'), 'after', NEW_CLI), name: `after (${describe(NEW_ROOT)})` })
    if (shm !== null) pairs.push({ p: await startPair(path.join(shm, 'after'), 'tmpfs', NEW_CLI), name: 'after, data dirs on tmpfs' })
    if (oldCli !== undefined) pairs.push({ p: await startPair(path.join(tmp, 'before'), 'before', oldCli), name: `before (${describe(oldRoot as string)})` })
    for (const { p } of pairs) { await rttTrial(p, 100); await rttTrial(p, 100, true) } // warm-up (JIT, connections)
    const rows = pairs.flatMap(x => [{ ...x, local: false }, { ...x, local: true }])
    const pooled = rows.map(() => new LatencyLog())
    const trialP50 = rows.map(() => [] as number[])
    const denied = rows.map(() => 0)
    const other: number[] = []
    const allPids = pairs.flatMap(x => x.p.procs.map(y => y.pid))
    for (let t = 0; t < rttTrials; t++) {
      for (let i = 0; i < rows.length; i++) {
        const busy0 = machineBusyMs()
        const own0 = cpuMs(null) + allPids.reduce((a, pid) => a + cpuMs(pid), 0)
        const t0 = performance.now()
        const r = await rttTrial(rows[i].p, rttKeys, rows[i].local)
        const own = cpuMs(null) + allPids.reduce((a, pid) => a + cpuMs(pid), 0) - own0
        other.push((machineBusyMs() - busy0 - own) / (performance.now() - t0) * 100)
        const trial = new LatencyLog(rttKeys)
        for (const ms of r.samples) { trial.push(ms); pooled[i].push(ms) }
        trialP50[i].push(trial.summary().p50Us)
        denied[i] += r.denied
      }
    }
    process.stdout.write(renderTable(['build', 'acquire at a', 'n', 'denied', 'median of trial p50 µs', 'pooled p50 µs', 'p99 µs', 'mean µs', 'max µs'],
      rows.map(({ name, local }, i) => {
        const s = pooled[i].summary()
        return [name, local ? 'local key (no transfer)' : 'want -> grant', String(s.n), String(denied[i]), fmtUs(median(trialP50[i])),
          fmtUs(s.p50Us), fmtUs(s.p99Us), fmtUs(s.meanUs), fmtUs(s.maxUs)]
      })))
    const base = rows.findIndex(r => r.p.label === 'before' && !r.local)
    const d = (x: number, y: number): string => `${x >= y ? '+' : '-'}${fmtUs(Math.abs(x - y))}`
    for (let i = 0; i < rows.length && base >= 0; i++) {
      if (i === base || rows[i].local) continue
      const a = pooled[i].summary()
      const b = pooled[base].summary()
      const ma = median(trialP50[i])
      const mb = median(trialP50[base])
      process.stdout.write(`\nwant -> grant, ${rows[i].p.label === 'tmpfs' ? 'after on tmpfs' : 'after'} / before: median of trial p50 ${fmtRatio(ma / mb)} (${d(ma, mb)} µs), ` +
        `pooled p50 ${fmtRatio(a.p50Us / b.p50Us)} (${d(a.p50Us, b.p50Us)} µs), p99 ${fmtRatio(a.p99Us / b.p99Us)} (${d(a.p99Us, b.p99Us)} µs), ` +
        `mean ${fmtRatio(a.meanUs / b.meanUs)} (${d(a.meanUs, b.meanUs)} µs)`)
    }
    process.stdout.write(`\nother processes used ${median(other).toFixed(0)}% of a core during the median trial (max ${Math.max(...other).toFixed(0)}%)\n`)
  } finally {
    await Promise.all(pairs.map(async x => await stopPair(x.p)))
    rmSync(tmp, { recursive: true, force: true })
    if (shm !== null) rmSync(shm, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------

printMachine(machineInfo())
process.stdout.write(`after: ${describe(NEW_ROOT)} (${NEW_CLI})\nbefore: ${oldRoot === undefined ? 'none (--old not given)' : `${describe(oldRoot)} (${oldCli as string})`}\n`)
if (values['no-sim'] !== true) await simPart()
if (values['no-fsync'] !== true) await fsyncPart()
if (values['no-rtt'] !== true) await rttPart()
printMachine(machineInfo())
