/**
 * An insider for real-process tests: a real libp2p node that holds the
 * cluster's swarm key but no name of its own (as in insider.test.ts), the
 * member gossip it forges, and a member process that joins without being in
 * the cluster file (as in membership-join.test.ts). For the admission flood
 * (insider-admission.test.ts), the protocol document's check against real
 * gossip (protocol-doc.test.ts) and bench/member-flood.ts.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { QuotadClient } from '@quotad/client'
import { parseSwarmKey } from '../../src/config/swarm-key.js'
import { CLUSTER_VERSION, membersTopic } from '../../src/cluster/messages.js'
import { createTransport } from '../../src/cluster/transport/libp2p-transport.js'
import type { Transport } from '../../src/cluster/transport/types.js'
import { ANY_PORT, type TestCluster } from './cluster-procs.js'
import { startQuotad, tempDir, type Proc } from './proc.js'

const packr = new Packr({ useRecords: false })

/**
 * A libp2p node with the swarm key, dialling every node in the file. It
 * publishes on the members' topic (the seeds hear it) and hears `hear`
 * (default: that topic alone), handing each gossip's bytes to `onGossip`.
 */
export async function insiderNode (c: TestCluster, o: { hear?: string[], onGossip?: (from: string, data: Uint8Array) => void } = {}): Promise<Transport> {
  const cfg = JSON.parse(readFileSync(c.file, 'utf8')) as { cluster: { name: string }, nodes: Array<{ listen: string }> }
  const topics = o.hear ?? [membersTopic(cfg.cluster.name)]
  const t = await createTransport({
    listen: ANY_PORT,
    seeds: cfg.nodes.map(n => n.listen).filter(l => !l.endsWith('/tcp/0')),
    psk: parseSwarmKey(readFileSync(join(c.dir, 'swarm.key'), 'utf8')),
    dataDir: join(tempDir(), 'insider'),
    topic: topics[0],
    alsoSubscribe: topics.slice(1),
    publishTopic: membersTopic(cfg.cluster.name)
  })
  t.onGossip = o.onGossip ?? (() => {})
  t.onRequest = () => new Uint8Array(0)
  t.onCall = () => new Uint8Array(0)
  t.onPeer = () => {}
  await t.start()
  return t
}

/** A member's first gossip in `node`'s name, plain msgpack: it holds nothing (`alloc: false`), under another cluster hash. */
export function memberGossip (node: string, seq = 1): Uint8Array {
  return packr.pack({ v: CLUSTER_VERSION, t: 'gossip', node, epoch: `e${node}`.slice(0, 64), inc: 1, seq, now: Date.now(), pending: [], carries: [], cfg: 'insider', rules: {}, keys: [], acks: [], alloc: false })
}

/** Speak once for each of `names` (a burst; pubsub may drop some of a burst on a busy machine: callers repeat). */
export async function flood (t: Transport, names: readonly string[]): Promise<void> {
  for (const n of names) await t.publish(memberGossip(n)).catch(() => 0)
}

/** A member not in the cluster file, from the environment alone (as a sidecar joins), listening on any port. */
export function joinMember (c: TestCluster, name: string): { proc: Proc, socket: string } {
  const socket = join(c.dir, `${name}.sock`)
  const proc = startQuotad(['--config', c.file], {
    QUOTAD_NODE: name, QUOTAD_LISTEN: ANY_PORT, QUOTAD_SOCKET: socket, QUOTAD_DATA_DIR: join(c.dir, 'data', name)
  })
  return { proc, socket }
}

export interface Admission { full: number, perPeer: number, perHost: number, notConnected: number, freed: number, admitted: number }

/**
 * A node's admission counters (membership.ts) and its peers as status shows
 * them; null when the socket did not answer (a seed under a flood on a busy
 * machine may drop a status connection: callers ask again).
 */
export async function admissionOf (socketPath: string): Promise<{ admission: Admission, peers: Array<{ name: string, alive: boolean }> } | null> {
  let q: QuotadClient | undefined
  try {
    q = await QuotadClient.connect({ socketPath })
    const s = await q.status() as unknown as { cluster: { admission: Admission }, peers: Array<{ name: string, alive: boolean }> }
    return { admission: s.cluster.admission, peers: s.peers }
  } catch {
    return null
  } finally { await q?.close().catch(() => {}) }
}

/** A node's transport counters (status `cluster.transport`), or null when the socket did not answer (see admissionOf). */
export async function transportOf (socketPath: string): Promise<Record<string, number> | null> {
  let q: QuotadClient | undefined
  try {
    q = await QuotadClient.connect({ socketPath })
    return (await q.status() as unknown as { cluster: { transport: Record<string, number> } }).cluster.transport
  } catch {
    return null
  } finally { await q?.close().catch(() => {}) }
}

/** What a quotad process logged of peers its transport penalised for flooding gossip (flood-guard.ts): peer id and the name it held there. */
export function floodPenalties (proc: Proc): Array<{ peerId: string, name: string | null }> {
  const out: Array<{ peerId: string, name: string | null }> = []
  for (const line of proc.stderr().split('\n')) {
    if (!line.includes('"a peer floods gossip')) continue
    try {
      const l = JSON.parse(line) as { peerId: string, name: string | null }
      out.push({ peerId: l.peerId, name: l.name })
    } catch { // a line cut short: not one of ours
    }
  }
  return out
}
