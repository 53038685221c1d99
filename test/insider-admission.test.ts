/**
 * Member admission under an insider's flood (issue 46), on real processes:
 * two seeds, and insiders with the swarm key (real libp2p nodes, no name)
 * that speak for 1,000 made-up member names from one peer id and more from
 * three others. Each peer id holds at most one slot at a seed; a real
 * member (a process not in the file, joining with --node/--listen from the
 * environment) joins while the flood goes on and is served; once the flood
 * stops, its names' slots are freed after the lease (reclaimMs of silence:
 * they owe nothing). Conditions are waited for with generous deadlines; how
 * fast the member joins is measured in bench/member-flood.ts, not here.
 *
 * The names go out slower than the transport's flood guard allows (two
 * gossips per interval: 40 a second at the test's 100 ms, 80 at once), so
 * that admission, not the guard, is what bounds them here (10 a second from each peer id); a flood above
 * that is insider-flood-guard.test.ts.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { eventually, stop, waitForSocket, type Proc } from './helpers/proc.js'
import { admissionOf, flood, insiderNode, joinMember, type Admission } from './helpers/insider-flood.js'
import type { Transport } from '../src/cluster/transport/types.js'

const DAY = [{ name: 'day', match: 'day', limit: 100, per: '1d', algorithm: 'fixed-window' }]
const DEADLINE_MS = 120_000

test.serial('1,000 made-up names from one peer id, and more from three others, hold one slot per id; a real member joins meanwhile; silent names are freed', async t => {
  t.timeout(720_000)
  const c = await makeCluster(['a', 'b'], DAY)
  const extra: Proc[] = []
  const rogues: Transport[] = []
  t.teardown(async () => {
    await Promise.all(rogues.map(async r => await r.stop()))
    await c.stopAll()
    await Promise.all(extra.map(async p => await stop(p)))
  })
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  for (let i = 0; i < 4; i++) rogues.push(await insiderNode(c))
  await eventually('the insiders to be in the seeds\' gossip mesh', async () => {
    for (const r of rogues) if (await r.publish(new Uint8Array([0xc0])).catch(() => 0) === 0) return false
    return true
  }, DEADLINE_MS)

  // Most slots held by made-up names at either seed, seen at any poll.
  let most = 0
  const fakes = async (): Promise<number[]> => await Promise.all(['a', 'b'].map(async s => {
    const got = await admissionOf(c.sockets[s])
    if (got === null) return -1
    const real = got.peers.some(p => p.name === 'pod-1') ? 1 : 0
    most = Math.max(most, got.admission.admitted - real)
    return got.admission.admitted - real
  }))
  const admission = async (s: string): Promise<Admission> => (await eventually(`${s}'s status`, async () => await admissionOf(c.sockets[s]) ?? undefined, DEADLINE_MS)).admission
  const peers = async (s: string): Promise<Array<{ name: string, alive: boolean }>> => (await eventually(`${s}'s status`, async () => await admissionOf(c.sockets[s]) ?? undefined, DEADLINE_MS)).peers

  // 1. One peer id, 1,000 names, 10 a second (a quarter of the flood guard's budget: a seed's stall does not bunch
  //    them over it) until each seed refused 999 of them (a loaded machine's pubsub may drop some: repeat with new names).
  let next = 0
  await eventually('each seed to refuse 999 names past the first of one peer id', async () => {
    await flood(rogues[0], Array.from({ length: 20 }, () => `fake${next++}`))
    await new Promise(resolve => setTimeout(resolve, 2000))
    await fakes()
    const s = await Promise.all(['a', 'b'].map(async n => (await admissionOf(c.sockets[n]))?.admission))
    return s.every(x => x !== undefined && x.perPeer >= 999)
  }, 3 * DEADLINE_MS)

  // 2. The flood goes on, from all four peer ids, while a real member joins.
  let flooding = true
  const floodLoop = (async () => {
    let k = 0
    while (flooding) {
      await Promise.all(rogues.map(async (r, i) => await flood(r, Array.from({ length: 10 }, (_, j) => `r${i}-${k}-${j}`))))
      k++
      await new Promise(resolve => setTimeout(resolve, 1000))
    }
  })()
  await eventually('each seed to hold one slot per insider peer id', async () => (await fakes()).every(n => n === 4), DEADLINE_MS)
  const pod = joinMember(c, 'pod-1')
  extra.push(pod.proc)
  await waitForSocket(pod.socket, pod.proc)
  const q = await QuotadClient.connect({ socketPath: pod.socket })
  t.teardown(async () => await q.close())
  await eventually('the real member to be served during the flood', async () => (await q.acquire('day', { waitMs: 2000 })).allowed, DEADLINE_MS)
  for (const s of ['a', 'b']) {
    t.true((await peers(s)).some(p => p.name === 'pod-1'), `${s} knows the real member`)
    t.true((await admission(s)).perPeer >= 999, `${s} refused the names past one per peer id`)
  }
  await fakes()
  flooding = false
  await floodLoop

  // 3. The made-up names fall silent: their slots are freed after the lease; the member keeps its own.
  await eventually('every made-up name\'s slot to be freed', async () => (await fakes()).every(n => n === 0), DEADLINE_MS)
  for (const s of ['a', 'b']) {
    const a = await admission(s)
    t.true(a.freed >= 4, `${s} freed the silent slots (freed ${a.freed})`)
    t.is(a.admitted, 1, `${s} holds the real member's slot alone`)
    t.true((await peers(s)).some(p => p.name === 'pod-1'))
  }
  t.true(most <= 4, `at most one slot per insider peer id at a seed (most seen: ${most})`)
  await eventually('the real member to be served after the flood', async () => (await q.acquire('day', { waitMs: 2000 })).allowed, DEADLINE_MS)
})
