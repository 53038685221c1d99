/**
 * A rate gossiped as decaying (gossip `decay`, key-ext.ts `decayed`): a
 * node whose demand stopped says its rate once, marked as falling at the
 * half-life, and not again while it follows that curve; a peer reads it
 * fallen by the time passed. New demand takes the line off the curve, and
 * it goes out again. On real ClusterCores, the message through msgpack and
 * the parser as the wire carries it.
 */
import test from 'ava'
import { Packr } from 'msgpackr'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { CLUSTER_VERSION, parseMessage, type Gossip, type GossipKey } from '../src/cluster/messages.js'
import { handCore } from './helpers/hand-core.js'
import { rule } from './helpers/rules.js'

const T = 0
const packr = new Packr({ useRecords: false })
const wire = (g: Gossip): Gossip => parseMessage(packr.unpack(packr.pack(g))) as Gossip

function core (node: 'a' | 'b'): ClusterCore {
  return handCore(node, [rule({ name: 'day', limit: 100, perMs: 86_400_000 })])
}

const line = (g: Gossip): GossipKey | undefined => g.keys.find(k => k[0] === 'day')
const decays = (g: Gossip): boolean => g.decay?.includes(g.keys.findIndex(k => k[0] === 'day')) === true

test('a falling rate is said once, marked as decaying; the peer reads it fallen; new demand sends it again', t => {
  const a = core('a')
  const b = core('b')
  a.onGossip(wire(b.gossip.now(T)), 'id:b', T)
  // Every gossip a sends (its ticks publish them), through the wire to b.
  const sent: Array<[number, Gossip]> = []
  const run = (from: number, to: number, demandEveryMs = 0): void => {
    for (let ms = from; ms < to; ms += 50) {
      if (demandEveryMs > 0 && (ms - from) % demandEveryMs === 0) a.acquire('day', 1, T + ms)
      for (const o of a.tick(T + ms)) {
        if (o.kind !== 'gossip') continue
        // A gossip that repeats the last goes as an hb (gossip-repeat.ts): no key line in it.
        if (o.msg.t === 'hb') { b.onGossip(o.msg, 'id:a', T + ms); continue }
        const g = wire(o.msg)
        sent.push([ms, g])
        b.onGossip(g, 'id:a', T + ms)
      }
    }
  }
  // A slow demand (a request every 100 ms: the quiet test never fires below about 11/s, so a's keep follows its
  // slow average down once the requests stop), then 3.5 s of none: a line is marked only after four gossip
  // intervals (1 s) without demand.
  run(0, 500, 100)
  run(500, 4000)
  const withDay = sent.filter(([, g]) => line(g) !== undefined)
  const [lastAt, last] = withDay[withDay.length - 1]
  const rate = (line(last) as GossipKey)[3]
  t.true(rate > 0.3, `a rate was said (${rate})`)
  t.true(decays(last), 'the last line went as decaying')
  // a's rate falls 8-fold over 1.5 s (three half-lives), and no line goes out for it.
  t.true(4000 - lastAt >= 1500, `no line for ${4000 - lastAt} ms after +${lastAt} (lines at ${withDay.map(([ms]) => ms).join(', ')})`)

  // b reads it fallen by the half-life (500 ms) as time passes.
  const entry = b.peers.get('a')?.keys.get('day')
  t.truthy(entry)
  const at = (ms: number): number => b.view.lineRate(entry as NonNullable<typeof entry>, T + lastAt + ms)
  t.true(Math.abs(at(0) - rate) < 1e-9)
  t.true(Math.abs(at(500) - rate / 2) < 1e-9)
  t.true(Math.abs(at(1000) - rate / 4) < 1e-9)

  // New demand: the rate leaves the curve, and the line goes out, not marked while demand is recent.
  const before = sent.length
  run(4000, 4500, 50)
  const again = sent.slice(before).find(([, g]) => line(g) !== undefined)
  t.truthy(again, 'announced again')
  t.true((line((again as [number, Gossip])[1]) as GossipKey)[3] > at(1000) * 1.25, 'with the risen rate')
  t.false(decays((again as [number, Gossip])[1]), 'not marked while demand is recent')
})

test('a decay index must name a key line of the message', t => {
  const base = { v: CLUSTER_VERSION, t: 'gossip', node: 'b', epoch: 'eb', inc: 1, seq: 1, now: 5, pending: [], carries: [], cfg: 'h', rules: { day: 'x' }, keys: [['day', 1, 0, 2, 0, 0, 0, 0]], acks: [] }
  t.deepEqual((parseMessage(packr.unpack(packr.pack({ ...base, decay: [0] }))) as Gossip).decay, [0])
  t.false('decay' in (parseMessage(packr.unpack(packr.pack(base))) as Gossip), 'absent stays absent')
  for (const bad of [[1], [-1], [0.5], ['0'], [0, 0]]) {
    t.throws(() => parseMessage(packr.unpack(packr.pack({ ...base, decay: bad }))), undefined, JSON.stringify(bad))
  }
})
