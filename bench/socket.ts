/**
 * The single-node decision benchmark: decisions/s and p50/p99/p999 latency of
 * `acquire` over the Unix socket, against the real alternative on the same
 * machine (redis-server + rate-limiter-flexible's RateLimiterRedis + ioredis).
 *
 * Workloads (rows), each on 1,000 keys visited in a cycle:
 * - c=1, 16, 64, 256: C closed-loop workers, one acquire per round trip.
 * - batch: C batches of B items in flight (quotad's batch op). The peer has no
 *   batch op; its row fires the B consumes at once and awaits them all.
 * - deny50%: half the keys are already spent (limit 1 per day), half are not,
 *   so every other decision is a denial.
 *
 * Method: one warm-up run, then trials alternating quotad / peer (so drift on
 * a noisy machine hits both alike); each number printed is the median over
 * the trials. Before the main run the peer is tried in several wirings and
 * the fastest is used. See bench/README.md for how to read the output.
 *
 * Run: npx tsc -p . && node dist/bench/socket.js [--quick] [--json FILE] [--help]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { machineInfo, printMachine } from './lib/machine.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { runTrial, type Operation, type TrialResult } from './lib/load.js'
import { detailTable, mainTable, noisy, NOISY_PCT, summarize, targets, type RowResult } from './lib/report.js'
import { keySet, KEYS, peerOp, quotadOp, workloads, type Workload } from './lib/workloads.js'
import {
  describePeer, ensureRedisServer, Peer, PEER_CONFIGS, RedisServer, type PeerConfig, type PeerRule
} from './lib/redis-peer.js'
import { startDaemonProcess, startInProcess, writeBenchCluster, type BenchRule, type QuotadTarget } from './lib/quotad-target.js'
import { freePort } from './lib/cluster-harness.js'
import { geomean } from './lib/stats.js'
import { fmtInt, fmtPct, fmtRatio, renderTable } from './lib/table.js'
import { intFlag } from '../src/cli/common.js'

/** The `--metrics` scraper's program: GET the URL every second, print "ok" per answer. */
const SCRAPER = "setInterval(() => { fetch(process.argv[1]).then(async r => { await r.text(); if (r.ok) console.log('ok') }, () => {}) }, 1000)"

const HELP = `usage: node dist/bench/socket.js [options]

  --quick            ~30 s run (short trials) instead of ~2.5 min
  --json FILE        also write every trial and the medians as JSON
  --trials N         trials per cell and side (default 5; --quick 3)
  --trial-ms MS      length of one trial (default 1500; --quick 450)
  --warmup-ms MS     untimed run before each cell (default 500; --quick 200)
  --conns N          quotad client connections, worker w uses w % N (default 1)
  --batch-size N     items per batch frame (default 100)
  --peer NAME        use this peer wiring, skip the calibration (see below)
  --no-peer          quotad only (for profiling)
  --no-deny          skip the 50%-denied rows
  --only LIST        run only these rows, e.g. c1,c16,batch-c8,deny-c16
  --in-process       run the daemon inside this process (profiling only:
                     shares one event loop with the load generator)
  --cpu-prof DIR     run the daemon with node --cpu-prof, profile into DIR
  --node-arg ARG     extra node flag for the daemon process (repeatable),
                     e.g. --node-arg=--max-semi-space-size=32
  --wait-quiet S     before the calibration and before each row, wait up to S
                     seconds for other processes to use < 25% of a core for
                     2 s in a row (for shared machines; default 0: don't wait)
  --keep-tmp         keep the temp dir (cluster file, sockets)
  --metrics          run the daemon with --http and scrape /metrics every second
                     (compare with a run without it: metrics must cost nothing)

peer wirings: ${PEER_CONFIGS.map(c => `"${c.name}"`).join(', ')}
`


const RULES: BenchRule[] = [
  { name: 'bench', match: 'bench:*', limit: 1_000_000_000, per: '1s', algorithm: 'fixed-window' },
  { name: 'bench-deny', match: 'benchdeny:*', limit: 1, per: '1d', algorithm: 'fixed-window' }
]
/** The same two rules for the peer, by index: 0 = bench, 1 = bench-deny. */
const PEER_RULES: PeerRule[] = [
  { keyPrefix: 'rlflx', points: 1_000_000_000, durationSec: 1 },
  { keyPrefix: 'rlflxdeny', points: 1, durationSec: 86_400 }
]

interface Options {
  quick: boolean
  json: string | undefined
  trials: number
  trialMs: number
  warmupMs: number
  conns: number
  batchSize: number
  peer: PeerConfig | null
  noPeer: boolean
  noDeny: boolean
  only: Set<string> | null
  inProcess: boolean
  cpuProf: string | undefined
  nodeArgs: string[]
  waitQuietS: number
  keepTmp: boolean
  /** Run the daemon with its metrics listener on, scraped every second (to show metrics cost the decisions nothing). */
  metrics: boolean
}

function options (argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      json: { type: 'string' },
      trials: { type: 'string' },
      'trial-ms': { type: 'string' },
      'warmup-ms': { type: 'string' },
      conns: { type: 'string' },
      'batch-size': { type: 'string' },
      peer: { type: 'string' },
      'no-peer': { type: 'boolean' },
      'no-deny': { type: 'boolean' },
      only: { type: 'string' },
      'in-process': { type: 'boolean' },
      'cpu-prof': { type: 'string' },
      'node-arg': { type: 'string', multiple: true },
      'keep-tmp': { type: 'boolean' },
      'wait-quiet': { type: 'string' },
      metrics: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); process.exit(0) }
  const quick = values.quick === true
  const int = intFlag
  let peer: PeerConfig | null = null
  if (values.peer !== undefined) {
    peer = PEER_CONFIGS.find(c => c.name === values.peer) ?? null
    if (peer === null) throw new Error(`--peer must be one of ${PEER_CONFIGS.map(c => `"${c.name}"`).join(', ')}`)
  }
  if (values['in-process'] === true && values['cpu-prof'] !== undefined) {
    throw new Error('--cpu-prof profiles the daemon process; with --in-process run node --cpu-prof dist/bench/socket.js instead')
  }
  return {
    quick,
    json: values.json,
    trials: int('trials', values.trials, quick ? 3 : 5, 1),
    trialMs: int('trial-ms', values['trial-ms'], quick ? 450 : 1500, 50),
    warmupMs: int('warmup-ms', values['warmup-ms'], quick ? 200 : 500, 0),
    conns: int('conns', values.conns, 1, 1),
    batchSize: int('batch-size', values['batch-size'], 100, 1),
    peer,
    noPeer: values['no-peer'] === true,
    noDeny: values['no-deny'] === true,
    only: values.only === undefined ? null : new Set(values.only.split(',').map(s => s.trim())),
    inProcess: values['in-process'] === true,
    cpuProf: values['cpu-prof'],
    nodeArgs: values['node-arg'] ?? [],
    waitQuietS: int('wait-quiet', values['wait-quiet'], 0, 0),
    keepTmp: values['keep-tmp'] === true,
    metrics: values.metrics === true
  }
}

// ---------------------------------------------------------------------------
// Cells: warm-up, alternating trials, medians

interface Side {
  name: string
  op: Operation
  pid: number | null
  trials: TrialResult[]
}

async function runCell (w: Workload, sides: Side[], opts: Options): Promise<void> {
  const itemsPerOp = w.kind === 'batch' ? opts.batchSize : 1
  const spec = (s: Side, durationMs: number) => ({ concurrency: w.concurrency, durationMs, itemsPerOp, op: s.op, serverPid: s.pid })
  for (const s of sides) if (opts.warmupMs > 0) await runTrial(spec(s, opts.warmupMs))
  for (let t = 0; t < opts.trials; t++) {
    for (const s of sides) {
      const r = await runTrial(spec(s, opts.trialMs))
      s.trials.push(r)
      if (r.ops === 0) throw new Error(`${s.name} ${w.label}: no operation completed (${r.errors} errors; first: ${r.firstError ?? 'none'})`)
    }
  }
}

/** Spend every deny key once on both sides, so in deny50 runs those keys are denied from the first request. */
async function spendDenyKeys (clients: QuotadClient[], peer: Peer | null): Promise<void> {
  const { keys, peerRule } = keySet('deny50')
  const deny = keys.filter((_, i) => peerRule[i] === 1)
  await clients[0].batch(deny.map(key => ({ key })))
  if (peer !== null) await Promise.all(deny.map(k => peer.consume(1, k, 0)))
}

// ---------------------------------------------------------------------------
// Peer calibration: which wiring is fastest for the peer on this machine

interface Calibration { config: PeerConfig, c16: number, c256: number, score: number }

async function calibratePeer (socketPath: string, opts: Options, pid: number): Promise<Calibration[]> {
  const ms = opts.quick ? 250 : 1000
  const out: Calibration[] = []
  const w = (c: number): Workload => ({ id: `cal-c${c}`, label: `c=${c}`, kind: 'single', concurrency: c, mix: 'allow' })
  for (const config of PEER_CONFIGS) {
    const peer = await Peer.connect(socketPath, config, PEER_RULES)
    try {
      await runTrial({ concurrency: 64, durationMs: opts.quick ? 100 : 300, itemsPerOp: 1, op: peerOp(w(64), peer, 1), serverPid: pid })
      const c16 = (await runTrial({ concurrency: 16, durationMs: ms, itemsPerOp: 1, op: peerOp(w(16), peer, 1), serverPid: pid })).decisionsPerSec
      const c256 = (await runTrial({ concurrency: 256, durationMs: ms, itemsPerOp: 1, op: peerOp(w(256), peer, 1), serverPid: pid })).decisionsPerSec
      out.push({ config, c16, c256, score: geomean([c16, c256]) })
    } finally {
      await peer.close()
    }
  }
  return out
}

// ---------------------------------------------------------------------------
// Output

function packageVersion (name: string): string {
  try {
    const require = createRequire(import.meta.url)
    let dir = path.dirname(require.resolve(name))
    while (dir !== path.dirname(dir)) {
      try {
        const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string, version?: string }
        if (pkg.name === name) return pkg.version ?? '?'
      } catch {
        // no package.json here; go up
      }
      dir = path.dirname(dir)
    }
  } catch {
    // not resolvable
  }
  return '?'
}

function gitCommit (): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', cwd: path.dirname(new URL(import.meta.url).pathname) })
  return r.status === 0 ? r.stdout.trim() : 'unknown'
}

/** CPU busy on the whole machine over `ms`, in % of one core, before we start anything. */
async function otherLoad (ms: number): Promise<number> {
  const b0 = machineBusyMs()
  const own0 = cpuMs(null)
  const t0 = performance.now()
  await sleep(ms)
  const elapsed = performance.now() - t0
  return Math.max(0, (machineBusyMs() - b0 - (cpuMs(null) - own0)) / elapsed * 100)
}

/**
 * Wait (at most `maxS` seconds) until other processes have used less than
 * NOISY_PCT of a core for 2 s in a row. Returns the seconds waited, or -1 if
 * the machine never got quiet.
 */
async function waitQuiet (maxS: number): Promise<number> {
  if (maxS <= 0) return 0
  const t0 = performance.now()
  let quiet = 0
  while (performance.now() - t0 < maxS * 1000) {
    quiet = await otherLoad(500) < NOISY_PCT ? quiet + 1 : 0
    if (quiet >= 4) return (performance.now() - t0) / 1000
  }
  return -1
}

function noteQuiet (waited: number): string {
  return waited < 0 ? ' (machine did not get quiet)' : waited >= 3 ? ` (waited ${waited.toFixed(0)} s for quiet)` : ''
}

// ---------------------------------------------------------------------------

async function main (): Promise<void> {
  const opts = options(process.argv.slice(2))
  const rowsToRun = workloads(opts)
  const machine = machineInfo()
  printMachine(machine)
  const idleLoad = await otherLoad(1000)
  process.stdout.write(`machine busy before start: ${fmtPct(idleLoad)} of ${os.cpus().length * 100}% (other processes; high values make every number below noisy)\n`)

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'quotad-bench-'))
  let target: QuotadTarget | null = null
  let scraper: ChildProcess | undefined
  let scrapes = 0
  let redis: RedisServer | null = null
  const clients: QuotadClient[] = []
  let peer: Peer | null = null
  try {
    const cluster = await writeBenchCluster(tmp, RULES)
    const nodeArgs = [...opts.nodeArgs, ...(opts.cpuProf !== undefined ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(opts.cpuProf)] : [])]
    const httpPort = opts.metrics ? await freePort() : 0
    target = opts.inProcess ? await startInProcess(cluster) : await startDaemonProcess(cluster, nodeArgs, opts.metrics ? ['--http', `127.0.0.1:${httpPort}`] : [])
    if (opts.metrics) {
      // A scrape every second, far more often than Prometheus's usual 15 s, from a process of its own
      // as Prometheus would be: scraping from this one would slow the load generator, not the daemon.
      scraper = spawn(process.execPath, ['-e', SCRAPER, `http://127.0.0.1:${httpPort}/metrics`], { stdio: ['ignore', 'pipe', 'inherit'] })
      scraper.stdout?.on('data', (b: Buffer) => { scrapes += b.toString().split('\n').filter(l => l === 'ok').length })
      process.stdout.write(`metrics on: /metrics scraped every second at 127.0.0.1:${httpPort}\n`)
    }
    for (let i = 0; i < opts.conns; i++) clients.push(await QuotadClient.connect({ socketPath: target.socketPath, timeoutMs: 10_000 }))

    let calibration: Calibration[] = []
    let peerConfig: PeerConfig | null = null
    if (!opts.noPeer) {
      redis = await RedisServer.start(ensureRedisServer(), tmp)
      if (opts.peer !== null) {
        peerConfig = opts.peer
      } else {
        const waited = await waitQuiet(opts.waitQuietS)
        process.stdout.write(`calibrating the peer wiring (c=16 and c=256, best geometric mean wins)...${noteQuiet(waited)}\n`)
        calibration = await calibratePeer(redis.socketPath, opts, redis.pid)
        calibration.sort((a, b) => b.score - a.score)
        peerConfig = calibration[0].config
      }
      peer = await Peer.connect(redis.socketPath, peerConfig, PEER_RULES)
      await peer.flush()
    }

    const commit = gitCommit()
    process.stdout.write(
      `quotad:  ${opts.inProcess ? 'IN-PROCESS (same event loop as the load generator: for profiling, not comparable)' : `daemon process pid ${String(target.pid)}: node ${nodeArgs.map(a => a + ' ').join('')}dist/src/cli/quotad.js --config ${cluster.file} --node a`}` +
      '\n' +
      `         commit ${commit}; QuotadClient, ${opts.conns} connection${opts.conns === 1 ? '' : 's'} shared by all workers (requests pipelined; worker w uses connection w % ${opts.conns})\n` +
      `         rules: bench:* fixed-window 1e9 per 1s; benchdeny:* fixed-window 1 per 1d\n` +
      (peerConfig !== null && redis !== null
        ? `peer:    redis-server ${redis.version} (pid ${redis.pid}, unix socket, --save '' --appendonly no), rate-limiter-flexible ${packageVersion('rate-limiter-flexible')}, ioredis ${packageVersion('ioredis')}\n` +
          `         ${describePeer(peerConfig)}${opts.peer !== null ? ' (chosen with --peer)' : ' (fastest in calibration)'}\n` +
          `         RateLimiterRedis points 1e9 duration 1 s (keyPrefix rlflx); deny rows: points 1 duration 86400 s (keyPrefix rlflxdeny)\n`
        : 'peer:    not run (--no-peer)\n') +
      `load:    closed loop in this process; ${KEYS} keys (bench:0..999) taken in a shared cycle; ` +
      `${opts.trials} trials x ${opts.trialMs} ms after a ${opts.warmupMs} ms warm-up per cell, trials alternate quotad/peer; medians shown\n` +
      `         batch rows: quotad sends one batch frame of ${opts.batchSize} items; the peer fires ${opts.batchSize} consumes at once and awaits all; ` +
      `dec/s counts items, latency is per batch\n\n`
    )
    if (calibration.length > 0) {
      process.stdout.write('peer calibration (decisions/s, one trial each):\n')
      process.stdout.write(renderTable(['wiring', 'c=16', 'c=256', 'geomean'],
        calibration.map(c => [c.config.name, fmtInt(c.c16), fmtInt(c.c256), fmtInt(c.score)])))
      process.stdout.write('\n')
    }

    const results: RowResult[] = []
    let denySpent = false
    for (const w of rowsToRun) {
      if (w.mix === 'deny50' && !denySpent) {
        await spendDenyKeys(clients, peer)
        denySpent = true
      }
      const q: Side = { name: 'quotad', op: quotadOp(w, clients, opts.batchSize), pid: target.pid, trials: [] }
      const p: Side | null = peer === null || redis === null ? null : { name: 'peer', op: peerOp(w, peer, opts.batchSize), pid: redis.pid, trials: [] }
      const waited = await waitQuiet(opts.waitQuietS)
      process.stdout.write(`running ${w.label}...${noteQuiet(waited)}`)
      await runCell(w, p === null ? [q] : [q, p], opts)
      const qs = summarize(q.trials)
      const ps = p === null ? null : summarize(p.trials)
      const row: RowResult = {
        workload: w,
        itemsPerOp: w.kind === 'batch' ? opts.batchSize : 1,
        quotad: { summary: qs, trials: q.trials },
        peer: p === null || ps === null ? null : { summary: ps, trials: p.trials },
        ratio: ps === null ? NaN : qs.decisionsPerSec / ps.decisionsPerSec
      }
      results.push(row)
      process.stdout.write(` quotad ${fmtInt(qs.decisionsPerSec)}/s` + (ps === null ? '' : `, peer ${fmtInt(ps.decisionsPerSec)}/s (${fmtRatio(row.ratio)})`) + '\n')
      for (const [name, s] of [['quotad', qs], ['peer', ps]] as const) {
        if (s !== null && s.errors > 0) process.stdout.write(`  ${name}: ${s.errors} errors, first: ${s.firstError ?? ''}\n`)
      }
    }

    process.stdout.write('\nresults (median of trials; µs per operation: one acquire, or one whole batch):\n')
    process.stdout.write(mainTable(results))
    if (results.some(noisy)) {
      process.stdout.write(`* other processes used more than ${NOISY_PCT}% of a core during these trials (median; see "other CPU" below): treat as noisy\n`)
    }
    process.stdout.write('\nper row: share of decisions denied, errors, CPU in % of one core (client = this process: load generator + client library;\n' +
      'server = quotad daemon or redis-server; other = everything else on the machine, i.e. noise; the machine has ' + String(os.cpus().length * 100) + '%):\n')
    process.stdout.write(detailTable(results))
    const ts = targets(results)
    if (ts.length > 0) {
      process.stdout.write(opts.inProcess ? '\ntargets (IN-PROCESS run: not valid for the issue, for profiling only):\n' : '\ntargets:\n')
      for (const t of ts) process.stdout.write(`  ${t.met === null ? '[ ? ]' : t.met ? '[met]' : '[MISSED]'} ${t.name}: ${t.value} (goal ${t.goal})\n`)
    }
    if (opts.json !== undefined) {
      writeFileSync(opts.json, JSON.stringify({
        machine,
        commit,
        config: {
          mode: target.mode,
          keys: KEYS,
          trials: opts.trials,
          trialMs: opts.trialMs,
          warmupMs: opts.warmupMs,
          quotadConnections: opts.conns,
          batchSize: opts.batchSize,
          rules: RULES,
          peer: peerConfig === null ? null : { ...peerConfig, redis: redis?.version, rateLimiterFlexible: packageVersion('rate-limiter-flexible'), ioredis: packageVersion('ioredis') }
        },
        machineBusyBeforeStartPct: idleLoad,
        peerCalibration: calibration.map(c => ({ wiring: c.config.name, c16: c.c16, c256: c.c256, geomean: c.score })),
        rows: results,
        targets: ts
      }, null, 2) + '\n')
      process.stdout.write(`\nwrote ${opts.json}\n`)
    }
  } finally {
    scraper?.kill()
    if (opts.metrics) process.stdout.write(`metrics: ${scrapes} scrapes answered during the run\n`)
    await Promise.all(clients.map(c => c.close()))
    await peer?.close()
    await target?.stop()
    await redis?.stop()
    if (!opts.keepTmp) rmSync(tmp, { recursive: true, force: true })
    else process.stdout.write(`kept ${tmp}\n`)
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})
