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
import { ANY_PORT } from './cluster-procs.js'
import { peerIdOf } from '../../src/cluster/transport/identity.js'
import { tempDir } from './proc.js'

export interface InProcessCluster {
  daemons: Map<string, Daemon>
  sockets: Record<string, string>
  stop: () => Promise<void>
}

export async function startInProcess (names: string[], rules: unknown[]): Promise<InProcessCluster> {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  // Each node listens on port 0 (the OS picks); the next ones are told the real addresses of those before them.
  const nodes = await Promise.all(names.map(async name => ({
    name, listen: ANY_PORT, socket: `${name}.sock`, dataDir: `data/${name}`, peerId: (await peerIdOf(join(dir, 'data', name))).peerId
  })))
  const raw = { cluster: { name: 'inproc', secretFile: 'swarm.key', gossipIntervalMs: 100 }, nodes, rules }
  const daemons = new Map<string, Daemon>()
  for (const [i, name] of names.entries()) {
    const d = await Daemon.start({ config: validateClusterFile(raw, dir), node: name, logger: silentLogger })
    daemons.set(name, d)
    const listen = (d.cluster?.status().cluster as { listen?: string[] } | undefined)?.listen?.[0]?.replace(/\/p2p\/.*$/, '')
    if (listen !== undefined) nodes[i].listen = listen
  }
  const config = validateClusterFile(raw, dir)
  return {
    daemons,
    sockets: Object.fromEntries(config.nodes.map(n => [n.name, n.socket])),
    stop: async () => { await Promise.all([...daemons.values()].map(async d => await d.stop())) }
  }
}
