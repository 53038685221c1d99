/**
 * The seeds' journal copies over the virtual network (replication.ts,
 * replica-store.ts), as the daemon sends them (replica-link.ts,
 * cluster-node.ts): a jrep is carried with latency and loss, the replica
 * writes the change to its virtual disk before it answers, and a grant
 * leaves its seed only once its give is durable at a quorum of seeds. The
 * replica witness (replica-check.ts) judges each departure from the disks.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { Grant } from '../cluster/messages.js'
import { encodeJrep, type Jget, type Jrep } from '../cluster/replica-messages.js'
import type { ReplicaWitness } from './replica-check.js'
import { idOf, type SimNode } from './sim-node.js'
import { decodeRequest, encodeRequest } from '../cluster/request-codec.js'


/** What it needs of the virtual cluster. */
export interface SimNet {
  readonly nodes: ReadonlyMap<string, SimNode>
  readonly replicaWitness: ReplicaWitness
  readonly now: number
  mono: (name: string) => number
  at: (t: number, f: () => void) => void
  transmit: (from: string, to: string, bytes: Uint8Array, deliver: () => void) => void
  count: (from: string, bytes: number, type: string) => void
}

export class SimReplication {
  private readonly net: SimNet

  constructor (net: SimNet) {
    this.net = net
  }

  /** Send a node's pending journal text to the seeds that lack it. */
  more (n: SimNode, core: ClusterCore): void {
    for (const r of core.replication.outbound(this.net.mono(n.name))) this.send(n, core, r.to, r.msg, r.z)
  }

  /** One jrep and its jack: the replica writes the change to its disk, then answers. */
  send (sender: SimNode, core: ClusterCore, to: string, msg: Jrep, z: string | null): void {
    const net = this.net
    const settle = once(sender, core)
    net.at(net.now + core.tuning.wantTimeoutMs, () => { if (settle()) core.replication.onFailed(to, net.mono(sender.name)) })
    const bytes = encodeRequest(encodeJrep(msg, z))
    net.count(sender.name, bytes.length, msg.t)
    net.transmit(sender.name, to, bytes, () => {
      const target = net.nodes.get(to)
      const tc = target?.core
      if (target === undefined || tc == null) return
      const m = decodeRequest(bytes)
      if (m.t !== 'jrep') return
      const r = tc.onJournalWrite(m, idOf(sender.name))
      if (r === null) return
      const c = r.change
      if (c !== null) {
        if (c.superseded !== undefined) target.superseded.set(c.writer, c.superseded.text)
        target.replicas.set(c.writer, c.kind === 'replace' ? c.text : (target.replicas.get(c.writer) ?? '') + c.text)
        net.replicaWitness.wrote(target.name, c.writer, c.text, c.kind === 'replace')
        tc.replicas?.commit(c)
      }
      const ack = tc.journalAck(m.node)
      const back = encodeRequest(ack)
      net.count(to, back.length, ack.t)
      net.transmit(to, sender.name, back, () => {
        const a = decodeRequest(back)
        if (a.t !== 'jack' || !settle()) return
        core.replication.onAck(to, a, net.mono(sender.name))
        this.more(sender, core)
      })
    })
  }

  /** A heir's jget and its jcopy (heir.ts), as the daemon reads a dead seed's copies (replica-link.ts). */
  read (sender: SimNode, core: ClusterCore, to: string, msg: Jget): void {
    const net = this.net
    const settle = once(sender, core)
    net.at(net.now + core.tuning.wantTimeoutMs, () => { if (settle()) core.heir.onJgetFailed(to, msg.writer, net.mono(sender.name)) })
    const bytes = encodeRequest(msg)
    net.count(sender.name, bytes.length, msg.t)
    net.transmit(sender.name, to, bytes, () => {
      const tc = net.nodes.get(to)?.core
      if (tc == null) return
      const m = decodeRequest(bytes)
      if (m.t !== 'jget') return
      const reply = tc.onJget(m, idOf(sender.name))
      if (reply === null) return
      const back = encodeRequest(reply)
      net.count(to, back.length, reply.t)
      net.transmit(to, sender.name, back, () => {
        const a = decodeRequest(back)
        if (a.t !== 'jcopy' || !settle()) return
        core.heir.onJcopy(to, a, net.mono(sender.name))
      })
    })
  }

  /** Run `send` once grant `g` may leave `n`: its gives covered by reservations at a quorum of seeds, as the daemon sends a grant. */
  whenCovered (n: SimNode, core: ClusterCore, g: Grant, send: () => void): void {
    if (!core.replication.enabled) { send(); return }
    const keys = g.items.map(i => i[0])
    const given = keys.map(k => [k, core.replication.givenOf(k)] as [string, number])
    const gen = core.replication.head.gen
    core.replication.whenCovered(keys, this.net.mono(n.name), ok => {
      if (!ok || n.core !== core) return
      this.net.replicaWitness.leaves(n, core, gen, given, this.net.nodes, this.net.now)
      send()
    })
    this.more(n, core)
  }
}

/** A request's outcome (reply or timeout) is taken once, and only while its sender still runs the same incarnation. */
function once (sender: SimNode, core: ClusterCore): () => boolean {
  let settled = false
  return () => {
    if (settled) return false
    settled = true
    return sender.core === core
  }
}
