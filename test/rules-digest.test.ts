/**
 * A gossip's rules and cluster hash as a digest (rules-digest.ts), through
 * the daemon's own gossip schedule, codec and intake on the simulator's
 * virtual cluster: they go in full at the start, on a full sync's first
 * message and after a rule change, and as an 8-byte digest otherwise; a
 * receiver takes a digest only if it matches what that incarnation last
 * said in full, and drops the gossip whole otherwise; the parser refuses a
 * gossip with both, or neither, or a digest of the wrong size.
 */
import test from 'ava'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { decodeGossip, encodeGossip } from '../src/cluster/gossip-codec.js'
import { CLUSTER_VERSION, parseMessage, type Gossip } from '../src/cluster/messages.js'
import { digestText, rulesDigest } from '../src/cluster/rules-digest.js'
import { ErrorCodes } from '../src/errors.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

function cluster (): { vc: VirtualCluster, a: ClusterCore, b: ClusterCore } {
  const vc = new VirtualCluster({ nodes: ['a', 'b', 'c'], rules: [rule({ name: 'day', limit: 300, perMs: 86_400_000 })], limits: limits(), seed: 4, startMs: T0 })
  vc.runUntil(T0 + 3000)
  return { vc, a: vc.cores.get('a') as ClusterCore, b: vc.cores.get('b') as ClusterCore }
}

/**
 * a's next gossip, `step` ms on, over the wire as peers get it. The cluster
 * itself is not run on: nothing else reaches b, and a's schedule is this.
 */
function next (vc: VirtualCluster, a: ClusterCore, step: number): Gossip {
  clock += step
  const g = decodeGossip(encodeGossip(a.gossip.now(vc.mono('a') + clock)))
  if (g.t !== 'gossip') throw new Error('not a gossip')
  return g
}
let clock = 0

test('rules go as a digest between full syncs; a peer that read them in full takes it, and one that did not drops the gossip', t => {
  const { vc, a, b } = cluster()
  // Three seconds in, a is between full syncs: its gossips carry the digest of its rules and cluster hash.
  const g = next(vc, a, 250)
  t.is(g.rules, undefined)
  t.is(g.cfg, undefined)
  t.truthy(g.rd)
  t.is(digestText(g.rd as Uint8Array), digestText(rulesDigest(a.clusterHash, { day: a.limiter.rules[0].hash })))
  t.is(encodeGossip(g).length < encodeGossip({ ...g, rd: undefined, cfg: a.clusterHash, rules: { day: a.limiter.rules[0].hash } }).length, true, 'smaller than the rules in full')
  // b has read a's rules in full (a's first gossips): it takes the digest, with the rules it read.
  const seq = b.peers.get('a')?.seq ?? 0
  t.is(b.onGossip(g, 'id:a', vc.mono('b') + clock), 'ok')
  t.is(b.peers.get('a')?.seq, g.seq, 'applied')
  t.true(g.seq > seq)
  t.is(b.peers.get('a')?.rules.day, a.limiter.rules[0].hash)
  // A digest that is not of what a said in full: dropped whole, counted.
  const dropped = b.counters.unresolvedGossip
  const wrong = { ...g, seq: g.seq + 1, rd: new Uint8Array(8) }
  t.is(b.onGossip(wrong, 'id:a', vc.mono('b') + clock), 'ok')
  t.is(b.peers.get('a')?.seq, g.seq, 'not applied')
  t.is(b.counters.unresolvedGossip, dropped + 1)
})

test('after a rule change the next gossips carry the new rules in full, then their digest, which peers take', t => {
  const { vc, a, b } = cluster()
  next(vc, a, 250)
  vc.reload('a', [rule({ name: 'day', limit: 200, perMs: 86_400_000 })])
  const hash = a.limiter.rules[0].hash
  const full: Gossip[] = []
  let g = next(vc, a, 250)
  while (g.rd === undefined && full.length < 10) { full.push(g); g = next(vc, a, 250) }
  t.true(full.length >= 4, `${full.length} gossips in full after the change`)
  for (const f of full) t.deepEqual(f.rules, { day: hash })
  // b, which read none of them, drops the digest of the new rules; having read one, it takes it.
  const before = b.counters.unresolvedGossip
  t.is(b.onGossip(g, 'id:a', vc.mono('b') + clock), 'ok')
  t.is(b.counters.unresolvedGossip, before + 1, 'the new digest, unknown here: dropped')
  t.is(b.onGossip(full[full.length - 1], 'id:a', vc.mono('b') + clock), 'ok')
  t.is(b.peers.get('a')?.rules.day, hash)
  const later = next(vc, a, 250)
  t.truthy(later.rd)
  t.is(b.onGossip(later, 'id:a', vc.mono('b') + clock), 'ok')
  t.is(b.counters.unresolvedGossip, before + 1)
  t.is(b.peers.get('a')?.seq, later.seq, 'applied, under the new rules')
})

test('a gossip with a digest and rules, with neither, or with a digest of another size is E_BAD_FRAME; absent pending and carries read as empty', t => {
  const base = { v: CLUSTER_VERSION, t: 'gossip', node: 'a', epoch: 'ea', inc: 1, seq: 3, now: 0, keys: [], acks: [] }
  const badFrame = { code: ErrorCodes.BAD_FRAME }
  t.throws(() => parseMessage({ ...base, rd: new Uint8Array(8), rules: {}, cfg: 'h' }), badFrame, 'both')
  t.throws(() => parseMessage({ ...base, rd: new Uint8Array(8), cfg: 'h' }), badFrame, 'a digest and a cluster hash')
  t.throws(() => parseMessage({ ...base }), badFrame, 'neither')
  t.throws(() => parseMessage({ ...base, rd: new Uint8Array(7) }), badFrame, '7 bytes')
  t.throws(() => parseMessage({ ...base, rd: 'abcdefgh' }), badFrame, 'a string')
  const ok = parseMessage({ ...base, rd: new Uint8Array(8) })
  t.like(ok, { pending: [], carries: [] })
  const full = parseMessage({ ...base, rules: { day: 'x' }, cfg: 'h', pending: ['day'] })
  t.like(full, { pending: ['day'], carries: [], rules: { day: 'x' }, cfg: 'h' })
})
