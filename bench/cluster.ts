/**
 * The cluster benchmark: real local quotad clusters (3 and 5 processes over
 * libp2p on loopback) under the same open-loop load traces, against a static
 * even split computed from the same traces.
 *
 * Per workload and cluster size it reports:
 * - overshoot: max over windows of (allowed in the window - limit); must be 0
 *   in hard mode (for token-bucket: the largest proven excess over the
 *   central envelope burst + rate x t);
 * - utilization: allowed / min(demand, limit), summed over the full windows
 *   (the first, partial window with the start-up and the last partial one are
 *   skipped), and the same for a static split (limit / N per node, no
 *   sharing) computed from the recorded per-node per-window demand;
 * - for the moving hot spot: time until the new hot node's admitted rate is
 *   >= 90% of min(its demand, limit) in 100 ms bins (and stays there);
 * - control traffic per node per second: libp2p TCP bytes (from ss), gossip
 *   messages and transfer requests (from each node's status counters);
 * - the latency of a local decision while gossip runs (c=1 probe on node
 *   `a`), interleaved with the same probe against a single-node daemon (no
 *   cluster layer), in the same run.
 *
 * Run: npx tsc -p . && node dist/bench/cluster.js [--quick] [--json FILE] [--help]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { startNode, ssAvailable, tcpSnapshot, waitForPeers, writeClusterFile, type NodeProc } from './lib/cluster-harness.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { LatencyLog, type LatencySummary } from './lib/stats.js'
import { fmtUs } from './lib/table.js'
import { intFlag } from '../src/cli/common.js'
import { type Result, analyze, rawRecords, traffic } from './lib/cluster-analysis.js'
import { detailTable, fmtMs, fmtTraffic, fmtUtil, mainTable, targets } from './lib/cluster-output.js'
import {
  ALLOWED, BIN_MS, type Context, DEMAND, DENIED, FAILED, FOLLOW_BINS, FOLLOW_FRACTION, HOT_SHARE, type NodeStatus, type Options, PROBE_LIMIT,
  Records, type RunData, type Snapshot, WORKLOAD_IDS, type Workload, type WorkloadId, ZIPF_S, buildWorkloads, nodeNames, rules
} from './lib/cluster-trace.js'

const HELP = `usage: node dist/bench/cluster.js [options]

  --quick            ~1.5 min run (5 s per workload, hot spot moves every 2 s)
  --no-idle          skip the idle traffic measurement per cluster size (3 s; --quick 2 s)
  --json FILE        also write settings, per-window figures and results as JSON
  --raw FILE         also write every request (node, sent, received, result, resetMs) as JSON
  --nodes LIST       cluster sizes (default 3,5)
  --gossip-ms MS     cluster gossipIntervalMs (default 250, the shipped default)
  --duration-ms MS   length of one workload's trace (default 18000; --quick 5000)
  --move-ms MS       the hot spot moves this often (default 3000; --quick 2000)
  --limit N          the rules' limit per window (default 200)
  --per-ms MS        the window (default 1000)
  --seed N           seed for Zipf ranks and hot-spot moves (default 1)
  --tick-ms MS       load generator tick (default 5)
  --probe-ms MS      gap between c=1 latency probes (default 10; sides alternate)
  --only LIST        workloads: uniform,zipf,moving,moving-1x,over,tb-zipf (default all)
  --log-level L      quotad log level (default warn)
  --keep-tmp         keep the temp dir (cluster files, data dirs)
`

function options (argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      json: { type: 'string' },
      raw: { type: 'string' },
      nodes: { type: 'string' },
      'gossip-ms': { type: 'string' },
      'duration-ms': { type: 'string' },
      'move-ms': { type: 'string' },
      limit: { type: 'string' },
      'per-ms': { type: 'string' },
      seed: { type: 'string' },
      'tick-ms': { type: 'string' },
      'probe-ms': { type: 'string' },
      only: { type: 'string' },
      'log-level': { type: 'string' },
      'keep-tmp': { type: 'boolean' },
      'no-idle': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); process.exit(0) }
  const quick = values.quick === true
  const int = intFlag
  const nodes = (values.nodes ?? '3,5').split(',').map(s => int('nodes', s.trim(), 0, 2))
  const only = new Set<WorkloadId>()
  for (const s of (values.only ?? WORKLOAD_IDS.join(',')).split(',')) {
    const id = s.trim() as WorkloadId
    if (!WORKLOAD_IDS.includes(id)) throw new Error(`--only: unknown workload "${s}" (known: ${WORKLOAD_IDS.join(', ')})`)
    only.add(id)
  }
  const perMs = int('per-ms', values['per-ms'], 1000, 100)
  return {
    quick,
    json: values.json,
    raw: values.raw,
    nodes,
    gossipMs: int('gossip-ms', values['gossip-ms'], 250, 10),
    durationMs: int('duration-ms', values['duration-ms'], quick ? 5000 : 18_000, 3 * perMs),
    moveMs: int('move-ms', values['move-ms'], quick ? 2000 : 3000, 500),
    limit: int('limit', values.limit, 200, 10),
    perMs,
    seed: int('seed', values.seed, 1, 0),
    tickMs: int('tick-ms', values['tick-ms'], 5, 1),
    probeMs: int('probe-ms', values['probe-ms'], 10, 1),
    only,
    logLevel: values['log-level'] ?? 'warn',
    keepTmp: values['keep-tmp'] === true,
    idle: values['no-idle'] !== true
  }
}

async function snapshot (ctx: Context): Promise<Snapshot> {
  const statuses = await Promise.all(ctx.clients.map(async c => await c.status() as NodeStatus))
  const pids = ctx.procs.map(p => p.pid)
  return {
    at: performance.now(),
    statuses,
    tcp: tcpSnapshot(pids),
    cpu: {
      bench: cpuMs(null),
      nodes: pids.reduce((a, p) => a + cpuMs(p), 0),
      single: cpuMs(ctx.single.pid),
      machine: machineBusyMs()
    }
  }
}


/** Wait until the wall clock is `phase` ms into a window. */
async function alignTo (perMs: number, phase: number): Promise<void> {
  const now = Date.now()
  let wait = (phase - (now % perMs) + perMs) % perMs
  if (wait < 200) wait += perMs
  await sleep(wait - 20)
  while (Date.now() % perMs < phase || Date.now() % perMs > phase + 50) await sleep(1)
}

/**
 * Run one trace open-loop: every tick, each node is sent the requests its
 * rate owes since the last tick (fractions carry over), whether or not
 * earlier replies came back. Meanwhile a c=1 probe alternates between node a
 * and the single-node daemon, and node a's load is mirrored to the single-node
 * daemon so both serve the same request stream.
 */
async function runTrace (w: Workload, ctx: Context): Promise<RunData> {
  const { opts, n, clients } = ctx
  const rec = new Records()
  const inflight: Array<Promise<void>> = []
  let mirrorErrors = 0
  await alignTo(opts.perMs, Math.floor(opts.perMs / 2))
  const before = await snapshot(ctx)
  const owed = new Array<number>(n).fill(0)
  const tickGaps: number[] = []
  const t0 = Date.now()
  const p0 = performance.now()
  let last = p0
  let done = false

  const send = (i: number): void => {
    const idx = rec.add(i, Date.now())
    inflight.push(clients[i].acquire(w.key).then(d => {
      rec.recvAt[idx] = Date.now()
      rec.resetMs[idx] = d.resetMs
      rec.result[idx] = d.allowed ? ALLOWED : DENIED
    }, (err: unknown) => {
      rec.recvAt[idx] = Date.now()
      rec.result[idx] = FAILED
      rec.firstError ??= err instanceof Error ? err.message : String(err)
    }))
    if (i === 0) inflight.push(ctx.mirror.acquire(w.key).then(() => {}, () => { mirrorErrors++ }))
  }

  const probe = { cluster: new LatencyLog(1 << 12), single: new LatencyLog(1 << 12), errors: 0 }
  const prober = (async () => {
    let k = 0
    while (!done) {
      await sleep(opts.probeMs)
      if (done) break
      const side = k++ % 2 === 0 ? 'cluster' : 'single'
      const c = side === 'cluster' ? ctx.probeCluster : ctx.probeSingle
      const t = performance.now()
      try {
        await c.acquire('probe')
        const ms = performance.now() - t
        probe[side].push(ms)
        ctx.pooled[side].push(ms)
      } catch {
        probe.errors++
      }
    }
  })()

  await new Promise<void>(resolve => {
    const tick = (): void => {
      const now = performance.now()
      tickGaps.push(now - last)
      const elapsed = now - p0
      const dt = now - last
      last = now
      if (elapsed >= opts.durationMs) { resolve(); return }
      const rates = w.rates(elapsed)
      for (let i = 0; i < n; i++) {
        owed[i] += rates[i] * dt / 1000
        while (owed[i] >= 1) { owed[i] -= 1; send(i) }
      }
      setTimeout(tick, opts.tickMs)
    }
    tick()
  })
  const t1 = Date.now()
  done = true
  await Promise.all(inflight)
  await prober
  const after = await snapshot(ctx)
  return { records: rec, t0, t1, probe, mirrorErrors, tickGaps, before, after }
}


async function main (): Promise<void> {
  const opts = options(process.argv.slice(2))
  const machine = machineInfo()
  printMachine(machine)
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'quotad-cluster-bench-'))
  const started: NodeProc[] = []
  const clients: QuotadClient[] = []
  const results: Array<{ n: number, results: Result[], pooled: { cluster: LatencySummary, single: LatencySummary }, idle: Result['perNodePerSec'] | null }> = []
  const t0 = performance.now()
  let critical = false
  const raw: Array<Record<string, unknown>> = []
  try {
    process.stdout.write(
      `settings: cluster sizes ${opts.nodes.join(', ')}; gossipIntervalMs ${opts.gossipMs} (tick ${Math.min(50, opts.gossipMs)} ms, defaults otherwise: horizon 1000 ms, ` +
      `rate half-life 500 ms, low water 0.2); seed ${opts.seed}\n` +
      `          rules: one exact key per workload, fixed-window hard, limit ${opts.limit} per ${opts.perMs} ms ` +
      `(token-bucket row: rate ${opts.limit}/${opts.perMs} ms, burst ${opts.limit}, hard); probe key: fixed-window ${PROBE_LIMIT} per 1 s\n` +
      `          each workload: ${opts.durationMs / 1000} s open-loop trace starting mid-window, ${opts.tickMs} ms ticks, one QuotadClient per node; ` +
      `hot spot moves every ${opts.moveMs / 1000} s\n` +
      `          latency: c=1 acquire on the probe key every ${opts.probeMs} ms, alternating node a (which also takes its share of the load) and a ` +
      `single-node daemon (no cluster layer) that is sent a mirror of node a's load; separate connections\n` +
      `          static split: computed from the recorded trace, per node per window min(demand, floor(limit/N)) ` +
      `(token-bucket: one bucket per node with burst/N and rate/N)\n` +
      `          load: a few hundred req/s in total, kept low on purpose: ${Math.max(...opts.nodes)} quotad processes + the bench share ${os.cpus().length} cores\n` +
      `          wire bytes: TCP bytes acked per node process from ss (all libp2p traffic: gossipsub incl. heartbeats, transfers, noise, yamux); ` +
      `${ssAvailable() ? 'ss available' : 'ss NOT available: no byte figures'}\n\n`)

    // The single-node daemon: same rules, no cluster layer.
    const singleDir = path.join(tmp, 'single')
    mkdirSync(singleDir)
    const singleFile = await writeClusterFile(singleDir, 'bench-single', ['s'], rules(opts), opts.gossipMs)
    const single = await startNode(singleFile, 's', opts.logLevel)
    started.push(single)
    const probeSingle = await QuotadClient.connect({ socketPath: single.socketPath, timeoutMs: 5000, reconnect: false })
    const mirror = await QuotadClient.connect({ socketPath: single.socketPath, timeoutMs: 5000, reconnect: false })
    clients.push(probeSingle, mirror)

    for (const n of opts.nodes) {
      const names = nodeNames(n)
      const dir = path.join(tmp, `n${n}`)
      mkdirSync(dir)
      const file = await writeClusterFile(dir, `bench${n}`, names, rules(opts), opts.gossipMs)
      const ts = performance.now()
      const procs = await Promise.all(names.map(async name => await startNode(file, name, opts.logLevel)))
      started.push(...procs)
      const cl = await Promise.all(procs.map(async p => await QuotadClient.connect({ socketPath: p.socketPath, timeoutMs: 5000, reconnect: false })))
      clients.push(...cl)
      await waitForPeers(cl, n - 1)
      const probeCluster = await QuotadClient.connect({ socketPath: procs[0].socketPath, timeoutMs: 5000, reconnect: false })
      clients.push(probeCluster)
      process.stdout.write(`N=${n}: ${n} nodes up and agreeing in ${((performance.now() - ts) / 1000).toFixed(1)} s (pids ${procs.map(p => p.pid).join(', ')})\n`)
      // Warm up both probe paths (JIT, connections).
      for (let i = 0; i < 200; i++) { await probeCluster.acquire('probe'); await probeSingle.acquire('probe') }
      const pooled = { cluster: new LatencyLog(1 << 14), single: new LatencyLog(1 << 14) }
      const ctx: Context = { opts, n, names, procs, single, clients: cl, probeCluster, probeSingle, mirror, pooled }
      let idle: Result['perNodePerSec'] | null = null
      if (opts.idle) {
        const before = await snapshot(ctx)
        await sleep(opts.quick ? 2000 : 3000)
        idle = traffic(ctx, { before, after: await snapshot(ctx) })
        process.stdout.write(`  idle ${opts.quick ? 2 : 3} s (no load, no probes): ${fmtTraffic(idle)}\n`)
      }
      // Warm up the decision and transfer paths (JIT) with the Zipf trace on a key of its own; not reported.
      const zipfTrace = buildWorkloads(n, { ...opts, only: new Set(['zipf']) })[0]
      const warmMs = opts.quick ? 1000 : 2000
      await runTrace({ ...zipfTrace, key: 'warmup' }, { ...ctx, opts: { ...opts, durationMs: warmMs }, pooled: { cluster: new LatencyLog(), single: new LatencyLog() } })
      const rs: Result[] = []
      for (const w of buildWorkloads(n, opts)) {
        process.stdout.write(`  ${w.id}: ${w.description}\n`)
        const run = await runTrace(w, ctx)
        const r = analyze(w, ctx, run)
        rs.push(r)
        if (opts.raw !== undefined) raw.push(rawRecords(w, n, run))
        process.stdout.write(`    util ${fmtUtil(r.utilization)} (static ${fmtUtil(r.staticUtilization)}), overshoot ${r.overshoot}` +
          (r.follow.length > 0 ? `, follow ${r.follow.map(f => fmtMs(f.followMs)).join('/')} ms` : '') +
          `, errors ${r.errors}\n`)
        for (const p of procs) {
          if (p.exited() !== null) throw new Error(`node ${p.name} died: ${p.exited() ?? ''}\n${p.output()}`)
        }
        if (r.overshoot > 0) {
          critical = true
          process.stdout.write(`    CRITICAL: overshoot ${r.overshoot} in hard mode: N=${n}, workload ${w.id}, seed ${opts.seed}, trace start ${new Date(run.t0).toISOString()}, ` +
            `windows ${JSON.stringify(r.overshootWindows)}\n`)
        }
      }
      results.push({ n, results: rs, pooled: { cluster: pooled.cluster.summary(), single: pooled.single.summary() }, idle })
      await Promise.all(cl.map(c => c.close()))
      await probeCluster.close()
      const warnings = procs.map(p => ({ name: p.name, lines: p.output().split('\n').filter(l => l.trim().length > 0) }))
      await Promise.all(procs.map(p => p.stop()))
      for (const w of warnings) {
        if (w.lines.length > 0) process.stdout.write(`  node ${w.name} logged ${w.lines.length} line(s) at ${opts.logLevel}+, last: ${w.lines[w.lines.length - 1].slice(0, 300)}\n`)
      }
      process.stdout.write('\n')
    }

    for (const { n, results: rs, pooled, idle } of results) {
      process.stdout.write(`\nN=${n} nodes (gossip ${opts.gossipMs} ms; limit ${opts.limit} per ${opts.perMs} ms; ${rs[0]?.fullWindows ?? 0} full windows per workload):\n`)
      process.stdout.write(mainTable(rs))
      if (idle !== null) process.stdout.write(`  idle cluster (no load): ${fmtTraffic(idle)}\n`)
      process.stdout.write(`  decision latency pooled over the workloads: N-node p50/p99 ${fmtUs(pooled.cluster.p50Us)} / ${fmtUs(pooled.cluster.p99Us)} µs ` +
        `(n=${pooled.cluster.n}), 1-node ${fmtUs(pooled.single.p50Us)} / ${fmtUs(pooled.single.p99Us)} µs (n=${pooled.single.n})\n`)
      process.stdout.write('details:\n')
      process.stdout.write(detailTable(rs))
    }
    process.stdout.write(
      '\ncolumns: util = allowed / min(demand, limit) over the full windows (token-bucket: / what an exact central token bucket admits on the same trace);\n' +
      '  static util = the static even split on the same trace (computed from the recorded demand, not run);\n' +
      '  overshoot = max over all windows of allowed - limit (must be 0; token-bucket: proven excess over burst + rate x t);\n' +
      `  follow = after each move, ms until the new hot node admits >= ${FOLLOW_FRACTION * 100}% of min(demand, limit) per ${BIN_MS} ms bin for ${FOLLOW_BINS} bins in a row\n` +
      '    (0: never below; the target per bin is what an exact central limiter admits of that node\'s requests, i.e. min(demand, limit) until the window\'s stock is gone);\n' +
      '  wire B/s = TCP bytes sent per node process (ss; every libp2p byte: gossip and transfers are multiplexed on one connection, so not split);\n' +
      '  gossip msg/s = gossip messages published / received per node (transport counters); xfer req/s = transfer requests (wants, grants) sent per node;\n' +
      '  p50/p99 µs = c=1 acquire round trip on node a vs on a single-node daemon, probes interleaved, same machine load.\n')

    const ts = targets(results)
    process.stdout.write('\ntargets:\n')
    for (const t of ts) process.stdout.write(`  ${t.met === null ? '[ ? ]' : t.met ? '[met]' : '[MISSED]'} ${t.name}: ${t.value} (goal ${t.goal})\n`)
    if (critical) process.stdout.write('\nCRITICAL: hard-mode overshoot seen; see the lines marked CRITICAL above\n')
    process.stdout.write(`\ntotal time ${((performance.now() - t0) / 1000).toFixed(0)} s\n`)

    if (opts.raw !== undefined) {
      writeFileSync(opts.raw, JSON.stringify({ settings: { ...opts, only: [...opts.only] }, runs: raw }) + '\n')
      process.stdout.write(`wrote ${opts.raw}\n`)
    }
    if (opts.json !== undefined) {
      writeFileSync(opts.json, JSON.stringify({
        machine,
        settings: { ...opts, only: [...opts.only], rules: rules(opts), demand: DEMAND, zipfS: ZIPF_S, hotShare: HOT_SHARE, binMs: BIN_MS, followFraction: FOLLOW_FRACTION, followBins: FOLLOW_BINS },
        results,
        targets: ts
      }, (_k, v: unknown) => typeof v === 'number' && !Number.isFinite(v) ? String(v) : v, 2) + '\n')
      process.stdout.write(`wrote ${opts.json}\n`)
    }
  } finally {
    await Promise.all(clients.map(c => c.close().catch(() => {})))
    await Promise.all(started.map(p => p.stop()))
    if (!opts.keepTmp) rmSync(tmp, { recursive: true, force: true })
    else process.stdout.write(`kept ${tmp}\n`)
  }
  if (critical) process.exitCode = 2
}

main().catch(err => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})

