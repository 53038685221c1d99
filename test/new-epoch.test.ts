/**
 * New-epoch evidence from wants, grants, acks and nones (docs/design/
 * 2026-11-reclaim.md, findings 2 and 3), the resend backoff toward receivers not alive
 * (finding 1), and the messages' `inc` field. Pure: cores and ledgers driven
 * by hand with a manual clock (plain numbers), no network.
 */
import test from 'ava'
import { Packr } from 'msgpackr'
import { ClusterCore } from '../src/cluster/cluster-core.js'
import { Ledger, MAX_QUIET_BACKOFF } from '../src/cluster/ledger.js'
import { CLUSTER_VERSION, gossipTopic, membersTopic, parseMessage, seedsTopic, type Ack, type Grant, type Want } from '../src/cluster/messages.js'
import { Peers } from '../src/cluster/peers.js'
import { limits, rule } from './helpers/rules.js'

const WALL = 1_700_000_000_000
const KEY = 'api'
const keep = { cfg: 'h', known: () => true, maxKeys: 100, seeds: new Set(['a', 'b']) }

/** `allocate`: a first start or a clean restart keeps its share (and may give any token it holds); an unclean one does not. */
function core (node: string, incarnation: number, epoch = `${node}.${incarnation}`, now = 0, allocate = incarnation === 1): ClusterCore {
  const c = new ClusterCore({
    node,
    epoch,
    incarnation,
    clusterHash: 'h',
    seeds: ['a', 'b'],
    listed: new Map([['a', 'id:a'], ['b', 'id:b']]),
    rules: [rule({ name: KEY, limit: 100, perMs: 1000 })],
    limits: limits(),
    allocate,
    // Leases off: these cores never hear a seed's echo, and what is tested here (written before leases) is not about them.
    tuning: { leases: false },
    wallMs: WALL + now,
    monoMs: now
  })
  c.init(now)
  return c
}

/** `from` gossips to `to` (one full gossip). */
function hear (to: ClusterCore, from: ClusterCore, now: number): void {
  to.onGossip(from.gossip.now(now), `id:${from.node}`, now)
}

/** a grants `n` tokens of the key to b's epoch, debited as a push would be. */
function give (a: ClusterCore, b: string, n: number, now: number): Grant {
  const ks = a.limiter.existing(KEY)
  const p = a.peers.get(b)
  if (ks === undefined || p === undefined) throw new Error('setup')
  const g = a.transfers.give(ks, ks.ext as never, p, n, now)
  if (g === undefined) throw new Error('nothing given')
  return g
}

test('an ack from a restarted receiver ends its old epoch at the giver: the outbox waits for its marks, resends stop, and without marks it is stranded', t => {
  const a = core('a', 1)
  const b1 = core('b', 1)
  hear(a, b1, 10)
  hear(b1, a, 10)
  const g = give(a, 'b', 3, 20)
  t.is(a.ledger.unackedTotal(), 3)
  // b crashes and comes back as incarnation 2 before a hears any gossip of it.
  const b2 = core('b', 2, 'b.2', 30)
  const ack = b2.onGrant(g, 'id:a', 40)
  t.is(ack.applied, 0, 'a grant to the dead epoch is never applied')
  t.is(ack.inc, 2)
  a.onReply(g, ack, 50)
  t.is(a.peers.get('b')?.epoch, 'b.2', 'the ack taught a the new epoch')
  t.is(a.ledger.unackedTotal(), 0, 'the outbox to the dead epoch is gone')
  t.deepEqual(a.reclaim.marks.status().waiting, [{ node: 'b', epoch: 'b.1', tokens: 3 }], 'it waits for the marks a restart gossips (estate-marks.ts)')
  t.deepEqual(a.ledger.due(5000, 1000), [], 'nothing left to resend')
  // b.2 came back from a crash without its journal, so no marks come: after the wait the grant is counted stranded.
  a.reclaim.marks.update(50 + a.reclaim.marks.waitMs)
  t.is(a.ledger.stranded, 3, 'stranded once no marks came in time')
  t.is((a.limiter.existing(KEY)?.ext as { stranded: number }).stranded, 3)
})

test('a grant from a restarted giver is applied at once: the receiver no longer answers old-epoch until a gossip comes', t => {
  const a1 = core('a', 1)
  const b = core('b', 1)
  hear(a1, b, 10)
  hear(b, a1, 10)
  // a restarts (clean: incarnation 2), hears b, and pushes to it; b has not heard a's new gossip.
  const a2 = core('a', 2, 'a.2', 20, true)
  hear(a2, b, 20)
  const ks = a2.limiter.keyState(KEY, 1, 20)
  ks.bucket.credit(5)
  const g = give(a2, 'b', 2, 30)
  const before = b.limiter.existing(KEY)?.bucket.held ?? 0
  const ack = b.onGrant(g, 'id:a', 40)
  t.is(b.peers.get('a')?.epoch, 'a.2')
  t.is(ack.applied, 1, 'applied, not refused as old-epoch')
  t.is((b.limiter.existing(KEY)?.bucket.held ?? 0) - before, 2)
  a2.onReply(g, ack, 50)
  t.is(a2.ledger.unackedTotal(), 0, 'settled by the ack')
})

test('a delayed grant of the old epoch is refused once the new epoch is known (its marks are gone)', t => {
  const a1 = core('a', 1)
  const b = core('b', 1)
  hear(a1, b, 10)
  hear(b, a1, 10)
  const old = give(a1, 'b', 4, 15)
  const a2 = core('a', 2, 'a.2', 20, true)
  hear(a2, b, 20)
  a2.limiter.keyState(KEY, 1, 20).bucket.credit(5)
  b.onGrant(give(a2, 'b', 1, 30), 'id:a', 30)
  const held = b.limiter.existing(KEY)?.bucket.held
  const ack = b.onGrant(old, 'id:a', 40)
  t.is(ack.applied, 0)
  t.is(b.limiter.existing(KEY)?.bucket.held, held, 'no token of the dead epoch is credited')
  t.is(b.peers.get('a')?.epoch, 'a.2', 'a lower inc never ends an epoch (no roll-back)')
})

test('a want from a new incarnation ends the old one; it is not served until its gossip says its rules', t => {
  const a = core('a', 1)
  const b1 = core('b', 1)
  hear(a, b1, 10)
  give(a, 'b', 3, 20)
  const w: Want = { v: CLUSTER_VERSION, t: 'want', node: 'b', epoch: 'b.2', inc: 2, key: KEY, want: 5 }
  const reply = a.onWant(w, 'id:b', 30)
  t.is(reply.t, 'none', 'rules of the new epoch are not known yet')
  t.is(a.ledger.unackedTotal(), 0, 'grants to the dead epoch leave the outbox (they wait for its marks)')
  t.deepEqual(a.peers.get('b')?.rules, {})
  hear(a, core('b', 2, 'b.2', 40), 40)
  t.is(a.onWant(w, 'id:b', 50).t, 'grant', 'served once its gossip came')
})

test('evidence is only taken from the peer id bound to the name', t => {
  const a = core('a', 1)
  hear(a, core('b', 1), 10)
  give(a, 'b', 3, 20)
  const w: Want = { v: CLUSTER_VERSION, t: 'want', node: 'b', epoch: 'b.9', inc: 9, key: KEY, want: 5 }
  a.onWant(w, 'id:mallory', 30)
  t.is(a.peers.get('b')?.epoch, 'b.1')
  t.is(a.ledger.unackedTotal(), 3)
})

test('Peers.evidence: higher inc ends the epoch; lower never; equal only once the known epoch is silent; unknown names are not created', t => {
  const peers = new Peers(1000, keep)
  const g = { v: CLUSTER_VERSION, t: 'gossip' as const, node: 'b', epoch: 'e5', inc: 5, seq: 1, now: 0, pending: [], carries: [], cfg: 'h', rules: { api: 'x' }, keys: [], acks: [] }
  peers.observe(g, 'a', 'ea', 100, 0)
  t.is(peers.evidence('b', 'e4', 4, 200), null, 'lower inc: a delayed message of a dead process')
  t.is(peers.evidence('b', 'e5', 5, 200), null, 'same epoch: nothing new')
  t.is(peers.evidence('b', 'e5x', 5, 200), null, 'same inc, other epoch, while the known one is alive')
  t.is(peers.get('b')?.epoch, 'e5')
  t.is(peers.evidence('b', 'e5x', 5, 1200), 'e5', 'same inc once the known epoch fell silent (as gossip)')
  t.is(peers.get('b')?.inc, 5)
  t.is(peers.evidence('b', 'e6', 6, 1300), 'e5x')
  t.is(peers.get('b')?.epoch, 'e6')
  t.is(peers.evidence('b', 'e5', 5, 99_999), null, 'never back')
  t.is(peers.evidence('c', 'e1', 1, 0), null)
  t.is(peers.get('c'), undefined)
  // A late gossip of the ended epoch changes nothing either.
  t.is(peers.observe({ ...g, seq: 9 }, 'a', 'ea', 1400, 0), null)
  t.is(peers.get('b')?.epoch, 'e6')
})

test('Ledger.due: resends to a receiver not alive are spaced further each time, up to a cap; alive or heard again, at once', t => {
  const l = new Ledger('a', 'ea', 1)
  l.grant('b', 'eb', [[KEY, 2, 0]], 0)
  const alive = { b: false }
  const up = (to: string): boolean => alive[to as 'b']
  const sent: number[] = []
  for (let now = 0; now <= 60_000; now += 50) if (l.due(now, 1000, up).length > 0) sent.push(now)
  const gaps = sent.slice(1).map((s, i) => s - sent[i])
  t.deepEqual(gaps.slice(0, 4), [2000, 4000, 8000, 8000], 'doubling from the second resend, capped')
  t.is(Math.max(...gaps), 1000 * MAX_QUIET_BACKOFF)
  // A message from b (a want, a reply): it is reachable; the normal pace resumes.
  l.heard('b')
  const last = sent[sent.length - 1]
  t.deepEqual(l.due(last + 1000, 1000, up).length, 1)
  alive.b = true
  t.is(l.due(last + 1500, 1000, up).length, 0)
  t.is(l.due(last + 2000, 1000, up).length, 1, 'alive: every retransmit time')
  t.is(l.due(last + 3000, 1000, up).length, 1)
})

test('status counts grants to receivers not alive apart (waiting for reclaim, not for an ack)', async t => {
  const { clusterStatus } = await import('../src/cluster/cluster-status.js')
  const a = core('a', 1)
  hear(a, core('b', 1), 10)
  give(a, 'b', 3, 20)
  const at = (now: number): { keys: Array<{ inTransitOut: number, inTransitToDead: number }>, dead: number } => {
    const s = clusterStatus(a, now, WALL + now) as { cluster: { inTransitToDead: number }, clusterKeys: Array<{ inTransitOut: number, inTransitToDead: number }> }
    return { keys: s.clusterKeys, dead: s.cluster.inTransitToDead }
  }
  t.like(at(100), { dead: 0, keys: [{ inTransitOut: 3, inTransitToDead: 0 }] })
  t.like(at(100 + a.tuning.aliveTimeoutMs), { dead: 3, keys: [{ inTransitOut: 3, inTransitToDead: 3 }] })
})

test('parseMessage: want, grant, ack and none carry a whole, non-negative inc', t => {
  const packr = new Packr({ useRecords: false })
  const round = (m: unknown): unknown => parseMessage(packr.unpack(packr.pack(m)))
  const base = { v: CLUSTER_VERSION, node: 'a', epoch: 'ea', inc: 7 }
  const msgs = [
    { ...base, t: 'want', key: KEY, want: 3 },
    { ...base, t: 'grant', to: 'b', toEpoch: 'eb', seq: 1, items: [[KEY, 2, 0]] },
    { ...base, t: 'ack', applied: 4 },
    { ...base, t: 'none' }
  ]
  for (const m of msgs) {
    t.is((round(m) as Ack).inc, 7, m.t)
    for (const inc of [undefined, -1, 1.5, '7', Infinity, Number.MAX_SAFE_INTEGER + 2]) {
      t.throws(() => round({ ...m, inc }), { code: 'E_BAD_FRAME' }, `${m.t} inc ${String(inc)}`)
    }
  }
  t.throws(() => round({ ...msgs[0], v: 2 }), { code: 'E_BAD_FRAME' }, 'version 2 is refused')
  t.is(CLUSTER_VERSION, 15)
  t.is(gossipTopic('prod'), 'quotad/prod/gossip/15')
  t.is(membersTopic('prod'), 'quotad/prod/members/15')
  t.is(seedsTopic('prod'), 'quotad/prod/seeds/15')
})

test('a push from a giver the receiver has not heard is refused for good: the giver takes it back, and no copy of it is credited later', t => {
  const a = core('a', 1)
  const b = core('b', 1)
  // a hears b (so it may push to b's epoch); b has not heard a: a stopping node's gossip that never came (sim `stops`).
  hear(a, b, 10)
  const aHeld = (): number => a.limiter.existing(KEY)?.bucket.held ?? 0
  const bHeld = (): number => b.limiter.existing(KEY)?.bucket.held ?? 0
  const before = aHeld()
  const g = give(a, 'b', 3, 20)
  t.is(aHeld(), before - 3, 'debited before the grant exists')
  const held = bHeld()
  const ack = b.onGrant(g, 'id:a', 30)
  t.true(ack.refused, 'refused: b cannot judge a giver it has not heard')
  t.is(ack.applied, 1, 'and the seq is used up, so the refusal binds')
  t.is(bHeld(), held, 'nothing credited')
  a.onReply(g, ack, 40)
  t.is(a.ledger.unackedTotal(), 0)
  t.is(aHeld(), before, 'a took its tokens back')
  // b hears a now; the same grant again (a late copy) is a duplicate, never credited.
  hear(b, a, 50)
  const again = b.onGrant(g, 'id:a', 60)
  t.is(again.applied, 1)
  t.not(again.refused, true, 'a refusal is answered once; the copy is a duplicate')
  t.is(bHeld(), held, 'the copy credits nothing: the tokens exist once, at a')
})

test('a grant to a restarted receiver\'s ended epoch is settled by the reply to a resend or a probe: the restart names its final mark, whether or not it heard the giver', t => {
  const setup = (mark: number): { a: ClusterCore, b2: ClusterCore, g: Grant } => {
    const a = core('a', 1)
    const b1 = core('b', 1)
    hear(a, b1, 10)
    hear(b1, a, 10)
    const g = give(a, 'b', 3, 20)
    // b stops cleanly and restarts; its restart speaks for b.1 (persist.ts announces a clean stop's marks at once).
    const b2 = core('b', 2, 'b.2', 30, true)
    b2.reclaim.marks.announceOwn('b.1', new Map(mark === 0 ? [] : [['a\u0000a.1', mark]]), 30)
    return { a, b2, g }
  }
  for (const mark of [0, 1]) {
    // a has not heard b.2: its resend goes to b.1's address and reaches b.2, whose reply ends b.1 at a and settles it.
    const { a, b2, g } = setup(mark)
    const [resend] = a.ledger.due(2000, 1000)
    t.deepEqual(resend, g)
    const ack = b2.onGrant(resend, 'id:a', 2001)
    t.is(ack.ended, mark, 'the reply carries b.1\'s final mark of a.1\'s grants')
    t.is(ack.applied, 0, 'never applied: it is addressed to an ended epoch')
    a.onReply(resend, ack, 2002)
    t.is(a.peers.get('b')?.epoch, 'b.2')
    t.deepEqual(a.reclaim.marks.status().waiting, [], 'settled at once')
    const c = a.reclaim.marks.counters
    if (mark === 0) t.is(c.tokensTakenBack, 3, 'b.1 never applied it: taken back')
    else t.is(c.tokensDelivered, 3, 'b.1 applied it: delivered, in b\'s restored books')
  }
  // a heard b.2 first: the grant waits for b.1's marks, which b.2's gossip does not name (it has not heard a alive,
  // and b.1 applied nothing of a's): the probe asks.
  const { a, b2, g } = setup(0)
  hear(a, b2, 35)
  t.deepEqual(a.reclaim.marks.status().waiting, [{ node: 'b', epoch: 'b.1', tokens: 3 }], 'held for b.1\'s marks')
  t.deepEqual(a.ledger.due(5000, 1000), [], 'no longer resent')
  t.deepEqual(b2.reclaim.marks.take(36), [], 'b.2\'s gossip names no mark for a')
  const probes = a.reclaim.marks.probes(40, 1000)
  t.deepEqual(probes, [g], 'the held grant goes again, as a probe')
  t.deepEqual(a.reclaim.marks.probes(41, 1000), [], 'once per retransmit time')
  a.onReply(probes[0], b2.onGrant(probes[0], 'id:a', 45), 50)
  t.deepEqual(a.reclaim.marks.status().waiting, [], 'settled')
  t.is(a.reclaim.marks.counters.tokensTakenBack, 3)
})

test('the reply to a probe of a crashed epoch\'s grant acks nothing of the current epoch\'s outbox', t => {
  const a2 = core('a', 2, 'a.2', 0, true)
  const b = core('b', 1)
  hear(a2, b, 10)
  hear(b, a2, 10)
  a2.limiter.keyState(KEY, 1, 10).bucket.credit(5)
  give(a2, 'b', 3, 20)
  t.is(a2.ledger.unackedTotal(), 3)
  // a.1's grant seq 1 to b's former epoch, sent again as a probe; b (now b.1) answers with its mark of a.1's grants.
  const probe: Grant = { v: CLUSTER_VERSION, t: 'grant', node: 'a', epoch: 'a.1', inc: 1, to: 'b', toEpoch: 'b.0', seq: 1, items: [[KEY, 2, 0]] }
  const ack: Ack = { v: CLUSTER_VERSION, t: 'ack', node: 'b', epoch: 'b.1', inc: 1, applied: 1 }
  a2.onReply(probe, ack, 30)
  t.is(a2.ledger.unackedTotal(), 3, 'a.2\'s own grant seq 1 to b.1 is still unacked: the mark was of a.1\'s grants')
})
