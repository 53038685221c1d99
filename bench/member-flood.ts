/**
 * How long a real member takes to join while an insider floods made-up
 * member names (issue 46: "a real new member could not join within 10 s";
 * the target is 5 s). Real processes: seeds a and b, an insider (a libp2p
 * node with the swarm key, no name) that speaks for 1,000 names from one
 * peer id and keeps speaking for new ones, and a member process not in the
 * file (--node/--listen from the environment) started once the flood runs.
 * Measured per trial: from the member's start to its first allowed acquire
 * (a tokens-by-transfer round trip included), and to both seeds binding it.
 *
 *   node dist/bench/member-flood.js [--trials 3] [--every-ms 1000]
 */
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers } from '../test/helpers/cluster-procs.js'
import { eventually, stop, waitForSocket } from '../test/helpers/proc.js'
import { admissionOf, flood, insiderNode, joinMember } from '../test/helpers/insider-flood.js'
import { machineInfo, printMachine } from './lib/machine.js'

const DAY = [{ name: 'day', match: 'day', limit: 1000, per: '1d', algorithm: 'fixed-window' }]

async function trial (n: number, everyMs: number): Promise<{ servedMs: number, boundMs: number, perPeer: number }> {
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
    while (flooding) {
      await flood(rogue, Array.from({ length: 100 }, () => `fake${next++}`))
      // The first 1,000 as fast as the insider can; then 100 new names every `everyMs`.
      if (next >= 1000) await new Promise(resolve => setTimeout(resolve, everyMs))
    }
  })()
  try {
    await eventually('1,000 names flooded', () => next >= 1000, 120_000)
    const t0 = performance.now()
    const pod = joinMember(c, `pod-${n}`)
    try {
      await waitForSocket(pod.socket, pod.proc)
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
        }, 120_000)
      } finally { await q.close() }
      const perPeer = (await admissionOf(c.sockets.a))?.admission.perPeer ?? NaN
      return { servedMs, boundMs, perPeer }
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
  printMachine(machineInfo())
  process.stdout.write(`a member joins two seeds during a flood of made-up names from one insider peer id (1,000 names, then 100 more every ${everyMs} ms)\n`)
  process.stdout.write('trial  start -> both seeds know it (ms)  start -> first allowed acquire (ms)  names refused at a (one per peer id)\n')
  for (let n = 1; n <= trials; n++) {
    const r = await trial(n, everyMs)
    process.stdout.write(`${String(n).padEnd(7)}${String(Math.round(r.boundMs)).padEnd(35)}${String(Math.round(r.servedMs)).padEnd(37)}${r.perPeer}\n`)
  }
}

main().catch(err => { process.stderr.write(`${(err as Error).stack ?? String(err)}\n`); process.exit(1) })
