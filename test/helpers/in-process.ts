/**
 * An N-node cluster of Daemons in this process: real libp2p on loopback,
 * real Unix sockets, free ports. Faster to start than processes, and the
 * nodes' state machines can be inspected directly.
 */
import { join } from 'node:path'
import { Daemon } from '../../src/daemon.js'
import { validateClusterFile } from '../../src/config/validate.js'
import { writeSwarmKey } from '../../src/config/swarm-key.js'
import { silentLogger } from '../../src/util/log.js'
import { freePort } from './cluster-procs.js'
import { tempDir } from './proc.js'

export interface InProcessCluster {
  daemons: Map<string, Daemon>
  sockets: Record<string, string>
  stop: () => Promise<void>
}

export async function startInProcess (names: string[], rules: unknown[]): Promise<InProcessCluster> {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  const nodes = []
  for (const name of names) nodes.push({ name, listen: `/ip4/127.0.0.1/tcp/${await freePort()}`, socket: `${name}.sock`, dataDir: `data/${name}` })
  const config = validateClusterFile({ cluster: { name: 'inproc', secretFile: 'swarm.key', gossipIntervalMs: 100 }, nodes, rules }, dir)
  const daemons = new Map<string, Daemon>()
  await Promise.all(names.map(async name => daemons.set(name, await Daemon.start({ config, node: name, logger: silentLogger }))))
  return {
    daemons,
    sockets: Object.fromEntries(config.nodes.map(n => [n.name, n.socket])),
    stop: async () => { await Promise.all([...daemons.values()].map(async d => await d.stop())) }
  }
}
