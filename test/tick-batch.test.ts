/**
 * One message per peer per tick (tick-batch.ts), through the daemon's own
 * tick, onWant, onGrant and onReply on the simulator's virtual cluster: a
 * node short of several keys asks each donor once, naming every key; the
 * donor answers with one grant of the keys it gives; each key's round
 * closes with the reply; a grant that gives a key the want did not name, or
 * more of one than it asked, is refused; and a member returning several
 * keys to its lender pushes them in one grant.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ClusterCore, Outbound } from '../src/cluster/cluster-core.js'
import { ext } from '../src/cluster/key-ext.js'
import { homeOf } from '../src/core/share.js'
import { wantItems, type Grant, type Want } from '../src/cluster/messages.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
const NODES = ['n0', 'n1', 'n2', 'n3']
const KEYS = Array.from({ length: 12 }, (_, i) => `k:${i}`)

/** n0 short of every key of a glob rule whose stock sits at each key's home; its tick's wants and the cluster. */
function shortOfAll (): { vc: VirtualCluster, c: ClusterCore, wants: Array<{ to: string, w: Want }> } {
  // A long window, so the horizon is the tuning's; peers stay alive without gossip (the cluster is left still).
  const vc = new VirtualCluster({ nodes: NODES, rules: [rule({ name: 'k', match: 'k:*', limit: 400, perMs: 86_400_000 })], limits: limits(), seed: 5, startMs: T0, tuning: { aliveTimeoutMs: 60_000 } })
  vc.runUntil(T0 + 3000)
  const c = vc.cores.get('n0') as ClusterCore
  for (const key of KEYS) {
    const ks = c.limiter.keyState(key, 1, vc.now)
    ks.bucket.advance(vc.now)
    ks.bucket.debit(ks.bucket.held)
    const x = ext(ks)
    x.rate = 20
    x.fastRate = 20
    x.lastDemandAt = vc.now
    c.active.add(ks)
  }
  const out: Outbound[] = c.tick(vc.now)
  const wants = out.flatMap(o => o.kind === 'request' && o.msg.t === 'want' ? [{ to: o.to, w: o.msg }] : [])
  return { vc, c, wants }
}

test('a node short of many keys sends each donor one want naming every key it asks that donor for', t => {
  const { c, wants } = shortOfAll()
  const donors = wants.map(x => x.to)
  t.is(new Set(donors).size, donors.length, `one want per donor: ${donors.join(', ')}`)
  const asked = wants.flatMap(x => wantItems(x.w).map(([k]) => k))
  t.deepEqual([...asked].sort(), [...KEYS].filter(k => homeOf(k, c.seeds, c.heir.homes) !== 'n0').sort(), 'every key not homed here, once')
  t.true(wants.some(x => (x.w.more?.length ?? 0) >= 1), 'some donor is asked for several keys in one message')
  for (const { to, w } of wants) {
    for (const [k] of wantItems(w)) t.is(homeOf(k, c.seeds, c.heir.homes), to, `${k} asked of its home, the one holder`)
  }
})

test('the donor answers with one grant of the keys it gives; each key\'s round closes and its tokens arrive', t => {
  const { vc, c, wants } = shortOfAll()
  const { to, w } = wants.find(x => (x.w.more?.length ?? 0) >= 1) as { to: string, w: Want }
  const donor = vc.cores.get(to) as ClusterCore
  const reply = donor.onWant(w, 'id:n0', vc.mono(to))
  t.is(reply.t, 'grant')
  const g = reply as Grant
  t.deepEqual(g.items.map(i => i[0]).sort(), wantItems(w).map(i => i[0]).sort(), 'one grant, every key asked (the home holds plenty)')
  for (const [key, n] of g.items) t.true(n <= (wantItems(w).find(i => i[0] === key)?.[1] ?? 0), `${key}: no more than asked`)
  for (const [key] of wantItems(w)) t.is(ext(c.limiter.existing(key) as never).wantsOut, 1, `${key}: its round waits for the answer`)
  c.onReply(w, g, vc.mono('n0'))
  for (const [key, n] of g.items) {
    const ks = c.limiter.existing(key)
    t.truthy(ks)
    if (ks === undefined) continue
    ks.bucket.advance(vc.now)
    t.is(ks.bucket.held, n, `${key}: its tokens arrived`)
    t.is(ext(ks).wantsOut, 0, `${key}: its round is over`)
  }
  t.is(c.counters.grantsRefused, 0)
})

test('a grant that gives a key the want did not name, or more of one than asked, is refused and credits nothing', t => {
  const { vc, c, wants } = shortOfAll()
  const { to, w } = wants.find(x => (x.w.more?.length ?? 0) >= 1) as { to: string, w: Want }
  const donor = vc.cores.get(to) as ClusterCore
  const honest = donor.onWant(w, 'id:n0', vc.mono(to)) as Grant
  const stranger = KEYS.find(k => !wantItems(w).some(i => i[0] === k)) as string
  const [first] = wantItems(w)
  const forged: Grant[] = [
    { ...honest, seq: honest.seq, items: [...honest.items, [stranger, 1, honest.items[0][2]]] },
    { ...honest, seq: honest.seq + 1, items: [[first[0], first[1] + 1, honest.items[0][2]]] }
  ]
  for (const f of forged) {
    const before = c.counters.grantsRefused
    c.onReply(w, f, vc.mono('n0'))
    t.is(c.counters.grantsRefused, before + 1, JSON.stringify(f.items))
  }
  for (const key of KEYS) {
    const ks = c.limiter.existing(key)
    if (ks !== undefined) { ks.bucket.advance(vc.now); t.is(ks.bucket.held, 0, `${key}: nothing credited`) }
  }
})

test('a member returning several keys to the seed that lent them pushes one grant of them all, and the seed credits every key', t => {
  const rules = ['a', 'b', 'c'].map(name => rule({ name, limit: 300, perMs: 86_400_000 }))
  const vc = new VirtualCluster({ nodes: ['s0', 's1', 'm0'], seeds: ['s0', 's1'], listed: ['s0', 's1', 'm0'], rules, limits: limits(), seed: 7, startMs: T0, tuning: { aliveTimeoutMs: 60_000 } })
  vc.runUntil(T0 + 3000)
  const seed = vc.cores.get('s0') as ClusterCore
  const member = vc.cores.get('m0') as ClusterCore
  const m0 = seed.peers.get('m0')
  t.truthy(m0)
  if (m0 === undefined) return
  // The seed lends the member 5 of each key; the member applies the grants, then has no use for them.
  for (const name of ['a', 'b', 'c']) {
    const ks = seed.limiter.keyState(name, 1, vc.mono('s0'))
    const g = seed.transfers.give(ks, ext(ks), m0, 5, vc.mono('s0'))
    t.truthy(g)
    if (g !== undefined) t.is(member.onGrant(g, 'id:s0', vc.mono('m0')).applied, g.seq)
  }
  const before = ['a', 'b', 'c'].map(k => (seed.limiter.existing(k) as never as { bucket: { held: number } }).bucket.held)
  for (const k of ['a', 'b', 'c']) {
    const ks = member.limiter.existing(k)
    t.truthy(ks)
    if (ks !== undefined) member.active.add(ks)
  }
  const out = member.tick(vc.mono('m0'))
  const pushes = out.flatMap(o => o.kind === 'request' && o.msg.t === 'grant' ? [o.msg] : [])
  t.is(pushes.length, 1, 'one grant for the three keys')
  const g = pushes[0] as Grant
  t.is(g.to, 's0')
  t.deepEqual(g.items.map(i => [i[0], i[1]]).sort(), [['a', 5], ['b', 5], ['c', 5]])
  const ack = seed.onGrant(g, 'id:m0', vc.mono('s0'))
  t.is(seed.ledger.appliedFrom('m0', member.epoch), g.seq, 'applied')
  // A replicating seed acks it once a quorum of its journal copies holds the credit (durable-acks.ts): not yet.
  t.true(seed.replication.enabled)
  t.is(ack.applied, g.seq - 1)
  t.not(ack.refused, true)
  const after = ['a', 'b', 'c'].map(k => (seed.limiter.existing(k) as never as { bucket: { held: number } }).bucket.held)
  t.deepEqual(after, before.map(h => h + 5), 'every key back at the seed')
})
