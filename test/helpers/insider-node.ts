/**
 * An insider that joins as a member: a real libp2p node that holds the
 * swarm key, gossips on the members' topic under a free name until the
 * seeds admit it (membership.ts), and then speaks the cluster protocol by
 * hand: its gossip says whatever it likes, it pushes grants, and it answers
 * (or ignores) the seeds' wants as a test tells it. It learns the cluster
 * hash and the rule hashes from the seeds' gossip, as any member would.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { parseSwarmKey } from '../../src/config/swarm-key.js'
import { decodeGossip } from '../../src/cluster/gossip-codec.js'
import { CLUSTER_VERSION, gossipTopic, membersTopic, seedsTopic, type Want } from '../../src/cluster/messages.js'
import { decodeRequest, encodeRequest } from '../../src/cluster/request-codec.js'
import { createTransport } from '../../src/cluster/transport/libp2p-transport.js'
import type { Transport } from '../../src/cluster/transport/types.js'
import type { TestCluster } from './cluster-procs.js'
import { tempDir } from './proc.js'

const packr = new Packr({ useRecords: false })

/** What a rogue does with a want a seed sends it: the grant's items, or null to answer `none`, or 'never' not to answer. */
export type WantAnswer = (w: Want, from: string) => Array<[string, number, number]> | null | 'never'

export class InsiderMember {
  readonly name: string
  readonly epoch: string
  readonly t: Transport
  /** The cluster hash and rules its gossip says (learned from the seeds', unless a test sets them). */
  cfg: string | undefined
  rules: Record<string, string> | undefined
  /** The key lines its gossip says: [key, held, outstanding, rate, owed, debts, deferred, inTransitOut]. */
  keys: unknown[] = []
  onWant: WantAnswer = () => null
  /** Its acks, as its gossip says them: [giver, giver epoch, applied] (so the giver's books count what it lent as held here). */
  acks: Array<[string, string, number]> = []
  /** Wants the seeds sent it, and grants it got in answer to its own wants or pushed to it. */
  wantsIn = 0
  private seq = 0
  private readonly nextSeq = new Map<string, number>()
  private timer: NodeJS.Timeout | undefined

  private constructor (name: string, t: Transport) {
    this.name = name
    this.epoch = `${name}.e${Math.floor(Math.random() * 1e9)}`
    this.t = t
  }

  /** Start it, dialled to the cluster's seeds (it gossips once `gossipEvery` is called). */
  static async start (c: TestCluster, name: string): Promise<InsiderMember> {
    const cfg = JSON.parse(readFileSync(c.file, 'utf8')) as { nodes: Array<{ listen: string }> }
    const t = await createTransport({
      listen: '/ip4/127.0.0.1/tcp/0',
      seeds: cfg.nodes.map(n => n.listen).filter(l => !l.endsWith('/tcp/0')),
      psk: parseSwarmKey(readFileSync(join(c.dir, 'swarm.key'), 'utf8')),
      dataDir: join(tempDir(), name),
      // As a member: it hears the seeds' members' copy and publishes where the seeds hear members.
      topic: gossipTopic('test'),
      publishTopic: membersTopic('test'),
      // And the seeds' own topic (an insider may subscribe anywhere): their gossip says the cluster hash and rules.
      alsoSubscribe: [seedsTopic('test')]
    })
    const m = new InsiderMember(name, t)
    t.onGossip = (_from, data) => {
      try {
        const g = decodeGossip(data)
        if (g.t === 'gossip') { m.cfg ??= g.cfg; m.rules ??= g.rules }
      } catch {
        // Not a gossip it can read (an `hb`, a deflated copy of another version): it learns from the next.
      }
    }
    t.onRequest = async (from, data) => await m.answer(from, data)
    t.onCall = () => new Uint8Array(0)
    t.onPeer = () => {}
    await t.start()
    return m
  }

  /** Gossip now and every `everyMs` (once it knows what to say). */
  gossipEvery (everyMs: number): void {
    const tick = (): void => { void this.gossip().catch(() => undefined) }
    tick()
    this.timer = setInterval(tick, everyMs)
  }

  async gossip (): Promise<number> {
    if (this.cfg === undefined || this.rules === undefined) return 0
    const g = { v: CLUSTER_VERSION, t: 'gossip', node: this.name, epoch: this.epoch, inc: 1, seq: ++this.seq, now: Date.now(), pending: [], carries: [], cfg: this.cfg, rules: this.rules, keys: this.keys, acks: this.acks }
    return await this.t.publish(packr.pack(g))
  }

  /** Push a grant of `items` to seed `to` (its epoch `toEpoch`, peer id `peerId`): the reply, decoded. */
  async push (to: string, toEpoch: string, peerId: string, items: Array<[string, number, number]>): Promise<{ t: string, applied?: number, refused?: boolean }> {
    const id = `${to}/${toEpoch}`
    const seq = this.nextSeq.get(id) ?? 1
    this.nextSeq.set(id, seq + 1)
    const g = { v: CLUSTER_VERSION, t: 'grant', node: this.name, epoch: this.epoch, inc: 1, to, toEpoch, seq, items }
    return decodeRequest(await this.t.request(peerId, encodeRequest(g), 10_000)) as { t: string, applied?: number, refused?: boolean }
  }

  /** Ask seed `to` for `want` of `key`: the reply, decoded (a grant it then holds by the seed's books). */
  async want (peerId: string, key: string, want: number): Promise<{ t: string, items?: Array<[string, number, number]> }> {
    const w = { v: CLUSTER_VERSION, t: 'want', node: this.name, epoch: this.epoch, inc: 1, key, want }
    const r = decodeRequest(await this.t.request(peerId, encodeRequest(w), 10_000)) as { t: string, node: string, epoch: string, seq?: number, items?: Array<[string, number, number]> }
    // Acked in its gossip, as an honest member does once it credits a grant.
    if (r.t === 'grant' && r.seq !== undefined) {
      this.acks = this.acks.filter(([n, e]) => n !== r.node || e !== r.epoch)
      this.acks.push([r.node, r.epoch, r.seq])
    }
    return r
  }

  private async answer (from: string, data: Uint8Array): Promise<Uint8Array> {
    const m = decodeRequest(data)
    const none = { v: CLUSTER_VERSION, t: 'none', node: this.name, epoch: this.epoch, inc: 1 }
    if (m.t !== 'want') return encodeRequest(none)
    this.wantsIn++
    const items = this.onWant(m, from)
    // Never answering: the seed's request times out (it resets the stream on stop).
    if (items === 'never') return await new Promise<Uint8Array>(() => {})
    if (items === null || items.length === 0) return encodeRequest(none)
    const id = `${m.node}/${m.epoch}`
    const seq = this.nextSeq.get(id) ?? 1
    this.nextSeq.set(id, seq + 1)
    const g = { v: CLUSTER_VERSION, t: 'grant', node: this.name, epoch: this.epoch, inc: 1, to: m.node, toEpoch: m.epoch, seq, items }
    return encodeRequest(g)
  }

  async stop (): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer)
    await this.t.stop()
  }
}

