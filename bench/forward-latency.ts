/**
 * What a rule with `"decide": "seeds"` costs a member's client (cluster-protocol.md,
 * "Members and forwarding"): real processes, two seeds and a member over libp2p
 * on loopback, one rule of each kind. A c=1 closed loop of acquires, in
 * trials that alternate: at the member, of the rule decided at the seeds
 * (each acquire a round trip to a seed), and of the same rule decided
 * locally (the member's own tokens, drawn by transfer); and at a seed, of
 * the rule decided at the seeds (a seed decides its own locally); and at
 * the member, of such a rule with `credit` (most acquires admitted from the
 * tokens a seed spent for it: docs/design/2026-11-decide-seeds.md,
 * "Forward credit"). The
 * limits are far above what the probe asks, so the probes are allowed (the
 * member's local rule denies a few while its tokens come by transfer; the
 * rows say how many) and what is timed is the path.
 *
 * Run: npm run build && node dist/bench/forward-latency.js [--trials 6] [--trial-ms 2000]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { QuotadClient } from '@quotad/client'
import { startNode, waitForPeers, writeClusterFile, type NodeProc } from './lib/cluster-harness.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { LatencyLog, median } from './lib/stats.js'
import { intFlag } from '../src/cli/common.js'

const RULES = [
  { name: 'seeds', match: 'fwd', algorithm: 'fixed-window', limit: 1e9, per: '1s', mode: 'hard', decide: 'seeds' },
  { name: 'local', match: 'loc', algorithm: 'fixed-window', limit: 1e9, per: '1s', mode: 'hard' },
  { name: 'credit', match: 'cred', algorithm: 'fixed-window', limit: 1e9, per: '1s', mode: 'hard', decide: 'seeds', credit: '250ms' }
]

interface Path { label: string, client: QuotadClient, key: string }

async function trial (p: Path, ms: number): Promise<{ p50: number, p99: number, n: number, allowed: number }> {
  const log = new LatencyLog(1 << 16)
  const end = performance.now() + ms
  let allowed = 0
  while (performance.now() < end) {
    const t = performance.now()
    if ((await p.client.acquire(p.key)).allowed) allowed++
    log.push(performance.now() - t)
  }
  const s = log.summary()
  return { p50: s.p50Us, p99: s.p99Us, n: s.n, allowed }
}

async function main (): Promise<void> {
  const { values } = parseArgs({ options: { trials: { type: 'string' }, 'trial-ms': { type: 'string' }, help: { type: 'boolean', short: 'h' } } })
  if (values.help === true) { process.stdout.write('usage: node dist/bench/forward-latency.js [--trials 6] [--trial-ms 2000]\n'); return }
  const trials = intFlag('trials', values.trials, 6, 1)
  const trialMs = intFlag('trial-ms', values['trial-ms'], 2000, 100)
  printMachine(machineInfo())
  process.stdout.write(`settings: seeds a, b and member m over libp2p on loopback; c=1 closed-loop acquires, ${trials} trials of ${trialMs / 1000} s per path, alternating\n\n`)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'quotad-forward-bench-'))
  const procs: NodeProc[] = []
  const clients: QuotadClient[] = []
  try {
    const cf = await writeClusterFile(dir, 'fwdbench', ['a', 'b', 'm'], RULES, 250)
    ;(cf.raw.nodes as Array<Record<string, unknown>>)[2].seed = false
    writeFileSync(cf.file, JSON.stringify(cf.raw, null, 2) + '\n')
    for (const n of ['a', 'b', 'm']) procs.push(await startNode(cf, n))
    const connect = async (n: string): Promise<QuotadClient> => {
      const c = await QuotadClient.connect({ socketPath: cf.sockets[n], timeoutMs: 5000, reconnect: false })
      clients.push(c)
      return c
    }
    const [ca, cm] = [await connect('a'), await connect('m')]
    await waitForPeers([ca, await connect('b')], 2)
    await waitForPeers([cm], 2)
    const paths: Path[] = [
      { label: 'member, decide: seeds', client: cm, key: 'fwd' },
      { label: 'member, decide: local', client: cm, key: 'loc' },
      { label: 'seed,   decide: seeds', client: ca, key: 'fwd' },
      { label: 'member, decide: seeds, credit 250ms', client: cm, key: 'cred' }
    ]
    // Warm up every path (JIT, connections, the member's first tokens of the local rule).
    for (const p of paths) await trial(p, 1000)
    const rows = new Map<string, Array<{ p50: number, p99: number }>>()
    for (let i = 0; i < trials; i++) {
      const order = i % 2 === 0 ? paths : [...paths].reverse()
      for (const p of order) {
        const r = await trial(p, trialMs)
        rows.set(p.label, [...(rows.get(p.label) ?? []), r])
        process.stdout.write(`  trial ${i + 1} ${p.label} n=${String(r.n).padStart(6)} (${(100 * r.allowed / r.n).toFixed(0)}% allowed) p50 ${r.p50.toFixed(1).padStart(6)} µs p99 ${r.p99.toFixed(0).padStart(5)} µs\n`)
      }
    }
    process.stdout.write('\n')
    const base = median((rows.get(paths[1].label) ?? []).map(r => r.p50))
    for (const p of paths) {
      const rs = rows.get(p.label) ?? []
      const p50 = median(rs.map(r => r.p50))
      process.stdout.write(`${p.label}: median p50 ${p50.toFixed(1)} µs, p99 ${median(rs.map(r => r.p99)).toFixed(0)} µs (p50 ${(p50 / base).toFixed(2)}x the member's local rule)\n`)
    }
    const m = await cm.status() as { cluster?: { counters?: Record<string, number> } }
    const k = m.cluster?.counters
    process.stdout.write(`member counters: forwarded ${k?.forwarded}, allowed ${k?.forwardAllowed}, failed ${k?.forwardFailed}, admitted from credit ${k?.forwardFromCredit}\n`)
  } finally {
    await Promise.all(clients.map(async c => await c.close().catch(() => {})))
    await Promise.all(procs.map(async p => await p.stop()))
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})
