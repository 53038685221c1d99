/**
 * `cluster.voters` on real processes: three seeds of which only the first
 * votes (`voters: 1`). Every node holds its lease from a's echoes alone, and
 * when a dies the other two are fenced, though two seeds of three are up
 * (with every seed voting they would be a quorum). Conditions are waited
 * for, never timed.
 */
import test from 'ava'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { eventually } from './helpers/proc.js'
import { nodeStatus } from './helpers/settle.js'

const RULES = [{ name: 'api', match: 'api', limit: 300, per: '1s', algorithm: 'fixed-window', mode: 'hard' }]
const SLOW = 120_000

interface LeaseStatus { valid: boolean, voters: string[] }

async function leaseOf (socket: string): Promise<LeaseStatus> {
  const s = await nodeStatus(socket) as unknown as { cluster: { lease: LeaseStatus } }
  return s.cluster.lease
}

test.serial('the first seed alone votes: every seed holds its lease from its echoes, and is fenced once it is gone', async t => {
  t.timeout(SLOW)
  const c = await makeCluster(['a', 'b', 'c'], RULES, { cluster: { voters: 1 } })
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const seen: Record<string, LeaseStatus> = {}
  await eventually('every node to hold a lease voted by a alone', async () => {
    for (const n of c.names) seen[n] = await leaseOf(c.sockets[n])
    return c.names.every(n => seen[n].valid && seen[n].voters.join() === 'a')
  }, undefined, () => seen)
  for (const n of c.names) t.deepEqual(seen[n], { ...seen[n], valid: true, voters: ['a'] })
  c.procs.a.child.kill('SIGKILL')
  await eventually('b and c to be fenced without their only voter', async () => {
    for (const n of ['b', 'c']) seen[n] = await leaseOf(c.sockets[n])
    return !seen.b.valid && !seen.c.valid
  }, undefined, () => seen)
  t.false(seen.b.valid || seen.c.valid, 'two seeds of three, but no voter: fenced')
})
