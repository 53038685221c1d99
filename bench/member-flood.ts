/**
 * How long a real member takes to join while an insider floods made-up
 * member names (issue 46: "a real new member could not join within 10 s";
 * the target is 5 s). Real processes: seeds a and b, an insider (a libp2p
 * node with the swarm key, no name) that speaks for 1,000 names from one
 * peer id and keeps speaking for new ones, and a member process not in the
 * file (--node/--listen from the environment) started once the flood runs.
 * Measured per trial: from the member's start to its socket answering (the
 * process's own start, flood or not), to its first allowed acquire (a
 * tokens-by-transfer round trip included), and to both seeds binding it; a
 * trial not served within 120 s says so and the next one runs. Then the
 * load average, and seed a's flood counters (transport stats, flood-guard.ts;
 * "-" on a build without them). The median counts a trial not served as
 * slower than any served.
 *
 *   node dist/bench/member-flood.js [--trials 3] [--every-ms 1000] [--names 1000]
 *
 * `--names 0`: no flood at all, the same member joining the same two seeds
 * (what the join costs on this machine without an insider).
 */
import os from 'node:os'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers } from '../test/helpers/cluster-procs.js'
import { eventually, stop, waitForSocket } from '../test/helpers/proc.js'
import { admissionOf, flood, floodPenalties, insiderNode, joinMember } from '../test/helpers/insider-flood.js'
import { machineInfo, printMachine } from './lib/machine.js'

const DAY = [{ name: 'day', match: 'day', limit: 1000, per: '1d', algorithm: 'fixed-window' }]

const DEADLINE_MS = 120_000

interface Trial { socketMs: number, servedMs: number, boundMs: number, perPeer: number, flood: string }

/** Seed a's flood guard counters: messages over budget, penalties given (or "-" on a build without them). */
async function floodCounters (socketPath: string): Promise<string> {
  let q: QuotadClient | undefined
  try {
    q = await QuotadClient.connect({ socketPath })
    const t = (await q.status() as unknown as { cluster: { transport?: Record<string, number> } }).cluster.transport
    return t?.gossipOverBudget === undefined ? '-' : `${t.gossipOverBudget} over budget, ${t.floodPenalties} penalties`
  } catch {
    return '?'
  } finally { await q?.close().catch(() => {}) }
}

async function trial (n: number, everyMs: number, names: number): Promise<Trial> {
  const c = await makeCluster(['a', 'b'], DAY)
  const rogue = await (async () => {
    await c.start('a')
    await c.start('b')
    await waitForPeers(c, ['a', 'b'], 1)
    return await insiderNode(c)
  })()
  let flooding = true
  let next = 0
  const loop = (async () => {
    while (flooding && names > 0) {
      await flood(rogue, Array.from({ length: 100 }, () => `fake${next++}`))
      // The first `names` as fast as the insider can; then 100 new names every `everyMs`.
      if (next >= names) await new Promise(resolve => setTimeout(resolve, everyMs))
    }
  })()
  try {
    await eventually(`${names} names flooded`, () => next >= names, 120_000)
    const t0 = performance.now()
    const pod = joinMember(c, `pod-${n}`)
    try {
      await waitForSocket(pod.socket, pod.proc)
      const socketMs = performance.now() - t0
      const q = await QuotadClient.connect({ socketPath: pod.socket })
      let servedMs = NaN
      let boundMs = NaN
      try {
        await eventually('the member to be bound and served', async () => {
          if (Number.isNaN(boundMs)) {
            const seen = await Promise.all(['a', 'b'].map(async s => (await admissionOf(c.sockets[s]))?.peers.some(p => p.name === `pod-${n}`) === true))
            if (seen.every(x => x)) boundMs = performance.now() - t0
          }
          if (Number.isNaN(servedMs) && (await q.acquire('day', { waitMs: 500 })).allowed) servedMs = performance.now() - t0
          return !Number.isNaN(servedMs) && !Number.isNaN(boundMs)
        }, DEADLINE_MS).catch(() => {}) // not served in time: NaN, reported as such
      } finally { await q.close() }
      const perPeer = (await admissionOf(c.sockets.a))?.admission.perPeer ?? NaN
      // Whom the seeds penalised: the insider alone, or (a bug) an honest node too.
      const others = ['a', 'b'].flatMap(s => floodPenalties(c.procs[s]).filter(p => p.peerId !== rogue.peerId).map(p => `${s}:${p.name ?? p.peerId}`))
      return { socketMs, servedMs, boundMs, perPeer, flood: `${await floodCounters(c.sockets.a)}${others.length > 0 ? `; ALSO PENALISED ${others.join(' ')}` : ''}` }
    } finally { await stop(pod.proc) }
  } finally {
    flooding = false
    await loop
    await rogue.stop()
    await c.stopAll()
  }
}

async function main (): Promise<void> {
  const i = process.argv.indexOf('--trials')
  const trials = i > 0 ? Number(process.argv[i + 1]) : 3
  const e = process.argv.indexOf('--every-ms')
  const everyMs = e > 0 ? Number(process.argv[e + 1]) : 1000
  const k = process.argv.indexOf('--names')
  const names = k > 0 ? Number(process.argv[k + 1]) : 1000
  printMachine(machineInfo())
  process.stdout.write(names === 0
    ? 'a member joins two seeds, no flood (an insider connected, silent)\n'
    : `a member joins two seeds during a flood of made-up names from one insider peer id (${names} names, then 100 more every ${everyMs} ms)\n`)
  process.stdout.write('trial  socket up (ms)  both seeds know it (ms)  first allowed acquire (ms)  refused at a (one per peer id)  load (1 min)  flood guard at a\n')
  const ms = (x: number): string => Number.isNaN(x) ? `> ${DEADLINE_MS}` : String(Math.round(x))
  const served: number[] = []
  for (let n = 1; n <= trials; n++) {
    const r = await trial(n, everyMs, names)
    served.push(Number.isNaN(r.servedMs) ? Infinity : r.servedMs)
    process.stdout.write(`${String(n).padEnd(7)}${ms(r.socketMs).padEnd(16)}${ms(r.boundMs).padEnd(25)}${ms(r.servedMs).padEnd(28)}${String(r.perPeer).padEnd(32)}${os.loadavg()[0].toFixed(2).padEnd(14)}${r.flood}\n`)
  }
  served.sort((x, y) => x - y)
  const mid = served.length % 2 === 1 ? served[(served.length - 1) / 2] : (served[served.length / 2 - 1] + served[served.length / 2]) / 2
  process.stdout.write(`median start -> first allowed acquire: ${Number.isFinite(mid) ? `${Math.round(mid)} ms` : `not served within ${DEADLINE_MS} ms`}\n`)
}

main().catch(err => { process.stderr.write(`${(err as Error).stack ?? String(err)}\n`); process.exit(1) })
