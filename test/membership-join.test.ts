/**
 * Joining without editing files, on real processes: a node that is not in
 * the cluster file starts from environment variables alone (as a Kubernetes
 * sidecar would, with the pod's name), the seeds learn it through gossip and
 * it gets tokens by transfer. A second process under the same name, with
 * another identity, is refused on both sides with E_NAME_TAKEN, and the
 * first keeps working.
 */
import test from 'ava'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { ANY_PORT, makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { eventually, startQuotad, stop, waitForLog, waitForSocket, type Proc } from './helpers/proc.js'

const DAY = [{ name: 'day', match: 'day', limit: 90, per: '1d', algorithm: 'fixed-window' }]

interface Status {
  cluster: { peerId: string, nameTaken?: { seeds: string[], heldBy: string | null } }
  peers: Array<{ name: string, alive: boolean }>
}

async function status (socketPath: string): Promise<Status> {
  const q = await QuotadClient.connect({ socketPath })
  try { return await q.status() as unknown as Status } finally { await q.close() }
}

function member (c: TestCluster, name: string, dir: string): { proc: Proc, socket: string } {
  const socket = join(c.dir, `${dir}.sock`)
  // Only the shared file on the command line; everything per instance comes from the environment.
  const proc = startQuotad(['--config', c.file, '--log-level', 'debug'], {
    QUOTAD_NODE: name, QUOTAD_LISTEN: ANY_PORT, QUOTAD_SOCKET: socket, QUOTAD_DATA_DIR: join(c.dir, 'data', dir)
  })
  return { proc, socket }
}

test.serial('a node not in the file joins from env alone; a second process in its name is refused on both sides', async t => {
  t.timeout(180_000)
  const c = await makeCluster(['a', 'b'], DAY)
  const extra: Proc[] = []
  t.teardown(async () => { await c.stopAll(); await Promise.all(extra.map(async p => await stop(p))) })
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)

  const pod = member(c, 'pod-7f3c', 'pod-7f3c')
  extra.push(pod.proc)
  await waitForSocket(pod.socket, pod.proc)
  for (const seed of ['a', 'b']) {
    await eventually(`${seed} to learn pod-7f3c through gossip`, async () => (await status(c.sockets[seed])).peers.some(p => p.name === 'pod-7f3c' && p.alive))
  }
  const q = await QuotadClient.connect({ socketPath: pod.socket })
  t.teardown(async () => await q.close())
  // It starts with nothing and is served once tokens arrive by transfer (waitMs covers the round trip).
  await eventually('pod-7f3c to be served', async () => (await q.acquire('day', { waitMs: 2000 })).allowed)
  const podId = (await status(pod.socket)).cluster.peerId

  const twin = member(c, 'pod-7f3c', 'pod-7f3c-copy')
  extra.push(twin.proc)
  await waitForSocket(twin.socket, twin.proc)
  await waitForLog(c.procs.a, 'E_NAME_TAKEN')
  await waitForLog(twin.proc, 'E_NAME_TAKEN')
  const taken = await eventually('the twin to see its name taken in status', async () => (await status(twin.socket)).cluster.nameTaken)
  t.true(taken.seeds.length > 0 && taken.seeds.every(s => ['a', 'b'].includes(s)), JSON.stringify(taken))
  t.is(taken.heldBy, podId, 'the twin is told which peer id holds the name')
  t.is((await status(pod.socket)).cluster.nameTaken, undefined, 'the first process is not refused')
  t.true((await status(c.sockets.a)).peers.some(p => p.name === 'pod-7f3c' && p.alive), 'the seed still hears the first process')
  // The first keeps being served: tokens still move to it.
  await eventually('pod-7f3c to be served again', async () => (await q.acquire('day', { waitMs: 2000 })).allowed)
})
