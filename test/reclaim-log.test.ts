/**
 * The reclaim log, message by message (design §3.5, §4.5): every vote is
 * persisted before the reply that reveals it; duplicated and reordered
 * messages change nothing; racing proposers choose one value and learn the
 * same; a proposer that dies after some accepts has its value carried on;
 * a voter restarted from its votes file keeps its word; chosen entries come
 * out once, in slot order; memory stays bounded.
 */
import test from 'ava'
import { emptyVotes, ReclaimLog, valueDigest, type Ballot, type ReclaimValue, type Step, type VotesState } from '../src/cluster/reclaim-log.js'
import type { ReclaimMessage } from '../src/cluster/reclaim-messages.js'
import { CLUSTER_VERSION } from '../src/cluster/messages.js'
import { Rng } from '../src/sim/rng.js'
import { weightedQuorum } from './helpers/paxos-net.js'

const rng = new Rng(1)

function val (slot: number, heir: string, dead = `dead-${heir}`): ReclaimValue {
  return { slot, D: [{ node: dead, acct: 1, inc: 1, epoch: 'x' }], heir: { node: heir, epoch: 'e1', acct: 1 }, listed: [{ node: heir, acct: 1 }] }
}

class World {
  readonly logs = new Map<string, ReclaimLog>()
  /** What each voter has on disk: the last `persist` it was handed. */
  readonly disk = new Map<string, VotesState>()
  now = 0
  constructor (readonly voters: string[], members: string[] = []) {
    for (const n of voters) this.boot(n)
    for (const n of members) this.logs.set(n, new ReclaimLog({ node: n, epoch: 'e1', voters, quorum: weightedQuorum(voters) }))
  }

  boot (n: string, votes = this.disk.get(n) ?? emptyVotes(n, 'c')): ReclaimLog {
    const log = new ReclaimLog({ node: n, epoch: `e${this.now}`, voters: this.voters, quorum: weightedQuorum(this.voters), votes, timing: { phaseTimeoutMs: 100, backoffMinMs: 10, backoffMaxMs: 20 } })
    this.logs.set(n, log)
    return log
  }

  /** Apply a step's persist as the driver would (before anything is sent). */
  keep (n: string, s: Step): Step {
    if (s.persist !== null) this.disk.set(n, s.persist)
    return s
  }

  /** Deliver m from `from` to `to`; returns the step (its reply not delivered). */
  deliver (from: string, to: string, m: ReclaimMessage): Step {
    return this.keep(to, this.logs.get(to)!.handle(from, m, this.now, rng))
  }

  /** Deliver each message to its addressee and return the replies, addressed back. */
  round (msgs: Array<{ to: string, msg: ReclaimMessage }>, only?: string[]): Array<{ to: string, msg: ReclaimMessage }> {
    const out: Array<{ to: string, msg: ReclaimMessage }> = []
    for (const { to, msg } of msgs) {
      if ((only !== undefined && !only.includes(to)) || !this.logs.has(to)) continue // lost, or to a dead node
      const s = this.deliver(msg.node, to, msg)
      if (s.reply !== null) out.push({ to: msg.node, msg: s.reply })
      out.push(...s.send)
    }
    return out
  }

  /** Every voter's gossip to every node. */
  gossip (): void {
    for (const [from, log] of this.logs) {
      if (!this.voters.includes(from)) continue
      const g = log.gossip()
      for (const [to, l] of this.logs) if (to !== from) this.keep(to, l.learnGossip(from, g, this.now))
    }
  }
}

const ABC = ['a', 'b', 'c']

/** Let time pass for n's proposal in slot (ticks and full rounds) until it is done; its last phase. */
function drive (w: World, n: string, slot: number): string | undefined {
  for (let i = 0; i < 50 && w.logs.get(n)!.proposal(slot)?.phase !== 'chosen'; i++) {
    w.now += 50
    let msgs = w.keep(n, w.logs.get(n)!.tick(w.now, rng)).send
    while (msgs.length > 0) msgs = w.round(msgs)
  }
  return w.logs.get(n)!.proposal(slot)?.phase
}

test('a lone proposer gets its value chosen; every vote comes with a persist that already holds it', t => {
  const w = new World(ABC)
  const v = val(1, 'a')
  const start = w.keep('a', w.logs.get('a')!.propose(1, v, 0, rng))
  t.deepEqual(start.send.map(s => [s.to, s.msg.t]), [['a', 'prepare'], ['b', 'prepare'], ['c', 'prepare']])
  const promises = start.send.map(({ to, msg }) => {
    const s = w.deliver('a', to, msg)
    t.is(s.reply?.t, 'promise')
    // the promise is on disk before it leaves
    t.deepEqual(s.persist?.slots.find(x => x.slot === 1)?.promised, (msg as { ballot: Ballot }).ballot)
    return s.reply!
  })
  const accepts = promises.flatMap(p => w.deliver(p.node, 'a', p).send)
  t.deepEqual(accepts.map(x => x.msg.t), ['accept', 'accept', 'accept'], 'accepts go out once, at the quorum')
  for (const acc of accepts) {
    const r = w.deliver('a', acc.to, acc.msg)
    t.is(r.reply?.t, 'accepted')
    t.is(valueDigest(r.persist!.slots.find(x => x.slot === 1)!.accepted!.value), valueDigest(v))
    w.deliver(acc.to, 'a', r.reply!)
  }
  t.is(w.logs.get('a')!.proposal(1)?.phase, 'chosen')
  t.deepEqual(w.logs.get('a')!.take(), [{ slot: 1, value: v }])
  t.deepEqual(w.logs.get('a')!.take(), [], 'each entry comes out once')
  w.gossip()
  for (const n of ['b', 'c']) t.is(valueDigest(w.logs.get(n)!.take()[0].value), valueDigest(v))
})

test('duplicated and reordered messages: nothing is persisted twice, nothing chosen twice', t => {
  const w = new World(ABC)
  const a = w.logs.get('a')!
  const prepares = a.propose(1, val(1, 'a'), 0, rng).send
  const toB = prepares.find(p => p.to === 'b')!.msg
  const first = w.deliver('a', 'b', toB)
  const dup = w.deliver('a', 'b', toB)
  t.is(first.reply?.t, 'promise')
  t.is(dup.reply?.t, 'nack', 'a ballot is promised once (reclaim-value.ts: why)')
  t.is(dup.persist, null, 'a duplicate changes nothing')
  // the nack of the duplicate arrives before the promise: the proposer keeps its ballot
  w.deliver('b', 'a', dup.reply!)
  t.is(a.proposal(1)?.phase, 'prepare')
  const onPromise = w.deliver('b', 'a', first.reply!)
  t.deepEqual(onPromise.send, [], 'one promise is not a quorum')
  // c's promise arrives twice
  const pc = w.deliver('a', 'c', prepares.find(p => p.to === 'c')!.msg).reply!
  const accepts = w.deliver('c', 'a', pc).send
  t.is(accepts.length, 3)
  t.deepEqual(w.deliver('c', 'a', pc).send, [], 'a duplicate promise starts nothing')
  // accepts delivered twice each, in reverse order; replies twice each
  const replies: ReclaimMessage[] = []
  for (const acc of [...accepts].reverse()) {
    const r1 = w.deliver('a', acc.to, acc.msg)
    const r2 = w.deliver('a', acc.to, acc.msg)
    t.is(r2.reply?.t, 'accepted')
    t.is(r2.persist, null)
    replies.push(r1.reply!, r2.reply!)
  }
  for (const r of replies.reverse()) w.deliver(r.node, 'a', r)
  t.is(a.take().length, 1)
  // a stale prepare from an old ballot, after the accept: refused
  t.is(w.deliver('a', 'b', toB).reply?.t, 'nack')
})

test('two proposers race one slot: both finish a round, one value is chosen, both learn it', t => {
  const w = new World(ABC)
  const a = w.logs.get('a')!
  const c = w.logs.get('c')!
  const pa = a.propose(1, val(1, 'a'), 0, rng).send
  const pc = c.propose(1, val(1, 'c'), 0, rng).send
  // a's prepare reaches a and b; then c's (same round, higher name) reaches b and c
  const aPromises = w.round(pa, ['a', 'b'])
  const cPromises = w.round(pc, ['b', 'c'])
  const aAccepts = w.round(aPromises) // a has a quorum of promises: it sends accepts
  const cAccepts = w.round(cPromises)
  t.is(aAccepts.length, 3)
  t.is(cAccepts.length, 3)
  // a's accepts: a accepts, b refuses (it promised c's higher ballot), c refuses
  const aReplies = w.round(aAccepts)
  t.deepEqual(aReplies.map(r => r.msg.t).sort(), ['accepted', 'nack', 'nack'])
  w.round(aReplies)
  t.is(a.proposal(1)?.phase, 'backoff')
  // c's accepts: every voter takes them (a promised nothing above c's ballot)
  w.round(w.round(cAccepts))
  t.is(c.proposal(1)?.phase, 'chosen')
  // a retries with a higher ballot; its promise quorum carries c's value (the highest accepted), which it must propose
  w.now = 1000
  const retry = w.keep('a', a.tick(w.now, rng)).send
  t.true(retry.every(m => m.msg.t === 'prepare' && m.msg.ballot.round > 1))
  w.round(w.round(w.round(w.round(retry, ['a', 'b']))))
  t.is(a.proposal(1)?.phase, 'chosen')
  t.is(valueDigest(a.proposal(1)!.chosen!), valueDigest(val(1, 'c')), 'a carried c\'s value, not its own')
  t.deepEqual(a.take().map(e => e.value.heir.node), ['c'])
  t.deepEqual(c.take().map(e => e.value.heir.node), ['c'])
  t.deepEqual(a.conflicts, [])
})

test('a proposer that dies after a minority accepted: the next one must re-propose that value', t => {
  const w = new World(ABC)
  const pa = w.logs.get('a')!.propose(1, val(1, 'a'), 0, rng).send
  const accepts = w.round(w.round(pa))
  w.round(accepts, ['b']) // only b accepts before a dies; its reply is lost
  w.logs.delete('a')
  const c = w.logs.get('c')!
  const pc = c.propose(1, val(1, 'c'), 0, rng).send
  // c gathers b (accepted a's value) and c: it must propose a's value
  w.round(w.round(w.round(w.round(pc, ['b', 'c']))), ['b', 'c'])
  t.is(c.proposal(1)?.phase, 'chosen')
  t.is(c.proposal(1)!.chosen!.heir.node, 'a')
})

test('a proposer that dies after a quorum accepted, before it learned: the value stays chosen', t => {
  const w = new World(ABC)
  const pa = w.logs.get('a')!.propose(1, val(1, 'a'), 0, rng).send
  const accepts = w.round(w.round(pa))
  w.round(accepts, ['a', 'b']) // chosen (a, b accepted), replies lost, a dies
  w.logs.delete('a')
  w.boot('a') // a restarts from its votes file, with a value of its own this time
  const pa2 = w.logs.get('a')!.propose(1, val(1, 'a', 'other'), 10, rng).send
  t.true(pa2.every(m => m.msg.t === 'prepare' && m.msg.ballot.round > 1), 'the restarted proposer starts above its own promise')
  const c = w.logs.get('c')!
  w.round(w.round(w.round(w.round(c.propose(1, val(1, 'c'), 0, rng).send, ['b', 'c']))), ['b', 'c'])
  t.is(c.proposal(1)!.chosen!.D[0].node, 'dead-a')
  w.round(w.round(pa2)) // refused: every voter promised c's higher ballot
  t.is(drive(w, 'a', 1), 'chosen')
  t.is(w.logs.get('a')!.proposal(1)?.chosen?.D[0].node, 'dead-a', 'the restarted proposer learns the old value, not its new one')
})

test('a voter restarted from its votes file keeps its promises, acceptances and closed slots', t => {
  const w = new World(ABC)
  const b = w.logs.get('b')!
  const high: Ballot = { round: 5, node: 'c' }
  const low: Ballot = { round: 4, node: 'c' }
  const pr = w.deliver('c', 'b', { v: CLUSTER_VERSION, node: 'c', epoch: 'e', t: 'prepare', slot: 1, ballot: high })
  t.is(pr.reply?.t, 'promise')
  w.deliver('c', 'b', { v: CLUSTER_VERSION, node: 'c', epoch: 'e', t: 'accept', slot: 1, ballot: high, value: val(1, 'c') })
  t.not(b, w.boot('b'))
  const again = w.deliver('a', 'b', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 1, ballot: low })
  t.is(again.reply?.t, 'nack')
  const higher = w.deliver('a', 'b', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 1, ballot: { round: 6, node: 'a' } })
  t.is(higher.reply?.t === 'promise' ? higher.reply.accepted?.value.heir.node : undefined, 'c')
  // once slot 1 is chosen and the voter restarts, it votes in slot 1 no more
  const learnt = w.keep('b', w.logs.get('b')!.learnGossip('c', { accepted: [], chosen: [{ slot: 1, value: val(1, 'c') }] }, 0))
  t.is(learnt.persist?.through, 1, 'closing a slot is persisted too')
  const closedVotes = w.logs.get('b')!.votes()!
  t.is(closedVotes.through, 1)
  t.deepEqual(closedVotes.slots, [])
  w.boot('b', closedVotes)
  const closed = w.deliver('a', 'b', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 1, ballot: { round: 9, node: 'a' } })
  t.like(closed.reply, { t: 'nack', through: 1 })
})

test('a proposer in a slot that is already closed catches up with log? and learns the chosen value', t => {
  const w = new World(ABC)
  for (const n of ['b', 'c']) w.logs.get(n)!.learnGossip('a', { accepted: [], chosen: [{ slot: 1, value: val(1, 'x') }] }, 0)
  const a = w.logs.get('a')!
  const nacks = w.round(a.propose(1, val(1, 'a'), 0, rng).send, ['b', 'c'])
  t.true(nacks.every(n => n.msg.t === 'nack' && n.msg.through === 1))
  const asks = w.round(nacks)
  t.deepEqual(asks.map(m => m.msg.t), ['log?'])
  w.round(w.round(asks))
  t.is(a.through, 1)
  t.is(a.take()[0].value.heir.node, 'x')
})

test('a proposer without a value asks for one once a quorum promised, with their known incarnations', t => {
  const w = new World(ABC)
  w.keep('b', { persist: w.logs.get('b')!.noteEchoed('m1', 3).persist, reply: null, send: [] })
  t.deepEqual(w.disk.get('b')!.echoed, [['m1', 3]], 'an echoed incarnation is persisted before the echo')
  t.is(w.logs.get('b')!.noteEchoed('m1', 3).persist, null, 'once')
  const a = w.logs.get('a')!
  w.round(w.round(a.propose(1, undefined, 0, rng).send, ['a', 'b']))
  const need = a.needsValue(1)!
  t.deepEqual(need.known, [['m1', 3]])
  t.deepEqual(need.from.sort(), ['a', 'b'])
  const accepts = w.keep('a', a.supply(1, need.ballot, val(1, 'a'), 0)).send
  w.round(w.round(accepts))
  t.is(a.proposal(1)?.phase, 'chosen')
})

test('a nack naming a higher promise ends the ballot; the next round is above it', t => {
  const w = new World(ABC)
  const a = w.logs.get('a')!
  a.propose(1, val(1, 'a'), 0, rng)
  w.deliver('b', 'a', { v: CLUSTER_VERSION, node: 'b', epoch: 'e', t: 'nack', slot: 1, promised: { round: 7, node: 'c' } })
  t.is(a.proposal(1)?.phase, 'backoff')
  const next = a.tick(1000, rng).send
  t.true(next.length === 3 && next.every(m => m.msg.t === 'prepare' && m.msg.ballot.round === 8))
})

test('bounded memory: 60 slots in a row leave no open votes and a short chosen tail', t => {
  const w = new World(ABC)
  for (let slot = 1; slot <= 60; slot++) {
    const p = w.logs.get(ABC[slot % 3])!
    w.round(w.round(w.round(w.round(p.propose(slot, val(slot, ABC[slot % 3]), 0, rng).send))))
    w.gossip()
  }
  for (const n of ABC) {
    const log = w.logs.get(n)!
    t.is(log.through, 60)
    t.is(log.take().length, 60)
    const v = log.votes()!
    t.deepEqual(v.slots, [])
    t.true(v.chosen.length <= 16 && v.chosen.at(-1)!.slot === 60)
  }
  // a voter far behind is not answered about slots beyond its window
  const fresh = new World(ABC)
  t.is(fresh.deliver('a', 'b', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 40, ballot: { round: 1, node: 'a' } }).reply, null)
})

test('members learn from a quorum of voters\' gossip, never from a member; two voters: the first alone decides', t => {
  const w = new World(ABC, ['m'])
  const v = val(1, 'a')
  const g = { accepted: [{ slot: 1, ballot: { round: 1, node: 'a' }, digest: valueDigest(v), value: v }], chosen: [] }
  const m = w.logs.get('m')!
  m.learnGossip('x', g, 0)
  m.learnGossip('a', g, 0)
  t.is(m.through, 0, 'one voter is not a quorum')
  m.learnGossip('b', g, 0)
  t.is(m.through, 1)
  t.is(m.votes(), undefined, 'a member has no votes file')
  t.is(w.deliver('a', 'm', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 2, ballot: { round: 1, node: 'a' } }).reply, null)

  const two = new World(['p', 'q'])
  const p = two.logs.get('p')!
  two.round(two.round(two.round(two.round(p.propose(1, val(1, 'p'), 0, rng).send, ['p']))))
  t.is(p.proposal(1)?.phase, 'chosen', 'p weighs 1.5 of 2.5')
  const q = two.logs.get('q')!
  two.round(two.round(q.propose(2, val(2, 'q'), 0, rng).send, ['q']))
  t.is(q.proposal(2)?.phase, 'prepare', 'q alone is not a quorum')
})

test('digests: the same accounts in any order give one digest; any change gives another', t => {
  const v = val(1, 'a')
  const shuffled: ReclaimValue = { ...v, D: [{ node: 'z', acct: 2, inc: 2, epoch: 'y' }, ...v.D], listed: [{ node: 'q', acct: 1 }, ...v.listed] }
  const sorted: ReclaimValue = { ...v, D: [...v.D, { node: 'z', acct: 2, inc: 2, epoch: 'y' }], listed: [...v.listed, { node: 'q', acct: 1 }] }
  t.is(valueDigest(shuffled), valueDigest(sorted))
  t.not(valueDigest(v), valueDigest({ ...v, slot: 2 }))
  t.not(valueDigest(v), valueDigest({ ...v, heir: { ...v.heir, acct: 2 } }))
  t.not(valueDigest(v), valueDigest({ ...v, D: [{ ...v.D[0], inc: 2 }] }))
})

test('misuse is refused: a slot already chosen, a value for another slot, votes on a non-voter', t => {
  const w = new World(ABC)
  w.logs.get('a')!.learnGossip('b', { accepted: [], chosen: [{ slot: 1, value: val(1, 'b') }] }, 0)
  t.throws(() => w.logs.get('a')!.propose(1, val(1, 'a'), 0, rng), { message: /already chosen/ })
  t.throws(() => w.logs.get('a')!.propose(2, val(3, 'a'), 0, rng), { message: /slot 3 proposed in slot 2/ })
  t.throws(() => w.logs.get('a')!.propose(18, val(18, 'a'), 0, rng), { message: /beyond the open window/ })
  t.throws(() => new ReclaimLog({ node: 'm', epoch: 'e', voters: ABC, quorum: weightedQuorum(ABC), votes: emptyVotes('m', 'c') }))
})
