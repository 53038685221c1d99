/**
 * One build's `quotad simulate` as a child process, for before/after benches:
 * the bench imports nothing of the other build (its dist may differ in every
 * module), it runs that build's CLI and reads its `--json` lines, one run per
 * seed (src/cli/simulate.ts), and summarizes them.
 */
import { execFile } from 'node:child_process'
import { median } from './stats.js'

/** The fields of one `quotad simulate --json` line that the benches read. */
export interface SimRunJson {
  seed: number
  cluster: { utilization: number, admitted: number }
  static: { utilization: number }
  central: { utilization: number, admitted: number }
  overshoot: number
  stranded: number
  ok: boolean
}

export interface SimSummary {
  runs: number
  utilMedian: number
  utilMin: number
  staticMedian: number
  /** What an exact central limiter admitted minus what the cluster did, median over seeds. */
  lostMedian: number
  overshootMax: number
  strandedMedian: number
  strandedMax: number
  /** Runs whose oracle or audit failed (the CLI exits 2 then). */
  failed: number
}

function run (cli: string, args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, ...args], { maxBuffer: 256 * 2 ** 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : (err as { code?: unknown }).code
      if (typeof code !== 'number') { reject(err); return }
      resolve({ code, stdout, stderr })
    })
  })
}

/** The scenario names that build's `simulate --help` lists. */
export async function simScenarios (cli: string): Promise<Set<string>> {
  const { stdout } = await run(cli, ['simulate', '--help'])
  const line = stdout.split('\n').find(l => l.trim().startsWith('--scenario')) ?? ''
  return new Set(line.replace(/^\s*--scenario NAME\s*/, '').replace(/, or all.*$/, '').split(',').map(s => s.trim()).filter(s => s.length > 0))
}

/** `seeds` hard-mode runs (seeds 1..seeds) of one scenario at `nodes` nodes with that build. Exit 2 (a broken invariant) still returns its runs. */
export async function simulateRuns (cli: string, scenario: string, nodes: number, seeds: number): Promise<SimRunJson[]> {
  const r = await run(cli, ['simulate', '--scenario', scenario, '--nodes', String(nodes), '--seeds', String(seeds), '--mode', 'hard', '--json'])
  if (r.code !== 0 && r.code !== 2) throw new Error(`${cli} simulate ${scenario} N=${nodes} exited ${r.code}: ${r.stderr.slice(0, 2000)}`)
  const runs = r.stdout.split('\n').filter(l => l.startsWith('{')).map(l => JSON.parse(l) as SimRunJson)
  if (runs.length !== seeds) throw new Error(`${cli} simulate ${scenario} N=${nodes}: ${runs.length} runs, expected ${seeds}`)
  return runs
}

export function summarizeRuns (runs: readonly SimRunJson[]): SimSummary {
  const util = runs.map(r => r.cluster.utilization)
  return {
    runs: runs.length,
    utilMedian: median(util),
    utilMin: Math.min(...util),
    staticMedian: median(runs.map(r => r.static.utilization)),
    lostMedian: median(runs.map(r => r.central.admitted - r.cluster.admitted)),
    overshootMax: Math.max(...runs.map(r => r.overshoot)),
    strandedMedian: median(runs.map(r => r.stranded)),
    strandedMax: Math.max(...runs.map(r => r.stranded)),
    failed: runs.filter(r => !r.ok).length
  }
}
