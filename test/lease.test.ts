/**
 * Leases (cluster/lease.ts, fence.ts) on a manual clock: a lease comes from
 * a quorum of voters' echoes of the node's own recent gossips, lapses
 * leaseMs after the send time of the gossip that made the quorum, and
 * nothing but an echo of a kept gossip extends it.
 */
import test from 'ava'
import { pack } from 'msgpackr'
import { ECHOES_PER_LEASE, EchoSchedule, HEARD_BYTE_BUDGET, Lease, MAX_HEARD_PER_GOSSIP, SENT_KEPT, type Echoable } from '../src/cluster/lease.js'
import { Quorum } from '../src/cluster/quorum.js'

const LEASE = 3000

function lease (me: string, seeds: string[], enabled = true): Lease {
  return new Lease({ me, quorum: new Quorum(seeds), leaseMs: LEASE, enabled })
}

test('a node starts without a lease and gets one from a quorum of echoes', t => {
  const l = lease('m', ['a', 'b', 'c'])
  let now = 1000
  t.false(l.valid(now))
  l.sent(1, now)
  now += 100
  t.false(l.echoed('a', 1), 'one of three voters is no quorum')
  t.false(l.valid(now))
  t.true(l.echoed('b', 1))
  t.true(l.valid(now))
  // Valid until leaseMs after the gossip was sent (not after the echo came).
  t.is(l.validUntil, 1000 + LEASE)
  t.true(l.valid(1000 + LEASE))
  t.false(l.valid(1000 + LEASE + 1))
})

test('a start lease (a seed\'s first start) holds until graceUntil without echoes, and echoes extend it past that', t => {
  const l = new Lease({ me: 'b', quorum: new Quorum(['a', 'b', 'c']), leaseMs: LEASE, enabled: true, graceUntil: 1000 + LEASE })
  t.true(l.valid(1000))
  t.true(l.valid(1000 + LEASE))
  t.false(l.valid(1000 + LEASE + 1), 'with no echo it lapses at graceUntil')
  t.is(l.validUntil, 1000 + LEASE)
  // An echo of a gossip sent before the grace ends changes nothing; a later one extends it.
  l.sent(1, 1500)
  l.echoed('a', 1)
  t.is(l.validUntil, 1500 + LEASE)
  const early = new Lease({ me: 'b', quorum: new Quorum(['a', 'b', 'c']), leaseMs: LEASE, enabled: true, graceUntil: 5000 })
  early.sent(1, 100)
  early.echoed('c', 1)
  t.is(early.validUntil, 5000, 'an echo never shortens the start lease')
})

test('a voter whose calendar surely disagrees lends no lease, and one that might disagree unbounded voids the start lease', t => {
  // c is 10 s ahead: b echoes it and surely disagrees; a never echoes it (skew-procs under a busy core).
  const l = new Lease({ me: 'c', quorum: new Quorum(['a', 'b', 'c']), leaseMs: LEASE, enabled: true })
  l.sent(1, 1000)
  t.true(l.echoed('b', 1))
  t.true(l.valid(1100), 'b and c are a quorum')
  t.true(l.exclude(new Set(['b'])))
  t.false(l.valid(1100), 'without b, c alone is no quorum')
  t.true(l.heldByExcluded(1100), 'only the disagreeing voter stands in its way')
  t.false(l.exclude(new Set(['b'])), 'the same judgement again moves nothing')
  t.true(l.exclude(new Set()))
  t.true(l.valid(1100), 'b agrees again: its echo counts')
  t.false(l.heldByExcluded(1100))
  const g = new Lease({ me: 'c', quorum: new Quorum(['a', 'b', 'c']), leaseMs: LEASE, enabled: true, graceUntil: 1000 + LEASE })
  t.true(g.valid(1000))
  g.exclude(new Set(), true)
  t.false(g.valid(1000), 'a voter that reads off, with no echo to bound it, voids the start lease')
  t.true(g.heldByExcluded(1000))
  g.exclude(new Set(), false)
  t.true(g.valid(1000), 'the doubt gone, the start lease stands')
})

test('the quorum is made by the newest echoes; an old echo does not shorten it', t => {
  const l = lease('m', ['a', 'b', 'c'])
  for (let s = 1; s <= 5; s++) l.sent(s, s * 100)
  l.echoed('a', 5)
  l.echoed('b', 2)
  t.is(l.validUntil, 200 + LEASE, 'the second newest echo decides')
  l.echoed('c', 4)
  t.is(l.validUntil, 400 + LEASE)
  t.false(l.echoed('a', 1), 'a late echo of an older gossip changes nothing')
  t.is(l.validUntil, 400 + LEASE)
})

test('a voter counts itself; a single seed is never fenced, its members are until it echoes them', t => {
  const seed = lease('a', ['a'])
  t.true(seed.valid(0))
  t.true(seed.valid(1e12))
  const member = lease('m', ['a'])
  t.false(member.valid(0))
  member.sent(1, 0)
  member.echoed('a', 1)
  t.true(member.valid(LEASE))
  t.false(member.valid(LEASE + 1))
  // Of three seeds, a seed needs one other.
  const b = lease('b', ['a', 'b', 'c'])
  t.false(b.valid(0))
  b.sent(1, 0)
  b.echoed('c', 1)
  t.true(b.valid(10))
})

test('two seeds: the first holds a lease alone, the second needs the first', t => {
  t.true(lease('a', ['a', 'b']).valid(0))
  const b = lease('b', ['a', 'b'])
  b.sent(1, 0)
  t.false(b.valid(0))
  t.false(b.echoed('m', 1), 'a non-voter does not count')
  b.echoed('a', 1)
  t.true(b.valid(0))
})

test('only echoes of kept gossips count: unknown or overwritten seqs are ignored', t => {
  const l = lease('m', ['a'])
  l.sent(1, 0)
  t.false(l.echoed('a', 2), 'never sent')
  for (let s = 2; s <= SENT_KEPT + 1; s++) l.sent(s, s)
  t.is(l.sentAt(1), undefined, 'overwritten by seq 1 + SENT_KEPT')
  t.false(l.echoed('a', 1))
  t.true(l.echoed('a', SENT_KEPT + 1))
})

test('leases off: always valid', t => {
  t.true(lease('m', ['a', 'b', 'c'], false).valid(0))
})

test('echo ages per voter for status', t => {
  const l = lease('b', ['a', 'b', 'c'])
  l.sent(1, 100)
  l.echoed('a', 1)
  t.deepEqual(l.echoAges(600), { a: 500, c: null })
})

test('a voter echoes new peers at once and each peer about every leaseMs / ECHOES_PER_LEASE, a share per gossip', t => {
  const gossip = 250
  const e = new EchoSchedule(LEASE, gossip)
  const peers: Echoable[] = Array.from({ length: 30 }, (_, i) => ({ name: `p${i}`, inc: 1, seq: 1 }))
  const first = e.take(peers, 0)
  t.is(first.length, 30, 'never echoed: all at once')
  const last = new Map<string, number>()
  let most = 0
  for (let now = gossip; now <= 20 * gossip; now += gossip) {
    for (const p of peers) p.seq++
    const got = e.take(peers, now)
    most = Math.max(most, got.length)
    for (const [n, inc, seq] of got) {
      t.is(inc, 1)
      t.is(seq, peers.find(p => p.name === n)?.seq ?? -1)
      const before = last.get(n)
      if (before !== undefined) t.true(now - before <= LEASE / ECHOES_PER_LEASE + gossip, `${n} waited ${now - before} ms`)
      last.set(n, now)
    }
  }
  t.is(last.size, 30, 'every peer echoed')
  t.true(most <= Math.ceil(30 * gossip / (LEASE / ECHOES_PER_LEASE)), `at most one interval's share per gossip, got ${most}`)
  // A restarted peer (new incarnation) is new again; one that sent nothing yet is not echoed.
  const again = e.take([{ name: 'p0', inc: 2, seq: 1 }, { name: 'q', inc: 1, seq: 0 }], 21 * gossip)
  t.deepEqual(again, [['p0', 2, 1]])
})

test('a fleet of new members is echoed at once, up to the peer cap and the byte budget; the rest next gossip', t => {
  const e = new EchoSchedule(LEASE, 250)
  // 995 members starting together (1000 nodes, 5 seeds): all of them in the first gossip, so all get a lease one round trip in.
  const fleet: Echoable[] = Array.from({ length: 995 }, (_, i) => ({ name: `member-${i}`, inc: 1, seq: 1 }))
  t.is(e.take(fleet, 0).length, 995)
  // Names of 64 bytes: the byte budget stops a gossip first; what is left goes in the next ones, new peers first.
  const e2 = new EchoSchedule(LEASE, 250)
  const long: Echoable[] = Array.from({ length: 1024 }, (_, i) => ({ name: `${i}`.padStart(64, 'n'), inc: 1, seq: 1 }))
  const first = e2.take(long, 0)
  t.is(first.length, Math.floor(HEARD_BYTE_BUDGET / (64 + 22)))
  t.true(pack(first).length <= HEARD_BYTE_BUDGET, `packed ${pack(first).length} bytes`)
  const seen = new Set(first.map(h => h[0]))
  for (let now = 250; seen.size < long.length && now <= 2000; now += 250) {
    const next = e2.take(long, now)
    t.true(next.length <= MAX_HEARD_PER_GOSSIP)
    for (const [n] of next) seen.add(n)
  }
  t.is(seen.size, long.length, 'every new peer echoed within a few gossips')
})

test('the lease kept in echo order agrees with the definition (the newest echoes that weigh a quorum) over random echoes', t => {
  // Brute force: the latest t such that the voters echoing at or after t (this node: always) form a quorum.
  let x = 7
  const rand = (n: number): number => { x = (x * 1103515245 + 12345) % 2147483648; return x % n }
  for (let round = 0; round < 200; round++) {
    const seeds = Array.from({ length: 1 + rand(7) }, (_, i) => `s${i}`)
    const me = rand(3) === 0 ? 'member' : seeds[rand(seeds.length)]
    const quorum = new Quorum(seeds)
    const l = new Lease({ me, quorum, leaseMs: LEASE, enabled: true })
    const latest = new Map<string, number>()
    for (let seq = 1; seq <= 40; seq++) {
      l.sent(seq, seq * 10)
      const v = seeds[rand(seeds.length)]
      const echoSeq = Math.max(1, seq - rand(5))
      l.echoed(v, echoSeq)
      if (v !== me) latest.set(v, Math.max(latest.get(v) ?? -Infinity, echoSeq * 10))
      const times = [...new Set([...latest.values(), ...(quorum.isVoter(me) ? [Infinity] : [])])].sort((a, b) => b - a)
      const expect = times.find(at => quorum.isQuorum([...latest].filter(([, e]) => e >= at).map(([n]) => n).concat(quorum.isVoter(me) ? [me] : [])))
      t.is(l.validUntil, expect === undefined ? -Infinity : expect + LEASE, `round ${round} seq ${seq}`)
    }
  }
})
