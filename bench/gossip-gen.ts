/**
 * A gossip generator for the latency bench (bench/latency.ts): one real
 * libp2p node (the daemon's own transport: TCP, the swarm key's pnet, noise,
 * yamux, gossipsub) that joins a cluster and publishes the gossip of `--peers`
 * fake members, so a real daemon receives the gossip volume of a large
 * cluster without running one process per peer.
 *
 * Each fake member has its own Ed25519 key and signs its own messages
 * (gossipsub StrictSign): the daemon verifies each signature and binds each
 * name to its key exactly as it would for real members (membership.ts: the
 * one seed admits them on their first gossip). gossipsub authors a message
 * with its `publishConfig`; swapping it before each publish is the only way
 * to author as another key through its public publish path (it is read
 * synchronously at the start of publish).
 *
 * The messages are valid gossip of the current version (messages.ts),
 * encoded as the daemon encodes its own (gossip-codec.ts), shaped like a member's:
 * one key line for `--key` (the daemon keeps lines only for keys it has),
 * the rules and cluster hash copied from the seed's own gossip (so the
 * members agree with it), `alloc: false`, and `--echoes` heard entries
 * (what a seed's gossip carries at N=200: echoes of about a quarter of its
 * peers per message; the daemon parses them and ignores a member's). Each
 * member gossips every `--interval-ms`, the members' phases spread over the
 * interval as unsynchronized timers would be, with a fresh `seq` each time
 * (a stale one would be skipped cheaply, and would understate the work).
 *
 * Prints one JSON line `{"ready":true,...}` once it has heard the seed and
 * started, then `{"published":N,"bytes":B,"failed":F}` (totals) every
 * `--report-ms`. Stops on SIGTERM.
 *
 * Run by bench/latency.ts; by hand:
 *   node dist/bench/gossip-gen.js --connect /ip4/127.0.0.1/tcp/PORT --swarm-key FILE --cluster NAME --key KEY [--peers 199]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { generateKeyPair, publicKeyToProtobuf } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { loadSwarmKey } from '../src/config/swarm-key.js'
import { CLUSTER_VERSION, gossipTopic, membersTopic, seedsTopic, type Gossip } from '../src/cluster/messages.js'
import { decodeGossip, encodeGossip } from '../src/cluster/gossip-codec.js'
import { createTransport } from '../src/cluster/transport/libp2p-transport.js'

interface Fake {
  name: string
  epoch: string
  seq: number
  config: { type: 0, author: unknown, key: Uint8Array, privateKey: unknown }
}

async function main (): Promise<void> {
  const { values } = parseArgs({
    options: {
      connect: { type: 'string' },
      'swarm-key': { type: 'string' },
      cluster: { type: 'string' },
      key: { type: 'string' },
      seed: { type: 'string', default: 'a' },
      peers: { type: 'string', default: '199' },
      'interval-ms': { type: 'string', default: '250' },
      echoes: { type: 'string', default: '0' },
      'report-ms': { type: 'string', default: '1000' }
    }
  })
  if (values.connect === undefined || values['swarm-key'] === undefined || values.cluster === undefined || values.key === undefined) {
    throw new Error('--connect, --swarm-key, --cluster and --key are required')
  }
  const peers = Number(values.peers)
  const intervalMs = Number(values['interval-ms'])
  const echoes = Number(values.echoes)
  const key = values.key
  const dir = mkdtempSync(path.join(os.tmpdir(), 'quotad-gossip-gen-'))
  const t = await createTransport({
    listen: '/ip4/127.0.0.1/tcp/0',
    seeds: [values.connect],
    psk: await loadSwarmKey(values['swarm-key']),
    dataDir: dir,
    // As the members hear: the seed's copy for members on the gossip topic. And the seeds' topic, where the seed's
    // gossip goes before it has heard a member (the fakes speak only once it has told them what to agree with).
    topic: gossipTopic(values.cluster),
    alsoSubscribe: [seedsTopic(values.cluster)],
    alsoPublish: [membersTopic(values.cluster)]
  })
  // The seed's own gossip tells the members what to agree with (rules, cluster hash).
  let seedView: { cfg: string, rules: Record<string, string>, inc: number, seq: number } | null = null
  t.onGossip = (_from, data) => {
    let m: Gossip
    try { m = decodeGossip(data) as Gossip } catch { return }
    if (m.node === values.seed) seedView = { cfg: m.cfg, rules: m.rules, inc: m.inc, seq: m.seq }
  }
  await t.start()
  const fakes: Fake[] = []
  for (let i = 1; i <= peers; i++) {
    const privateKey = await generateKeyPair('Ed25519')
    fakes.push({
      name: `m${String(i).padStart(3, '0')}`,
      epoch: randomBytes(8).toString('hex'),
      seq: 0,
      config: { type: 0, author: peerIdFromPrivateKey(privateKey as never), key: publicKeyToProtobuf(privateKey.publicKey as never), privateKey }
    })
  }
  while (seedView === null) await new Promise(resolve => setTimeout(resolve, 50))
  // Reached through the transport's private libp2p node: a bench tool, not an API.
  const pubsub = (t as unknown as { node: { services: { pubsub: { publishConfig: unknown, publish: (topic: string, data: Uint8Array) => Promise<unknown> } } } }).node.services.pubsub
  // Where members publish: the seeds hear it (member-sums.ts).
  const topic = membersTopic(values.cluster)
  let published = 0
  let bytes = 0
  let failed = 0
  const sendOne = (f: Fake): void => {
    const v = seedView as NonNullable<typeof seedView>
    f.seq++
    // A member's figures for the key: a few tokens held, some rate; they vary so no two messages are alike.
    const held = 5 + (f.seq % 17)
    const heard: Array<[string, number, number]> = []
    for (let j = 0; j < echoes; j++) {
      const other = fakes[(fakes.indexOf(f) + 1 + j) % fakes.length]
      heard.push([other.name, 1, other.seq])
    }
    const msg: Gossip = {
      v: CLUSTER_VERSION,
      t: 'gossip',
      node: f.name,
      epoch: f.epoch,
      inc: 1,
      seq: f.seq,
      now: Date.now(),
      pending: [],
      carries: [],
      cfg: v.cfg,
      rules: v.rules,
      keys: [[key, held, 0, 3 + (f.seq % 5), 0, 0, 0, 0]],
      acks: [],
      ...(heard.length > 0 ? { heard } : {}),
      alloc: false
    }
    const data = encodeGossip(msg)
    pubsub.publishConfig = f.config
    pubsub.publish(topic, data).then(() => { published++; bytes += data.byteLength }, () => { failed++ })
  }
  // Spread: member i sends at phase i/peers of the interval; a 2 ms timer sends whoever is due.
  const t0 = Date.now()
  const next = fakes.map((_f, i) => t0 + intervalMs * i / peers)
  const timer = setInterval(() => {
    const now = Date.now()
    for (let i = 0; i < fakes.length; i++) {
      if (next[i] > now) continue
      next[i] += intervalMs
      if (next[i] < now) next[i] = now + intervalMs // behind (a busy machine): skip rather than burst
      sendOne(fakes[i])
    }
  }, 2)
  process.stdout.write(JSON.stringify({ ready: true, peerId: t.peerId, peers, intervalMs, echoes }) + '\n')
  const report = setInterval(() => {
    process.stdout.write(JSON.stringify({ published, bytes, failed }) + '\n')
  }, Number(values['report-ms']))
  const stop = async (): Promise<void> => {
    clearInterval(timer)
    clearInterval(report)
    await t.stop().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  }
  process.once('SIGTERM', () => { void stop() })
  process.once('SIGINT', () => { void stop() })
}

main().catch(err => {
  process.stderr.write(`gossip-gen failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
