/**
 * A SIGHUP while the daemon renews its cluster layer in-process (daemon.ts
 * `renew`: a quorum attested this incarnation dead, or its calendar must
 * realign). The reload reached the old layer only, and the new one started
 * from the file as it was before: it kept the old rules for good and
 * disagreed with every peer (chaos 3+2 seed 20: a seed attested dead 0.6 s
 * before a reload lowered `api` from 288 to 200 kept 288). In-process, with
 * a real libp2p node; the reload is made to land inside the renewal.
 */
import test from 'ava'
import { join } from 'node:path'
import { writeSwarmKey } from '../src/config/swarm-key.js'
import { validateClusterFile } from '../src/config/validate.js'
import { Daemon } from '../src/daemon.js'
import { silentLogger } from '../src/util/log.js'
import { tempDir } from './helpers/proc.js'

function file (limit: number): Record<string, unknown> {
  return {
    nodes: [
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data-a' },
      { name: 'b', listen: '/ip4/127.0.0.1/tcp/0', socket: 'b.sock', dataDir: 'data-b' }
    ],
    cluster: { name: 't', secretFile: 'swarm.key' },
    rules: [{ name: 'api', match: 'api', limit, per: '1s', algorithm: 'fixed-window', mode: 'hard' }]
  }
}

test.serial('a reload during an in-process renewal reaches the new incarnation', async t => {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  const before = validateClusterFile(file(300), dir)
  const after = validateClusterFile(file(100), dir)
  const d = await Daemon.start({ config: before, node: 'a', logger: silentLogger })
  t.teardown(async () => await d.stop())
  const first = d.cluster
  t.truthy(first)
  // The SIGHUP lands after the new layer was built from the file and before it serves.
  const statics = Daemon as unknown as { createCluster: (...a: unknown[]) => Promise<unknown> }
  const create = statics.createCluster
  statics.createCluster = async function (this: unknown, ...a: unknown[]) {
    const next = await create.apply(this, a)
    d.reload(after)
    return next
  }
  try {
    await d.renew('calendar')
  } finally {
    statics.createCluster = create
  }
  const next = d.cluster
  t.not(next, first, 'a new incarnation runs')
  t.is(next?.core.incarnation, 2)
  t.is(next?.core.limiter.rules.find(r => r.name === 'api')?.config.limit, 100, 'with the reloaded limit')
  t.is(d.quota.limiter.rules.find(r => r.name === 'api')?.config.limit, 100)
})
