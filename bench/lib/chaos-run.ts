/**
 * One chaos run on real processes: write the cluster file, start every node
 * (in its own network namespace when network faults are on, else on
 * loopback), put load on every node through its Unix socket, carry out the
 * plan (src/sim/fault-plan.ts), heal everything at the end of the faults, let the
 * cluster run quiet, read every node's status, stop, and check every answer
 * (chaos-check.ts).
 *
 * Time: the plan's times are from the moment the load starts (after the
 * cluster formed); every answer is stamped with the harness's wall clock,
 * which no fault touches (a clock fault shifts one node's wall clock through
 * libfaketime, LD_PRELOADed into that node only, monotonic time left real).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { QuotadClient } from '@quotad/client'
import { writeSwarmKey } from '../../src/config/swarm-key.js'
import { peerIdOf } from '../../src/cluster/transport/identity.js'
import { Rng } from '../../src/sim/rng.js'
import { freePort, startNode, type ClusterFile, type NodeProc, type SpawnOpts } from './cluster-harness.js'
import { checkKey, allowedIn, type Answer, type CheckRule, type KeyVerdict, type Offsets } from './chaos-check.js'
import { describeEvent, type ChaosEvent } from '../../src/sim/fault-plan.js'
import type { ChaosNet } from './chaos-net.js'

/** libfaketime's multi-threaded build (Debian package libfaketime). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

export interface ChaosRule {
  name: string
  match: string
  limit: number
  per: string
  perMs: number
  algorithm: 'fixed-window' | 'sliding-log' | 'token-bucket'
  burst?: number
  /** Keys the load asks for, and the cluster-wide demand per key in requests/s. */
  keys: string[]
  demandPerS: number
}

export interface RunSpec {
  seed: number
  seeds: string[]
  members: string[]
  rules: ChaosRule[]
  plan: ChaosEvent[]
  faultsMs: number
  quietMs: number
  reclaimMs: number
  /** Null: loopback, no network faults. */
  net: ChaosNet | null
  /** Start nodes under libfaketime (needed for clock faults). */
  fakeTime: boolean
  keepDir: boolean
  log: (line: string) => void
}

export interface NodeEnd {
  node: string
  /**
   * Per key, after the quiet: shortfall, unacknowledged grants (inTransitOut), and the node's books (held +
   * outstanding + deferred − owed: journal.ts); or the error reading status.
   */
  keys: Record<string, { shortfall: number | null, unacked: number, books: number }>
  error?: string
  allocate?: unknown
  fenced?: unknown
  /** Its unacked grants per receiver epoch (status `cluster.unacked`): which receivers, how old, whether alive. */
  outboxes?: unknown[]
}

export interface RunResult {
  seed: number
  dir: string
  verdicts: KeyVerdict[]
  overshoot: number
  overshootByNodeCalendar: number
  /** Allowed answers in the quiet tail (after reclaimMs + the longest window of quiet). */
  tailAllowed: number
  tailMs: number
  ends: NodeEnd[]
  maxShortfall: number
  /**
   * After the quiet, the most by which the nodes' books of a key sum to more than its limit (0: none): tokens
   * created. NaN when a node's status could not be read. Tokens in grants not yet applied are in no books (an idle
   * cluster still moves a few), so this can miss a few created tokens, never count one that was not; nodes are
   * read one after another, so a token that moves meanwhile may count twice: a token or so is noise.
   */
  maxSurplus: number
  unacked: number
  /** Processes that exited without the harness asking (node, how, and the log's error codes). */
  exits: Array<{ node: string, how: string, codes: string[] }>
  startFailures: string[]
  answers: number
  errors: number
}

/** A node's current process, and whether the harness ended it (kill -9, SIGTERM, the final stop): any other exit is the node's own. */
/** Every node process this harness started that may still run: killed if the harness itself is stopped (killAll). */
const running = new Set<number>()

/** SIGKILL every node process still running (the harness was interrupted: no clean stop is waited for). */
export function killAll (): void {
  for (const pid of running) {
    try { process.kill(pid, 'SIGKILL') } catch { /* gone already */ }
  }
  running.clear()
}

interface Live { proc: NodeProc | null, expectExit: boolean, starting: Promise<void> | null }

function fileOf (dir: string, names: string[]): ClusterFile {
  return { file: path.join(dir, 'cluster.json'), names, sockets: Object.fromEntries(names.map(n => [n, path.join(dir, `${n}.sock`)])), raw: {} }
}

function rulesJson (rules: readonly ChaosRule[], limits: Record<string, number>): unknown[] {
  return rules.map(r => ({
    name: r.name,
    match: r.match,
    limit: limits[r.name] ?? r.limit,
    per: r.per,
    algorithm: r.algorithm,
    mode: 'hard',
    ...(r.burst === undefined ? {} : { burst: r.burst })
  }))
}

export async function runChaos (spec: RunSpec): Promise<RunResult> {
  const dir = mkdtempSync(path.join(tmpdir(), `qd-chaos-${spec.seed}-`))
  const names = [...spec.seeds, ...spec.members]
  const cf = fileOf(dir, names)
  await writeSwarmKey(path.join(dir, 'swarm.key'))
  const nodes: Array<Record<string, unknown>> = []
  for (const n of names) {
    const listen = spec.net === null ? `/ip4/127.0.0.1/tcp/${await freePort()}` : `/ip4/${spec.net.ip.get(n) as string}/tcp/7401`
    const { peerId } = await peerIdOf(path.join(dir, 'data', n))
    nodes.push({ name: n, listen, socket: cf.sockets[n], dataDir: path.join(dir, 'data', n), peerId, ...(spec.members.includes(n) ? { seed: false } : {}) })
  }
  const cluster = { name: `chaos${spec.seed}`, secretFile: 'swarm.key', reclaimMs: spec.reclaimMs }
  const writeFile = (limits: Record<string, number>): void => {
    writeFileSync(cf.file, JSON.stringify({ cluster, nodes, rules: rulesJson(spec.rules, limits), limits: { maxInflightPerConnection: 4096 } }, null, 2) + '\n')
  }
  writeFile({})

  const live = new Map<string, Live>(names.map(n => [n, { proc: null, expectExit: false, starting: null }]))
  const exits: RunResult['exits'] = []
  const startFailures: string[] = []
  const clockFile = (n: string): string => path.join(dir, `${n}.faketime`)
  const spawnOpts = (n: string): SpawnOpts => ({
    wrap: spec.net?.wrap(n),
    logFile: path.join(dir, `${n}.log`),
    env: spec.fakeTime
      ? { LD_PRELOAD: LIBFAKETIME, FAKETIME_TIMESTAMP_FILE: clockFile(n), FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' }
      : undefined
  })
  if (spec.fakeTime) for (const n of names) writeFileSync(clockFile(n), '+0\n')

  // A clock fault steps a node's wall clock (libfaketime reads the file at most a second later).
  const injected = new Map<string, number>()
  const setClock = (n: string, offsetMs: number): void => {
    writeFileSync(clockFile(n), `${offsetMs >= 0 ? '+' : ''}${Math.round(offsetMs / 1000)}s\n`)
    injected.set(n, offsetMs)
  }

  const start = async (n: string): Promise<void> => {
    const l = live.get(n) as Live
    try {
      const proc = await startNode(cf, n, 'info', 90_000, undefined, [], spawnOpts(n))
      // Only now: the previous process's exit, which the harness asked for, is still being watched.
      l.proc = proc
      l.expectExit = false
      running.add(proc.pid)
      watchExit(n, proc)
    } catch (err) {
      startFailures.push(`${n}: ${(err as Error).message.slice(0, 300)}`)
      spec.log(`  ! ${n} did not start: ${(err as Error).message.slice(0, 300)}`)
    }
  }
  const watchExit = (n: string, proc: NodeProc): void => {
    const poll = setInterval(() => {
      const how = proc.exited()
      if (how === null) return
      clearInterval(poll)
      running.delete(proc.pid)
      const l = live.get(n) as Live
      if (l.proc === proc && !l.expectExit) {
        const codes = [...new Set(proc.output().match(/E_[A-Z_]+/g) ?? [])]
        exits.push({ node: n, how, codes })
        spec.log(`  ! ${n} exited on its own: ${how} ${codes.join(' ')}`)
      }
    }, 200)
    poll.unref()
  }

  const offsets: Offsets = new Map()
  const limitLog = new Map<string, Array<{ at: number, limit: number }>>(spec.rules.map(r => [r.name, [{ at: -Infinity, limit: r.limit }]]))
  const answers: Answer[] = []
  let errors = 0
  const clients = new Map<string, QuotadClient>()
  let t0 = 0
  const timers: NodeJS.Timeout[] = []
  let loadOn = false
  const ends: NodeEnd[] = []
  try {
    // A node that does not start is reported (startFailures) and started again at the end of the faults.
    for (const n of names) await start(n)
    // A cluster that does not form in time is a finding, not the end of the sweep: the run goes on.
    const unformed = await waitFormed(cf, spec.seeds, spec.members, live)
    if (unformed !== null) {
      startFailures.push(unformed)
      spec.log(`  ! ${unformed}`)
    }
    // A client per node. Once connected it dials again by itself after a restart; a node down at the
    // start (it did not form) is dialled again once a second until it answers.
    const dialing = new Set<string>()
    const dial = (n: string): void => {
      if (dialing.has(n) || clients.has(n)) return
      dialing.add(n)
      QuotadClient.connect({ socketPath: cf.sockets[n], timeoutMs: 2000 }).then(c => { clients.set(n, c) }, () => {})
        .finally(() => { setTimeout(() => dialing.delete(n), 1000).unref() })
    }
    for (const n of names) dial(n)
    await sleep(500)

    // Load: per node and key, requests at a seeded share of the key's demand, at most 32 in flight.
    const rng = new Rng(spec.seed * 31 + 7)
    const weights = new Map(names.map(n => [n, 0.5 + rng.next()]))
    const wsum = [...weights.values()].reduce((a, b) => a + b, 0)
    const inflight = new Map<string, number>()
    const credit = new Map<string, number>()
    const TICK_MS = 20
    loadOn = true
    const tick = (): void => {
      if (!loadOn) return
      for (const n of names) {
        const c = clients.get(n)
        if (c === undefined) {
          dial(n)
          continue
        }
        for (const r of spec.rules) {
          for (const key of r.keys) {
            const id = `${n}|${key}`
            const acc = (credit.get(id) ?? 0) + r.demandPerS * ((weights.get(n) as number) / wsum) * TICK_MS / 1000
            let send = Math.floor(acc)
            credit.set(id, acc - send)
            while (send-- > 0 && (inflight.get(id) ?? 0) < 32) {
              inflight.set(id, (inflight.get(id) ?? 0) + 1)
              const sent = Date.now()
              c.acquire(key).then(d => {
                answers.push({ node: n, key, rule: r.name, t0: sent, t1: Date.now(), allowed: d.allowed })
              }, () => { errors++ }).finally(() => inflight.set(id, (inflight.get(id) ?? 1) - 1))
            }
          }
        }
      }
    }
    const loadTimer = setInterval(tick, TICK_MS)
    timers.push(loadTimer)
    // Each node's calendar (where it places its windows) against true time, once a second: its wall
    // clock's injected offset plus its calendar's own skew from that wall clock (calendar.ts follows a
    // stepped wall clock only slowly, and at once after a restart).
    const sampler = setInterval(() => {
      for (const n of names) {
        const c = clients.get(n)
        const l = live.get(n) as Live
        if (c === undefined || l.proc === null || l.proc.exited() !== null) continue
        c.status().then(s => {
          const skew = (s as { cluster?: { calendarSkewMs?: number } }).cluster?.calendarSkewMs ?? 0
          const xs = offsets.get(n) ?? []
          xs.push({ at: Date.now(), offsetMs: (injected.get(n) ?? 0) + skew })
          offsets.set(n, xs)
        }, () => {})
      }
    }, 1000)
    timers.push(sampler)
    t0 = Date.now()
    spec.log(`  load on at ${new Date(t0).toISOString()}`)

    // The plan.
    const at = (ms: number, f: () => void | Promise<void>): void => {
      timers.push(setTimeout(() => {
        Promise.resolve(f()).catch(err => spec.log(`  ! event failed: ${(err as Error).message}`))
      }, Math.max(0, t0 + ms - Date.now())))
    }
    const signal = (n: string, sig: NodeJS.Signals): boolean => {
      const l = live.get(n) as Live
      if (l.proc === null || l.proc.exited() !== null) return false
      try { process.kill(l.proc.pid, sig); return true } catch { return false }
    }
    // One start at a time per node: on a loaded machine a start takes many seconds, and a second
    // restart due meanwhile (the plan's, or the end of the faults) must wait for it, not race it for the data dir.
    const restart = async (n: string): Promise<void> => {
      const l = live.get(n) as Live
      if (l.starting !== null) {
        await l.starting
        return
      }
      l.starting = (async () => {
        // A clean stop hands its tokens on first, which can take longer than the plan's delay: wait for it.
        for (let i = 0; i < 300 && l.proc !== null && l.proc.exited() === null; i++) await sleep(100)
        if (l.proc !== null && l.proc.exited() === null) {
          spec.log(`  ! ${n} is still running 30 s after its restart was due; left as it is`)
          return
        }
        await start(n)
      })()
      try { await l.starting } finally { l.starting = null }
    }
    for (const e of spec.plan) {
      const ev = e
      at(ev.at, async () => {
        spec.log(`  ${((Date.now() - t0) / 1000).toFixed(1)}s: ${describeEvent(ev)}`)
        switch (ev.kind) {
          case 'kill':
          case 'term': {
            const l = live.get(ev.node) as Live
            l.expectExit = true
            if (!signal(ev.node, ev.kind === 'kill' ? 'SIGKILL' : 'SIGTERM')) spec.log(`  ! ${ev.node} is not running: nothing to ${ev.kind}`)
            at(ev.restartAt, async () => await restart(ev.node))
            break
          }
          case 'stop':
            signal(ev.node, 'SIGSTOP')
            at(ev.contAt, () => { signal(ev.node, 'SIGCONT') })
            break
          case 'reload': {
            writeFile(ev.limits)
            const now = Date.now()
            for (const [name, limit] of Object.entries(ev.limits)) limitLog.get(name)?.push({ at: now, limit })
            // A node starting now may not have its handlers yet (SIGHUP's default action ends it): it gets its SIGHUP once it serves.
            for (const n of names) {
              const l = live.get(n) as Live
              if (l.starting === null) signal(n, 'SIGHUP')
              else void l.starting.then(() => signal(n, 'SIGHUP'))
            }
            break
          }
          case 'partition':
          case 'loss':
          case 'dup': {
            if (spec.net === null) break
            const net = spec.net
            // The heal is scheduled before the rules land, so a slow iptables cannot push it back.
            let id: Promise<number> | null = null
            at(ev.healAt, async () => { if (id !== null) await net.remove(await id) })
            id = ev.kind === 'partition'
              ? net.add({ kind: 'partition', groups: ev.groups })
              : net.add({ kind: ev.kind, node: ev.node, probability: ev.probability })
            await id
            break
          }
          case 'clock':
            setClock(ev.node, ev.stepMs)
            at(ev.backAt, () => setClock(ev.node, 0))
            break
        }
      })
    }
    await sleep(spec.faultsMs + 300)
    // The end of the faults: whatever is still broken is healed (the plan's own ends come first).
    await spec.net?.clear()
    for (const [n, o] of injected) if (o !== 0) setClock(n, 0)
    for (const n of names) signal(n, 'SIGCONT')
    for (const n of names) {
      const l = live.get(n) as Live
      if (l.starting !== null) await l.starting
      if (l.proc === null || (l.proc.exited() !== null && l.expectExit)) {
        spec.log(`  ${n} down at the end of the faults: restarted`)
        await restart(n)
      }
    }
    spec.log(`  ${((Date.now() - t0) / 1000).toFixed(1)}s: faults over, quiet`)
    await sleep(Math.max(0, t0 + spec.faultsMs + spec.quietMs - Date.now()))
  } finally {
    // What every node says at the end of the quiet, once the load stopped and the last grants had a
    // few gossip intervals to be acked: a grant still unacked then is stuck, not on its way.
    loadOn = false
    for (const t of timers) { clearInterval(t); clearTimeout(t) }
    await sleep(2000)
    // Read END_SAMPLES times, a second apart, every node at once: an idle cluster still moves a token or two (a home
    // push, a give back) and a node sees its peers' custody as last gossiped, so one reading can show a token in
    // motion as missing. A token lost for good is missing in every reading: each key's shortfall is its least.
    const samples: NodeEnd[][] = []
    for (let i = 0; i < END_SAMPLES; i++) {
      if (i > 0) await sleep(1000)
      samples.push(await Promise.all(names.map(n => readEnd(n, cf.sockets[n], live.get(n)?.proc ?? null, path.join(dir, `${n}.status.json`)))))
    }
    ends.push(...lastWithLeastShortfall(samples))
    for (const c of clients.values()) await c.close().catch(() => {})
    for (const n of names) {
      const l = live.get(n) as Live
      if (l.starting !== null) await l.starting.catch(() => {})
      l.expectExit = true
      if (l.proc !== null) {
        try { process.kill(l.proc.pid, 'SIGCONT') } catch { /* it exited meanwhile */ }
        await l.proc.stop()
      }
    }
  }

  const perMax = Math.max(...spec.rules.map(r => r.perMs))
  const tailFrom = t0 + spec.faultsMs + spec.reclaimMs + perMax
  const tailTo = t0 + spec.faultsMs + spec.quietMs
  const verdicts: KeyVerdict[] = []
  const byKey = new Map<string, Answer[]>()
  for (const a of answers) {
    const xs = byKey.get(a.key) ?? []
    xs.push(a)
    byKey.set(a.key, xs)
  }
  for (const r of spec.rules) {
    const cr: CheckRule = { name: r.name, algorithm: r.algorithm, perMs: r.perMs, limits: limitLog.get(r.name) ?? [], ...(r.burst === undefined ? {} : { burst: r.burst }) }
    for (const key of r.keys) verdicts.push(checkKey(key, cr, byKey.get(key) ?? [], offsets))
  }
  let maxShortfall = 0
  let maxSurplus = 0
  let unacked = 0
  const limitOf = new Map<string, number>()
  for (const r of spec.rules) {
    const log = limitLog.get(r.name) ?? []
    for (const key of r.keys) limitOf.set(key, log.length > 0 ? log[log.length - 1].limit : r.limit)
  }
  const books = new Map<string, number>()
  for (const e of ends) {
    if (e.error !== undefined) maxSurplus = NaN
    for (const [key, k] of Object.entries(e.keys)) books.set(key, (books.get(key) ?? 0) + k.books)
  }
  for (const [key, n] of books) {
    const limit = limitOf.get(key)
    if (limit !== undefined) maxSurplus = Math.max(maxSurplus, Math.round((n - limit) * 1000) / 1000)
  }
  for (const e of ends) {
    for (const k of Object.values(e.keys)) maxShortfall = Math.max(maxShortfall, k.shortfall ?? 0)
    // Stuck, not on its way: the idle cluster still moves a few tokens (home pushes, give backs), acked within
    // a gossip interval or two.
    for (const b of (e.outboxes ?? []) as Array<{ tokens: number, ageMs: number }>) if (b.ageMs > STUCK_MS) unacked += b.tokens
  }
  const result: RunResult = {
    seed: spec.seed,
    dir,
    verdicts,
    overshoot: verdicts.reduce((a, v) => a + v.overshoot, 0),
    overshootByNodeCalendar: verdicts.reduce((a, v) => a + v.overshootByNodeCalendar, 0),
    tailAllowed: allowedIn(answers, tailFrom, tailTo),
    tailMs: tailTo - tailFrom,
    ends,
    maxShortfall,
    maxSurplus,
    unacked,
    exits,
    startFailures,
    answers: answers.length,
    errors
  }
  const clean = result.overshoot === 0 && !(result.maxSurplus > 1) && exits.length === 0 && startFailures.length === 0
  // Every answer, to see which node admitted what when (a run kept: --keep, or one that failed).
  if (existsSync(dir) && (spec.keepDir || !clean)) writeFileSync(path.join(dir, 'answers.jsonl'), answers.map(a => JSON.stringify({ ...a, t0: a.t0 - t0, t1: a.t1 - t0 })).join('\n') + '\n')
  // And each node's calendar against true time, as sampled once a second (the checker's node-calendar count reads them).
  if (existsSync(dir) && (spec.keepDir || !clean)) writeFileSync(path.join(dir, 'calendars.jsonl'), [...offsets].flatMap(([n, xs]) => xs.map(x => JSON.stringify({ node: n, at: x.at - t0, offsetMs: x.offsetMs }))).join('\n') + '\n')
  if (clean && !spec.keepDir && existsSync(dir)) rmSync(dir, { recursive: true, force: true })
  return result
}

interface StatusShape {
  peers?: Array<{ alive: boolean }>
  cluster?: { lease?: { valid?: boolean }, leaseNeeded?: boolean, allocate?: unknown, fenced?: unknown, unacked?: unknown[] }
  ruleAgreement?: Array<{ shared: boolean }>
  clusterKeys?: Array<{ key: string, shortfall?: number, inTransitOut?: number, held?: number, outstanding?: number, deferred?: number, owed?: number }>
}

/**
 * Wait until every seed sees the other seeds and every member the seeds, each leased and agreeing on
 * the rules; a node that exited meanwhile is not waited for. Null when formed, else what was missing.
 */
async function waitFormed (cf: ClusterFile, seeds: string[], members: string[], live: Map<string, Live>, timeoutMs = 90_000): Promise<string | null> {
  const deadline = Date.now() + timeoutMs
  for (const n of [...seeds, ...members]) {
    const want = members.includes(n) ? seeds.length : seeds.length - 1
    let c: QuotadClient | null = null
    try {
      c = await QuotadClient.connect({ socketPath: cf.sockets[n], timeoutMs: 10_000 })
      while (true) {
        const proc = live.get(n)?.proc ?? null
        if (proc === null || proc.exited() !== null) break
        const s = await c.status() as StatusShape
        const alive = (s.peers ?? []).filter(p => p.alive).length
        const leased = s.cluster?.lease?.valid !== false || s.cluster?.leaseNeeded === false
        if (alive >= want && leased && (s.ruleAgreement ?? []).every(r => r.shared)) break
        if (Date.now() > deadline) return `${n}: the cluster did not form in ${timeoutMs} ms: ${JSON.stringify({ peers: s.peers?.map(p => p.alive), lease: s.cluster?.lease })}`
        await sleep(200)
      }
    } catch (err) {
      return `${n}: ${(err as Error).message}`
    } finally {
      await c?.close().catch(() => {})
    }
  }
  return null
}

/** How many times the nodes' statuses are read after the quiet (see `lastWithLeastShortfall`). */
const END_SAMPLES = 3

/**
 * Each node's last reading, but with each key's least shortfall over all the readings (null where a reading had
 * none): what stays missing, not what was in motion at one moment.
 */
export function lastWithLeastShortfall (samples: ReadonlyArray<readonly NodeEnd[]>): NodeEnd[] {
  const last = samples[samples.length - 1] ?? []
  return last.map((e, i) => {
    const keys: NodeEnd['keys'] = {}
    for (const [key, k] of Object.entries(e.keys)) {
      let least = k.shortfall
      for (const s of samples) {
        const x = s[i]?.keys[key]?.shortfall
        if (x === undefined || x === null) continue
        least = least === null ? x : Math.min(least, x)
      }
      keys[key] = { ...k, shortfall: least }
    }
    return { ...e, keys }
  })
}

/** A grant unacked this long after the load stopped is stuck (`unacked`), not on its way. */
const STUCK_MS = 2000

/** What node `n` says after the quiet; its whole status is written to `statusFile` (kept with --keep, for a look at why). */
async function readEnd (n: string, socketPath: string, proc: NodeProc | null, statusFile: string): Promise<NodeEnd> {
  if (proc === null || proc.exited() !== null) return { node: n, keys: {}, error: 'not running' }
  let c: QuotadClient | null = null
  try {
    c = await QuotadClient.connect({ socketPath, timeoutMs: 10_000, reconnect: false })
    const s = await c.status() as StatusShape
    writeFileSync(statusFile, JSON.stringify(s, null, 1))
    const keys: NodeEnd['keys'] = {}
    for (const k of s.clusterKeys ?? []) {
      const books = (k.held ?? 0) + (k.outstanding ?? 0) + (k.deferred ?? 0) - (k.owed ?? 0)
      keys[k.key] = { shortfall: k.shortfall ?? null, unacked: k.inTransitOut ?? 0, books }
    }
    return { node: n, keys, allocate: s.cluster?.allocate, fenced: s.cluster?.fenced, outboxes: s.cluster?.unacked ?? [] }
  } catch (err) {
    return { node: n, keys: {}, error: (err as Error).message }
  } finally {
    await c?.close().catch(() => {})
  }
}
