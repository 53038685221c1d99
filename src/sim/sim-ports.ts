/**
 * A simulated node's ports for the effects interpreter (node-effects.ts),
 * the one the daemon runs: its virtual disk (the SimNode's files: instant
 * and durable, so a kill -9 loses only what the interpreter had not yet
 * written), its virtual network (sim-dispatch.ts `transmit`: latency, loss,
 * duplicates, partitions and pauses, timeouts on the event queue) and its
 * clocks. What the simulator's audits watch goes in through the
 * interpreter's observer; no duty of the driver is done here.
 *
 * A port serves one incarnation (`core`): once it has crashed or stopped,
 * nothing it sent is answered to it (a dead process reads nothing), and its
 * disk writes are dropped (its files are what it left: a crash's journal,
 * a stop's snapshot).
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import { decisionOf } from '../cluster/forward-messages.js'
import { FORWARDS_PER_SEED, ForwardSlots } from '../cluster/forward-slots.js'
import { nextJournal } from '../cluster/journal.js'
import { DEFAULT_BOUNDS } from '../cluster/messages.js'
import { NodeEffects, type Done, type NetPort } from '../cluster/node-effects.js'
import { decodeRequest } from '../cluster/request-codec.js'
import { encodeCallFrame } from '../cluster/transport/framing.js'
import { LogOnce } from '../util/log-once.js'
import { silentLogger } from '../util/log.js'
import { published } from './sim-dispatch.js'
import { idOf, type SimNode } from './sim-node.js'
import type { VirtualCluster } from './virtual-cluster.js'

/** The effects interpreter for incarnation `core` of node `n`, on the virtual cluster's disk, network and clocks. */
export function simEffects (vc: VirtualCluster, n: SimNode, core: ClusterCore): NodeEffects {
  const live = (): boolean => n.core === core
  const mono = (): number => vc.mono(n.name)
  return new NodeEffects({
    core,
    disk: {
      writeJournal: (w, done) => {
        if (live()) {
          n.journal = nextJournal(n.journal, w)
          vc.replicaWitness.wrote(n.name, n.name, w.checkpoint !== null ? `${w.checkpoint}\n` : `${w.batch as string}\n`, w.checkpoint !== null)
        }
        done(null)
      },
      writeReplica: (c, done) => {
        if (live()) {
          if (c.superseded !== undefined) n.superseded.set(c.writer, c.superseded.text)
          n.replicas.set(c.writer, c.kind === 'replace' ? c.text : (n.replicas.get(c.writer) ?? '') + c.text)
          vc.replicaWitness.wrote(n.name, c.writer, c.text, c.kind === 'replace')
        }
        done(null)
      },
      writeAttestations: (attested, done) => {
        if (live()) n.attest = new Map(attested)
        done(null)
      }
    },
    net: simNet(vc, n, core),
    clock: { mono },
    bounds: DEFAULT_BOUNDS,
    log: silentLogger,
    once: new LogOnce(mono),
    slots: new ForwardSlots(FORWARDS_PER_SEED, (ms, f) => {
      let on = true
      vc.at(vc.now + ms, () => { if (on) f() })
      return () => { on = false }
    }),
    onTokens: () => { vc.poll(n, core) },
    acquire: (key, count, waitMs, here, late) => vc.acquire(n.name, key, count, late, waitMs, here),
    observe: {
      granted: g => { vc.audit.granted(g); vc.positions.granted(g) },
      covering: g => {
        if (!core.replication.enabled) return undefined
        const given = g.items.map(i => [i[0], core.replication.givenOf(i[0])] as [string, number])
        const gen = core.replication.head.gen
        return () => { if (live()) vc.replicaWitness.leaves(n, core, gen, given, vc.nodes, vc.now) }
      },
      applied: () => { vc.audit.settle() },
      forwardRead: m => {
        // The invariant key numbers stand on: a seed never reads a live member's number as another key.
        const r = vc.reading
        if (r !== null && m.key !== r.req.key && r.sender.core === r.core) throw new Error(`${n.name} read ${r.sender.name}'s key number ${r.req.ref ?? '-'} as "${m.key}", sent for "${r.req.key}"`)
      },
      decided: (m, reply) => {
        if (reply.code !== undefined) return
        const rule = core.limiter.ruleFor(m.key)
        vc.onDecided?.(n.name, m.key, m.count, decisionOf(reply, rule?.stock ?? 0, rule?.name ?? ''), false)
      },
      credit: (seed, key, count, d) => { vc.onDecided?.(seed, key, count, d, true) }
    }
  })
}

/** Requests and calls over the virtual network, each settled once, and only while this incarnation runs. */
function simNet (vc: VirtualCluster, n: SimNode, core: ClusterCore): NetPort {
  const once = (timeoutMs: number, done: Done<Uint8Array>): Done<Uint8Array> => {
    let settled = false
    const settle: Done<Uint8Array> = (err, v) => {
      if (settled) return
      settled = true
      if (n.core === core) done(err, v)
    }
    vc.at(vc.now + timeoutMs, () => { settle(new Error('no answer in time')) })
    return settle
  }
  return {
    request: (to, _peerId, bytes, msg, timeoutMs, done) => {
      const direct = msg.t === 'want' || msg.t === 'grant' || msg.t === 'ack'
      const waitMs = direct ? vc.opts.requestTimeoutMs ?? timeoutMs : timeoutMs
      const settle = once(waitMs, done)
      vc.count(n.name, bytes.length, msg.t)
      vc.transmit(n.name, to, bytes, () => {
        const target = vc.nodes.get(to)
        // A stopped node's transport stays open a moment (LINGER_MS): its core still answers wants, grants and acks.
        const fx = target?.effects ?? (direct ? target?.lingering : null)
        if (target === undefined || fx == null) return
        fx.serveRequest(idOf(n.name), bytes, (err, back) => {
          if (err != null || back === undefined) return
          const reply = decodeRequest(back)
          vc.count(to, back.length, reply.t)
          vc.transmit(to, n.name, back, () => { settle(null, back) }, reply.t === 'grant' ? reply : undefined)
        })
      }, msg.t === 'grant' ? msg : undefined, false, vc.now + waitMs)
    },
    call: (to, _peerId, bytes, msg, timeoutMs, done) => {
      const settle = once(timeoutMs, done)
      const framed = onSession(bytes)
      vc.count(n.name, framed.length, 'fwd')
      vc.transmit(n.name, to, framed, () => {
        const target = vc.nodes.get(to)
        const fx = target?.effects
        if (target === undefined || fx == null || target.state !== 'up') return
        vc.reading = { req: msg, sender: n, core }
        try {
          fx.serveCall(idOf(n.name), bytes, (err, back) => {
            if (err != null || back === undefined) return
            const framedBack = onSession(back)
            vc.count(to, framedBack.length, 'fans')
            vc.transmit(to, n.name, framedBack, () => { settle(null, back) })
          })
        } finally {
          vc.reading = null
        }
      })
    },
    publish: (msg, members) => { published(vc, n.name, core, msg, members) }
  }
}

/**
 * A call's payload as its session carries it, counted whole: a varint
 * length, the call id and the payload (transport/framing.ts). The id is 0:
 * a member's session reuses the lowest free id (calls.ts), below 128 while
 * fewer than 128 calls are in flight on it, so one byte as here.
 */
function onSession (payload: Uint8Array): Uint8Array {
  return encodeCallFrame(0, payload)
}
