/**
 * Decision latency of a clustered node against a lone one (issue 13: "the
 * sidecar's first job is a fast local answer").
 *
 * Two scenes, each with real daemon processes:
 * - n3: three seeds a, b, c over real libp2p on loopback, demand on all
 *   three; and a lone daemon (a one-node file: no cluster layer) under the
 *   same demand as node a.
 * - n200: one real seed `a` that a generator process (gossip-gen.ts) joins
 *   as 199 members, each gossiping every interval over real gossipsub
 *   (signed, through the swarm key's pnet and noise), so `a` receives the
 *   gossip volume of a 200-node cluster; and the lone daemon, same demand.
 *
 * The demand (latency-load.ts, a process of its own) is open-loop acquires
 * of the rule's key at `--rate` per node; it runs through both sides'
 * trials, so both see the same machine load. The measured thing is a c=1
 * closed loop of acquires of the rule's key from this process, on node a or
 * on the lone daemon, in trials of `--trial-ms` that alternate sides (ABBA
 * order, so a drift of the machine's load favours neither: the issue's own
 * method). `--order interleaved` asks both sides in turn, request by
 * request, in each trial instead, so both are measured over the same
 * moments; each daemon then idles between its requests (the probe is at the
 * other side), and what that costs a node whose transport thread is busy
 * with 199 peers' gossip shows (bench/results/latency-*.txt).
 * Reported per trial, then per side the median over trials of p50 and
 * p99, and the clustered/lone ratio (target: both within 1.20).
 *
 * The c=1 loop alone asks for more than the rule's 30000/s (it runs at
 * tens of thousands a second), so the window's stock runs out on both sides
 * and part of the probes are denials (the rows say how many); on node a it
 * also outruns a's third of the stock, so a keeps drawing tokens from b and
 * c (wants, grants, journal writes): the node works for the cluster while it
 * answers. `--probe-key probe` measures a key of its own instead (1e9/1s,
 * never exhausted), where a does next to nothing for the cluster.
 *
 * Run: npm run build && node dist/bench/latency.js [--scenes n3,n200] [--trials 8] [--trial-ms 3000] [--help]
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { freePort, startNode, waitForPeers, writeClusterFile, type NodeProc } from './lib/cluster-harness.js'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { LatencyLog, median, type LatencySummary } from './lib/stats.js'
import { checkPinnable, pinTo } from './lib/pin.js'
import { intFlag } from '../src/cli/common.js'

const HELP = `usage: node dist/bench/latency.js [options]

  --scenes LIST     n3 (3 real seeds) and/or n200 (1 real seed + 199 generated members) (default n3,n200)
  --order O         abba (default): a trial of one side, then of the other (C L | L C | ...);
                    interleaved: each trial asks both sides in turn, request by request
  --trials N        trials per side per scene (default 8)
  --trial-ms MS     length of one trial (default 3000)
  --rate N          background demand per node, acquires/s (default 1000)
  --limit N         the rule: fixed-window hard, N per 1 s (default 30000)
  --peers N         n200: generated members (default 199)
  --echoes N        n200: heard entries in each generated gossip (default 0; a seed's at N=200: ~50)
  --gossip-ms MS    gossipIntervalMs, also the generated members' interval (default 250)
  --probe-key K     lat (default): the probe spends the rule's key, as the issue measured; probe: a key of its own (1e9/1s)
  --log-level L     quotad log level (default warn)
  --gap-ms MS       pause between probes (default 0: back to back); with 1, the probe leaves the machine a core to spare
  --cli FILE        quotad.js of another build for every daemon (a before/after run; default this build's)
  --node-arg ARG    a node flag for node a's process only, e.g. --node-arg=--cpu-prof --node-arg=--cpu-prof-dir=DIR (repeatable)
  --transport-nice N  cluster.transportNice for every daemon (default: not in the file, so the daemon's default, 0)
  --pin P           (ABBA only) place the processes for each trial, the same for both sides (bench/lib/pin.ts):
                    loop: the probed daemon's main thread (its socket loop) on core 0 with this process; its other
                    threads (the libp2p thread, V8's and libuv's) and every other process on core 1;
                    process: all of the probed daemon's threads on core 0 with this process, everything else on core 1
`

const KEY = 'lat'
/** With --probe-key probe: a key of its own, never exhausted, so the node does little for the cluster. */
const PROBE = 'probe'
const GEN = fileURLToPath(new URL('./gossip-gen.js', import.meta.url))
const LOAD = fileURLToPath(new URL('./latency-load.js', import.meta.url))

interface Opts { scenes: string[], order: 'interleaved' | 'abba', trials: number, trialMs: number, rate: number, limit: number, peers: number, echoes: number, gossipMs: number, logLevel: string, nodeArgs: string[], probeKey: string, cli: string | undefined, gapMs: number, pin: 'loop' | 'process' | null, transportNice: number | undefined }

function options (): Opts {
  const { values } = parseArgs({
    options: {
      scenes: { type: 'string' },
      order: { type: 'string' },
      trials: { type: 'string' },
      'trial-ms': { type: 'string' },
      rate: { type: 'string' },
      limit: { type: 'string' },
      peers: { type: 'string' },
      echoes: { type: 'string' },
      'gossip-ms': { type: 'string' },
      'log-level': { type: 'string' },
      'node-arg': { type: 'string', multiple: true },
      'probe-key': { type: 'string' },
      cli: { type: 'string' },
      'gap-ms': { type: 'string' },
      pin: { type: 'string' },
      'transport-nice': { type: 'string' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); process.exit(0) }
  const scenes = (values.scenes ?? 'n3,n200').split(',').map(s => s.trim())
  for (const s of scenes) if (s !== 'n3' && s !== 'n200') throw new Error(`--scenes: unknown scene "${s}"`)
  const order = values.order ?? 'abba'
  if (order !== 'interleaved' && order !== 'abba') throw new Error(`--order: interleaved or abba, not "${order}"`)
  const pin = values.pin ?? null
  if (pin !== null && pin !== 'loop' && pin !== 'process') throw new Error(`--pin: loop or process, not "${pin}"`)
  // Interleaved trials ask both daemons in turn, so there is no one daemon to place beside the probe.
  if (pin !== null && order !== 'abba') throw new Error('--pin: only with --order abba')
  if (pin !== null) checkPinnable()
  return {
    scenes,
    order,
    trials: intFlag('trials', values.trials, 8, 1),
    trialMs: intFlag('trial-ms', values['trial-ms'], 3000, 100),
    rate: intFlag('rate', values.rate, 1000, 0),
    limit: intFlag('limit', values.limit, 30_000, 1),
    peers: intFlag('peers', values.peers, 199, 1),
    echoes: intFlag('echoes', values.echoes, 0, 0),
    gossipMs: intFlag('gossip-ms', values['gossip-ms'], 250, 10),
    logLevel: values['log-level'] ?? 'warn',
    nodeArgs: values['node-arg'] ?? [],
    probeKey: values['probe-key'] === PROBE ? PROBE : KEY,
    cli: values.cli,
    gapMs: intFlag('gap-ms', values['gap-ms'], 0, 0),
    pin,
    transportNice: values['transport-nice'] === undefined ? undefined : intFlag('transport-nice', values['transport-nice'], 10, 0)
  }
}

/** A helper process that prints JSON lines; `last` is its latest line. */
interface Helper { child: ChildProcess, last: () => Record<string, unknown> | null, first: Promise<Record<string, unknown>>, stop: () => Promise<void> }

function helper (script: string, args: string[]): Helper {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let last: Record<string, unknown> | null = null
  let err = ''
  let buf = ''
  const first = new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => {
      buf += b.toString()
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try { last = JSON.parse(line) as Record<string, unknown> } catch { continue }
        resolve(last)
      }
    })
    child.stderr?.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-4000) })
    child.once('exit', code => { reject(new Error(`${path.basename(script)} exited ${String(code)}: ${err}`)) })
  })
  first.catch(() => {})
  return {
    child,
    last: () => last,
    first,
    stop: async () => {
      if (child.exitCode !== null) return
      const done = new Promise(resolve => child.once('exit', resolve))
      child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), 5000)
      await done
      clearTimeout(t)
    }
  }
}

/** Cluster-section fields the flags ask for (none by default, so an older build's daemon reads the file too). */
function clusterExtra (o: Opts): Record<string, unknown> {
  return o.transportNice === undefined ? {} : { transportNice: o.transportNice }
}

function rules (o: Opts): unknown[] {
  return [
    { name: 'lat', match: KEY, algorithm: 'fixed-window', limit: o.limit, per: '1s', mode: 'hard' },
    { name: 'probe', match: PROBE, algorithm: 'fixed-window', limit: 1e9, per: '1s', mode: 'hard' }
  ]
}

interface Side { name: string, client: QuotadClient, pid: number }
interface TrialRow { side: string, s: LatencySummary, ops: number, allowed: number, serverCpuPct: number, peersCpuPct: number, otherCpuPct: number }

/**
 * One trial: a c=1 closed loop of acquires for `ms`. With two sides, the loop
 * alternates between them request by request (interleaved): both sides are
 * measured over the same moments of the machine, so what the rest of the
 * machine does lands on both alike.
 */
async function trial (sides: Side[], key: string, ms: number, gapMs: number, others: number[], peers: number[]): Promise<TrialRow[]> {
  const logs = sides.map(() => new LatencyLog(1 << 17))
  const ops = sides.map(() => 0)
  const allowed = sides.map(() => 0)
  const server0 = sides.map(s => cpuMs(s.pid))
  const peers0 = peers.reduce((a, p) => a + cpuMs(p), 0)
  const own0 = cpuMs(null) + others.reduce((a, p) => a + cpuMs(p), 0)
  const machine0 = machineBusyMs()
  const t0 = performance.now()
  const end = t0 + ms
  for (let i = 0; performance.now() < end; i = (i + 1) % sides.length) {
    const t = performance.now()
    const d = await sides[i].client.acquire(key)
    logs[i].push(performance.now() - t)
    ops[i]++
    if (d.allowed) allowed[i]++
    if (gapMs > 0) await sleep(gapMs)
  }
  const wall = performance.now() - t0
  const server = sides.map((s, i) => cpuMs(s.pid) - server0[i])
  const servers = server.reduce((a, b) => a + b, 0)
  const peersCpu = peers.reduce((a, p) => a + cpuMs(p), 0) - peers0
  const own = cpuMs(null) + others.reduce((a, p) => a + cpuMs(p), 0) - own0
  const other = 100 * (machineBusyMs() - machine0 - servers - own) / wall
  return sides.map((side, i) => ({ side: side.name, s: logs[i].summary(), ops: ops[i], allowed: allowed[i], serverCpuPct: 100 * server[i] / wall, peersCpuPct: 100 * peersCpu / wall, otherCpuPct: other }))
}

const us = (x: number): string => x >= 100 ? x.toFixed(0) : x.toFixed(1)

/** Unmeasured probing per side before the trials (see measure). */
const WARMUP_MS = 2000

/** `trials` rounds of both sides, interleaved or ABBA (see trial); print each trial and the medians. */
async function measure (label: string, clustered: Side, lone: Side, o: Opts, allPids: number[], peers: number[]): Promise<Record<string, unknown>> {
  // Warm up both paths (JIT, connections) before anything is kept: WARMUP_MS a side, so the clustered node runs
  // short of its share and draws tokens (wants, grants, journal writes) at least once. A fixed 2000 probes each
  // (0.1 s) never did, so the first measured trial of the clustered side compiled those paths: in 3 runs its
  // p99 was 1.5-1.7x the lone one's, against 0.8-1.3x in the rounds after it. That is a node's first seconds
  // of drawing after it starts, once per process, not the steady state this bench compares.
  // --pin: the probed daemon (or its loop) shares core 0 with this process; everything else runs on core 1.
  const place = (probed: Side): void => {
    if (o.pin === null) return
    // loop: every thread of every daemon to core 1 first, then the probed daemon's main thread back beside the probe.
    pinTo(o.pin === 'loop' ? allPids : allPids.filter(p => p !== probed.pid), 1)
    pinTo([process.pid], 0)
    pinTo([probed.pid], 0, o.pin === 'loop' ? 'main thread' : 'all threads')
  }
  for (const side of [clustered, lone]) {
    place(side)
    const end = performance.now() + WARMUP_MS
    while (performance.now() < end) await side.client.acquire(o.probeKey)
  }
  const rows: TrialRow[] = []
  const print = (i: number, r: TrialRow): void => {
    process.stdout.write(`  ${label} trial ${i + 1} ${r.side.padEnd(9)} n=${String(r.ops).padStart(6)} (${(100 * r.allowed / r.ops).toFixed(0).padStart(3)}% allowed) p50 ${us(r.s.p50Us).padStart(5)} µs p99 ${us(r.s.p99Us).padStart(5)} µs ` +
      `p99.9 ${us(r.s.p999Us).padStart(5)} µs; CPU: daemon ${r.serverCpuPct.toFixed(0)}%, its peers ${r.peersCpuPct.toFixed(0)}%, other ${r.otherCpuPct.toFixed(0)}%\n`)
  }
  for (let i = 0; i < o.trials; i++) {
    // Interleaved: one trial of both sides, request by request, the side asked first alternating by trial.
    // ABBA: a trial of each side in turn, the order alternating by round.
    const order = i % 2 === 0 ? [clustered, lone] : [lone, clustered]
    const batches = o.order === 'interleaved' ? [order] : order.map(side => [side])
    for (const sides of batches) {
      const pids = sides.map(s => s.pid)
      if (sides.length === 1) place(sides[0])
      const out = await trial(sides, o.probeKey, o.trialMs, o.gapMs, allPids.filter(p => !pids.includes(p)), peers)
      for (const r of out) { rows.push(r); print(i, r) }
    }
  }
  const med = (side: string, f: (s: LatencySummary) => number): number => median(rows.filter(r => r.side === side).map(r => f(r.s)))
  const c50 = med(clustered.name, s => s.p50Us)
  const c99 = med(clustered.name, s => s.p99Us)
  const l50 = med(lone.name, s => s.p50Us)
  const l99 = med(lone.name, s => s.p99Us)
  const ratio50 = c50 / l50
  const ratio99 = c99 / l99
  const ok = (r: number): string => r <= 1.2 ? 'met' : 'MISSED'
  // Each round's two rows ran at the same moments (interleaved) or back to back (ABBA): their ratio is the least
  // disturbed by the machine's drift.
  const pairs = (f: (s: LatencySummary) => number): number[] => Array.from({ length: o.trials }, (_, i) => f(rows[2 * i + (i % 2)].s) / f(rows[2 * i + 1 - (i % 2)].s))
  const p50s = pairs(s => s.p50Us)
  const p99s = pairs(s => s.p99Us)
  process.stdout.write(`  ${label}: clustered/lone per round: p50 ${p50s.map(r => r.toFixed(2)).join(' ')}; p99 ${p99s.map(r => r.toFixed(2)).join(' ')}\n`)
  process.stdout.write(`  ${label}: clustered p50 ${us(c50)} p99 ${us(c99)} µs; lone p50 ${us(l50)} p99 ${us(l99)} µs; ` +
    `ratio p50 ${ratio50.toFixed(2)}x [${ok(ratio50)}], p99 ${ratio99.toFixed(2)}x [${ok(ratio99)}] (medians of ${o.trials} trials of ${o.trialMs / 1000} s per side)\n`)
  return { label, clustered: { p50Us: c50, p99Us: c99 }, lone: { p50Us: l50, p99Us: l99 }, ratio50, ratio99, pairs50: p50s, pairs99: p99s, rows }
}

async function main (): Promise<void> {
  const o = options()
  printMachine(machineInfo())
  if (o.cli !== undefined) process.stdout.write(`daemons: ${o.cli}\n`)
  process.stdout.write(`settings: rule fixed-window ${o.limit}/1s hard on key "${KEY}"; background demand ${o.rate}/s per node (open loop, own process); ` +
    `probe: c=1 closed-loop acquire of "${o.probeKey}"${o.probeKey === PROBE ? ' (same algorithm, 1e9/1s)' : ''} from the bench process${o.gapMs > 0 ? `, ${o.gapMs} ms apart` : ''}; ${WARMUP_MS / 1000} s unmeasured per side, then ${o.trials} trials of ${o.trialMs / 1000} s ${o.order === 'interleaved' ? 'of both sides, interleaved request by request' : 'per side, alternating (ABBA)'}; ` +
    `gossipIntervalMs ${o.gossipMs}` +
    `${o.transportNice === undefined ? '' : `; cluster.transportNice ${o.transportNice}`}${o.pin === 'process' ? '; pinned: the probed daemon and the probe on core 0, every other process on core 1' : o.pin === 'loop' ? '; pinned: the probed daemon\'s main thread and the probe on core 0, its other threads and every other process on core 1' : ''}\n\n`)
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'quotad-latency-bench-'))
  const procs: NodeProc[] = []
  const helpers: Helper[] = []
  const clients: QuotadClient[] = []
  const connect = async (p: NodeProc): Promise<QuotadClient> => {
    const c = await QuotadClient.connect({ socketPath: p.socketPath, timeoutMs: 5000, reconnect: false })
    clients.push(c)
    return c
  }
  try {
    const loneDir = path.join(tmp, 'lone')
    mkdirSync(loneDir)
    const lone = await startNode(await writeClusterFile(loneDir, 'lat-lone', ['s'], rules(o), o.gossipMs, clusterExtra(o)), 's', o.logLevel, undefined, o.cli)
    procs.push(lone)
    const loneSide: Side = { name: 'lone', client: await connect(lone), pid: lone.pid }

    if (o.scenes.includes('n3')) {
      const dir = path.join(tmp, 'n3')
      mkdirSync(dir)
      const file = await writeClusterFile(dir, 'lat3', ['a', 'b', 'c'], rules(o), o.gossipMs, clusterExtra(o))
      const nodes = await Promise.all(['a', 'b', 'c'].map(async n => await startNode(file, n, o.logLevel, undefined, o.cli, n === 'a' ? o.nodeArgs : [])))
      procs.push(...nodes)
      const cl = await Promise.all(nodes.map(connect))
      await waitForPeers(cl, 2)
      const load = helper(LOAD, ['--key', KEY, '--rate', String(o.rate), ...nodes.map(n => n.socketPath), lone.socketPath])
      helpers.push(load)
      await sleep(1000)
      process.stdout.write(`n3: seeds a, b, c up (pids ${nodes.map(n => n.pid).join(', ')}), lone pid ${lone.pid}; demand ${o.rate}/s on a, b, c and the lone daemon\n`)
      await measure('n3', { name: 'clustered', client: await connect(nodes[0]), pid: nodes[0].pid }, loneSide, o, [...nodes.map(n => n.pid), lone.pid, load.child.pid ?? -1], [nodes[1].pid, nodes[2].pid])
      process.stdout.write(`  load: ${JSON.stringify(load.last())}\n\n`)
      await load.stop()
      await Promise.all(nodes.map(async n => await n.stop()))
    }

    if (o.scenes.includes('n200')) {
      const dir = path.join(tmp, 'n200')
      mkdirSync(dir)
      // One seed; a file of one node would run without the cluster layer, so a member that never starts is listed too.
      const cf = await writeClusterFile(dir, 'lat200', ['a'], rules(o), o.gossipMs, clusterExtra(o))
      const nodes = cf.raw.nodes as Array<Record<string, unknown>>
      const port = await freePort()
      nodes[0].listen = `/ip4/127.0.0.1/tcp/${port}`
      nodes.push({ name: 'm000', listen: '/ip4/127.0.0.1/tcp/0', socket: path.join(dir, 'm000.sock'), dataDir: path.join(dir, 'data', 'm000'), seed: false })
      writeFileSync(cf.file, JSON.stringify(cf.raw, null, 2) + '\n')
      const a = await startNode(cf, 'a', o.logLevel, undefined, o.cli, o.nodeArgs)
      procs.push(a)
      const ca = await connect(a)
      const gen = helper(GEN, ['--connect', `/ip4/127.0.0.1/tcp/${port}`, '--swarm-key', path.join(dir, 'swarm.key'), '--cluster', 'lat200',
        '--key', KEY, '--peers', String(o.peers), '--interval-ms', String(o.gossipMs), '--echoes', String(o.echoes)])
      helpers.push(gen)
      await gen.first
      await waitForPeers([ca], o.peers, 60_000)
      const load = helper(LOAD, ['--key', KEY, '--rate', String(o.rate), a.socketPath, lone.socketPath])
      helpers.push(load)
      await sleep(1000)
      const s0 = await ca.status() as { cluster?: { transport?: Record<string, number> } }
      const t0 = performance.now()
      process.stdout.write(`n200: seed a (pid ${a.pid}) hears ${o.peers} generated members (pid ${String(gen.child.pid)}); demand ${o.rate}/s on a and the lone daemon\n`)
      await measure('n200', { name: 'clustered', client: await connect(a), pid: a.pid }, loneSide, o, [a.pid, lone.pid, load.child.pid ?? -1, gen.child.pid ?? -1], [gen.child.pid ?? -1])
      const s1 = await ca.status() as { cluster?: { transport?: Record<string, number> } }
      const secs = (performance.now() - t0) / 1000
      const d = (k: string): number => ((s1.cluster?.transport?.[k] ?? NaN) - (s0.cluster?.transport?.[k] ?? NaN)) / secs
      process.stdout.write(`  gossip received by a: ${d('received').toFixed(0)} msg/s, ${(d('receivedBytes') * 8 / 1000).toFixed(0)} kbit/s of payload ` +
        `(${(d('receivedBytes') / d('received')).toFixed(0)} B per message; status transport counters over the trials)\n`)
      process.stdout.write(`  generator: ${JSON.stringify(gen.last())}; load: ${JSON.stringify(load.last())}\n\n`)
      await load.stop()
      await gen.stop()
    }
  } finally {
    await Promise.all(clients.map(async c => await c.close().catch(() => {})))
    await Promise.all(helpers.map(async h => await h.stop()))
    await Promise.all(procs.map(async p => await p.stop()))
    rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})
