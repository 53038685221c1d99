/**
 * Journal replication between seeds (replication.ts, replica-store.ts),
 * driven by hand: the writer's jreps go to ReplicaStores and their jacks
 * come back, with loss, reordering and restarts where the cases need them.
 */
import test from 'ava'
import { estateOf } from '../src/cluster/estate.js'
import { BooksJournal, replayJournal, type JournalCheckpoint } from '../src/cluster/journal.js'
import { RuleSet } from '../src/core/rules.js'
import { rule } from './helpers/rules.js'
import { Quorum } from '../src/cluster/quorum.js'
import { MAX_CHUNK, type Jrep } from '../src/cluster/replica-messages.js'
import { ReplicaStore } from '../src/cluster/replica-store.js'
import { JournalReplication, replicaGroup } from '../src/cluster/replication.js'

const V = 4

function writer (seeds: string[], inc = 1): { r: JournalReplication, j: BooksJournal, cp: (keys?: Array<[string, number]>) => () => JournalCheckpoint } {
  const r = new JournalReplication({ node: 'a', epoch: `a.${inc}`, inc, enabled: true, quorum: new Quorum(seeds), version: V, timeoutMs: 1000, retryMs: 250 })
  const j = new BooksJournal()
  const cp = (keys: Array<[string, number]> = []) => (): JournalCheckpoint =>
    ({ v: 1, node: 'a', cluster: 'c', inc, gen: r.nextGen, epoch: `a.${inc}`, carries: [], allocate: true, rules: [], keys })
  return { r, j, cp }
}

/** Deliver every jrep the writer has to send, to stores that take it (a `drop` set loses them), until nothing moves. */
let clock = 0
function pump (r: JournalReplication, stores: Map<string, ReplicaStore>, start: number, drop = new Set<string>()): Jrep[] {
  // Time only moves on, across calls: the writer spaces its periodic sends by retryMs.
  let now = clock = Math.max(clock, start)
  const seen: Jrep[] = []
  for (let round = 0; round < 1000; round++) {
    const out = r.outbound(now, true)
    if (out.length === 0 || out.every(o => drop.has(o.to) || !stores.has(o.to))) {
      for (const o of out) r.onFailed(o.to, now)
      break
    }
    for (const { to, msg } of out) {
      seen.push(msg)
      const s = stores.get(to)
      if (s === undefined || drop.has(to)) { r.onFailed(to, now); continue }
      const c = s.accept(msg)
      if (c !== null) s.commit(c)
      r.onAck(to, s.ack('a', to, `${to}.1`, V), now)
    }
    now += 300 // past retryMs: a failed replica is tried again next round
    clock = now
  }
  return seen
}

/** What a heir reading `store`'s copy of a's journal credits for `key`: its books less what is left of its reservation. */
function copyCredit (store: ReplicaStore, key: string): number {
  const copy = replayJournal(store.get('a')!.text, 'copy', 'a', 'c')
  const e = copy.books.get(key)!
  const res = copy.reserved.get(key)!
  return (e.base ?? 0) + e.delta - Math.max(0, res.ceiling - res.given)
}

test('a give is durable once it is on this disk and one other seed of three: not before', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const stores = new Map([['b', new ReplicaStore()], ['c', new ReplicaStore()]])
  const first = r.take(j, cp())
  t.truthy(first)
  r.localDone(first!.pos)
  t.false(r.isDurable(first!.pos), 'its own disk alone is not a quorum of three')
  pump(r, stores, 0, new Set(['c']))
  t.true(r.isDurable(first!.pos), 'a and b are a quorum')
  j.record('k', -5, true, ['m', 'm.1'])
  const give = r.take(j, cp())!
  let answered: boolean | undefined
  r.whenDurable(give.pos, 0, ok => { answered = ok })
  pump(r, stores, 0, new Set(['b', 'c']))
  r.localDone(give.pos)
  t.is(answered, undefined, 'no other seed has it: the grant waits')
  pump(r, stores, 1000)
  t.true(answered, 'the grant may leave once b or c has it')
  pump(r, stores, 2000)
  t.is(stores.get('b')!.get('a')!.text, stores.get('c')!.get('a')!.text)
})

test('unanswered: a waiter is answered false after the timeout, and the grant does not leave', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const w = r.take(j, cp())!
  r.localDone(w.pos)
  const calls: boolean[] = []
  r.whenDurable(w.pos, 0, ok => calls.push(ok))
  r.expire(999)
  t.deepEqual(calls, [])
  r.expire(1001)
  t.deepEqual(calls, [false])
  r.expire(5000)
  t.deepEqual(calls, [false], 'answered once')
})

test('a checkpoint longer than a jrep arrives in parts; the copy is durable only once its line is whole, and replays as the writer\'s', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const keys: Array<[string, number]> = []
  for (let i = 0; i < 3000; i++) keys.push([`user:${i}:ключ:😀`, i % 7])
  const w = r.take(j, cp(keys))!
  r.localDone(w.pos)
  t.true(w.pos.end > 2 * MAX_CHUNK)
  const b = new ReplicaStore()
  const stores = new Map([['b', b]])
  // One part at a time: not durable in between.
  const out = r.outbound(0, true).filter(o => o.to === 'b')
  r.onFailed('c', 0)
  t.is(out.length, 1)
  const c0 = b.accept(out[0].msg)
  t.is(c0, null, 'the checkpoint line is not whole yet')
  const ack = b.ack('a', 'b', 'b.1', V)
  t.false(ack.durable)
  t.is(ack.have, out[0].msg.data.length)
  r.onAck('b', ack, 0)
  t.false(r.isDurable(w.pos))
  const rest = pump(r, stores, 0)
  t.true(rest.length >= 2)
  for (const m of [out[0].msg, ...rest]) t.true(Buffer.byteLength(JSON.stringify(m)) < 64 * 1024, 'every jrep fits a request')
  t.true(r.isDurable(w.pos))
  j.record('user:1:ключ:😀', -3, true)
  const g = r.take(j, cp(keys))!
  r.localDone(g.pos)
  pump(r, stores, 0)
  const copy = replayJournal(b.get('a')!.text, 'copy', 'a', 'c')
  t.is(copy.books.get('user:1:ключ:😀')?.base, 1)
  t.is(copy.books.get('user:1:ключ:😀')?.delta, -3)
  t.is(copy.books.size, keys.length)
})

test('a new generation replaces the copy; old, gapped and duplicate jreps change nothing', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const b = new ReplicaStore()
  const stores = new Map([['b', b]])
  r.localDone(r.take(j, cp([['x', 1]]))!.pos)
  j.record('x', -1, true)
  r.localDone(r.take(j, cp())!.pos)
  const sent = pump(r, stores, 0)
  const text1 = b.get('a')!.text
  t.is(text1.split('\n').length, 3)
  // A duplicate and a jrep past the end: no change.
  t.is(b.accept(sent[0]), null)
  t.is(b.accept({ ...sent[0], offset: text1.length + 10 }), null)
  // A new checkpoint: generation 2.
  j.checkpointNeeded = true
  const w2 = r.take(j, cp([['x', 0]]))!
  t.is(w2.pos.gen, 2)
  r.localDone(w2.pos)
  pump(r, stores, 0)
  t.is(b.get('a')!.gen, 2)
  t.is(b.get('a')!.text.split('\n').length, 2)
  // Generation 1's jreps, replayed late, are ignored.
  for (const m of sent) t.is(b.accept(m), null)
  // An older incarnation's jrep is ignored too.
  t.is(b.accept({ ...sent[0], inc: 0 }), null)
})

test('a replica restarted from its file carries on; a writer\'s new incarnation starts a fresh copy', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  let b = new ReplicaStore()
  r.localDone(r.take(j, cp())!.pos)
  pump(r, new Map([['b', b]]), 0)
  const onDisk = b.get('a')!.text
  b = new ReplicaStore(new Map([['a', onDisk]]))
  t.is(b.get('a')?.gen, 1)
  j.record('y', -2, true)
  const g = r.take(j, cp())!
  r.localDone(g.pos)
  pump(r, new Map([['b', b]]), 0)
  t.true(r.isDurable(g.pos))
  t.true(b.get('a')!.text.startsWith(onDisk))
  // Incarnation 2 of the writer.
  const w2 = writer(['a', 'b', 'c'], 2)
  const p2 = w2.r.take(w2.j, w2.cp([['z', 4]]))!
  w2.r.localDone(p2.pos)
  pump(w2.r, new Map([['b', b]]), 0)
  t.is(b.get('a')!.inc, 2)
  t.true(w2.r.isDurable(p2.pos))
  // The old incarnation learns the replica has moved on, and does not count it.
  r.onAck('b', b.ack('a', 'b', 'b.1', V), 0)
  j.record('y', -1, true)
  const late = r.take(j, cp())!
  r.localDone(late.pos)
  pump(r, new Map([['b', b]]), 0)
  t.false(r.isDurable(late.pos), 'a stale incarnation cannot complete a write')
})

test('a new incarnation\'s copy keeps the one it replaces aside, for a heir of the old incarnation, across the replica\'s restart', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const b = new ReplicaStore()
  r.localDone(r.take(j, cp([['x', 5]]))!.pos)
  j.record('x', -2, true)
  r.localDone(r.take(j, cp())!.pos)
  pump(r, new Map([['b', b]]), 0)
  const old = b.get('a')!.text
  // a restarts (incarnation 2) and its first jreps reach b before b settles a/1.
  const w2 = writer(['a', 'b', 'c'], 2)
  w2.r.localDone(w2.r.take(w2.j, w2.cp([['x', 3]]))!.pos)
  const [first] = w2.r.outbound(0, true)
  const c = b.accept(first.msg)!
  t.is(c.kind, 'replace')
  t.is(c.superseded?.text, old, 'the replaced copy goes aside, written with the change')
  b.commit(c)
  t.is(b.get('a')!.inc, 2)
  t.is(b.upTo('a', 1)?.text, old, 'a heir of a/1 reads a/1\'s copy')
  t.is(b.upTo('a', 2)?.inc, 2)
  t.is(b.upTo('a', 9)?.inc, 2)
  // From disk: the current file and the superseded one.
  const again = new ReplicaStore(new Map([['a', b.get('a')!.text]]), new Map([['a', old]]))
  t.is(again.upTo('a', 1)?.text, old)
  t.is(again.get('a')!.inc, 2)
  // A new generation of the same incarnation keeps nothing aside.
  w2.j.checkpointNeeded = true
  w2.r.onAck('b', b.ack('a', 'b', 'b.1', V), 0)
  w2.r.localDone(w2.r.take(w2.j, w2.cp([['x', 1]]))!.pos)
  const gen2 = w2.r.outbound(1000, true).find(o => o.to === 'b')!
  const c2 = b.accept(gen2.msg)!
  t.is(c2.superseded, undefined)
  b.commit(c2)
  t.is(b.upTo('a', 1)?.text, old)
})

test('two seeds: the first alone is a quorum (it weighs 1.5), the second needs the first', t => {
  const first = writer(['a', 'b'])
  const w = first.r.take(first.j, first.cp())!
  first.r.localDone(w.pos)
  t.true(first.r.isDurable(w.pos))
  const second = new JournalReplication({ node: 'b', epoch: 'b.1', inc: 1, enabled: true, quorum: new Quorum(['a', 'b']), version: V, timeoutMs: 1000, retryMs: 250 })
  const j = new BooksJournal()
  const p = second.take(j, () => ({ v: 1, node: 'b', cluster: 'c', inc: 1, gen: 1, epoch: 'b.1', carries: [], allocate: true, rules: [], keys: [] }))!
  second.localDone(p.pos)
  t.false(second.isDurable(p.pos))
})

test('disabled (a member, or leases off): durable once on this disk, nothing sent', t => {
  const r = new JournalReplication({ node: 'm', epoch: 'm.1', inc: 1, enabled: false, quorum: new Quorum(['a', 'b', 'c']), version: V, timeoutMs: 1000, retryMs: 250 })
  const j = new BooksJournal()
  const p = r.take(j, () => ({ v: 1, node: 'm', cluster: 'c', inc: 1, epoch: 'm.1', carries: [], allocate: false, rules: [], keys: [] }))!
  t.false(r.isDurable(p.pos))
  r.localDone(p.pos)
  t.true(r.isDurable(p.pos))
  t.deepEqual(r.outbound(0), [])
})

test('reservations: a give under a copied reservation leaves at once, one past it waits; books less what is left of the copied reservation never count a token that left', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const stores = new Map([['b', new ReplicaStore()], ['c', new ReplicaStore()]])
  r.localDone(r.take(j, cp([['k', 100]]))!.pos)
  pump(r, stores, 0)
  // The first give of k (stock 100) writes a reservation of 5 + 10: its grant waits until a quorum has it.
  j.record('k', -5, true)
  r.gave(j, 'k', 5, 100)
  r.localDone(r.take(j, cp())!.pos)
  let ok: boolean | undefined
  r.whenCovered(['k'], 0, x => { ok = x })
  t.is(ok, undefined)
  pump(r, stores, 0)
  t.true(ok)
  // The next give, 3, stays under it with half the headroom left: no new reservation, no round trip.
  j.record('k', -3, true)
  r.gave(j, 'k', 3, 100)
  r.localDone(r.take(j, cp())!.pos)
  ok = undefined
  r.whenCovered(['k'], 0, x => { ok = x })
  t.true(ok, 'covered by the reservation the seeds have')
  // A heir reading b's copy (which lacks the give of 3) credits its books less what is left of the reservation.
  const credit = copyCredit(stores.get('b')!, 'k')
  t.is(credit, 85)
  t.true(credit <= 100 - 8, 'never more than the writer has')
  // Past the reservation: a new one, and the grant waits for it.
  j.record('k', -20, true)
  r.gave(j, 'k', 20, 100)
  r.localDone(r.take(j, cp())!.pos)
  ok = undefined
  r.whenCovered(['k'], 0, x => { ok = x })
  t.is(ok, undefined)
  pump(r, stores, 0)
  t.true(ok)
  // A new generation's checkpoint carries what is left (its books already hold the gives).
  j.checkpointNeeded = true
  const left = r.reserved()
  const w = r.take(j, () => ({ v: 1, node: 'a', cluster: 'c', inc: 1, gen: r.nextGen, epoch: 'a.1', carries: [], allocate: true, rules: [], keys: [['k', 72]], reserved: left }))!
  r.localDone(w.pos)
  pump(r, stores, 0)
  const c2 = replayJournal(stores.get('b')!.get('a')!.text, 'copy', 'a', 'c')
  t.deepEqual(c2.reserved.get('k'), { ceiling: left[0][1], given: 0 })
})

test('an idle reservation is given back: once copied, a heir credits the whole books; the next give waits for a new one at a quorum', t => {
  const { r, j, cp } = writer(['a', 'b', 'c'])
  const stores = new Map([['b', new ReplicaStore()], ['c', new ReplicaStore()]])
  r.localDone(r.take(j, cp([['k', 100]]))!.pos)
  pump(r, stores, 0)
  j.record('k', -5, true)
  r.gave(j, 'k', 5, 100, Infinity, 1000)
  r.localDone(r.take(j, cp())!.pos)
  pump(r, stores, 0)
  const credit = (): number => copyCredit(stores.get('b')!, 'k')
  t.is(credit(), 85, 'the heir would lose what is left of the reservation (10)')
  // Not idle long enough: kept.
  r.release(j, 1500, 1000)
  t.is(r.take(j, cp()), null)
  // Idle for a second: the ceiling comes down to what is given, and the heir would lose nothing.
  r.release(j, 2000, 1000)
  t.deepEqual(r.reserved(), [])
  r.localDone(r.take(j, cp())!.pos)
  pump(r, stores, 0)
  t.is(credit(), 95)
  // The next give is under no copied reservation: its grant waits until the new one is at a quorum.
  j.record('k', -2, true)
  r.gave(j, 'k', 2, 100, Infinity, 3000)
  r.localDone(r.take(j, cp())!.pos)
  let ok: boolean | undefined
  r.whenCovered(['k'], 3000, x => { ok = x })
  t.is(ok, undefined)
  t.is(credit(), 95, 'the copies lack the give, and rightly: its grant has not left')
  pump(r, stores, 0)
  t.true(ok)
  t.true(credit() <= 93)
})

test('replica groups: the next four seeds in name order, wrapping; a grant waits for two of them, not for 20 of 39 seeds', t => {
  const seeds = Array.from({ length: 40 }, (_, i) => `s${String(i).padStart(2, '0')}`)
  t.deepEqual(replicaGroup('s10', seeds), ['s11', 's12', 's13', 's14'])
  t.deepEqual(replicaGroup('s38', seeds), ['s39', 's00', 's01', 's02'])
  t.deepEqual(replicaGroup('b', ['c', 'a', 'b']), ['c', 'a'])
  t.deepEqual(replicaGroup('a', ['a']), [])
  t.deepEqual(replicaGroup('m', ['a', 'b']), [], 'not a seed')
  // With 40 seeds a writer waits for two of its four, not for 20 of 39.
  const r = JournalReplication.forNode('s10', 's10.1', 1, seeds, true, { leases: true, replicateJournal: true, wantTimeoutMs: 1000, gossipIntervalMs: 250 })
  const j = new BooksJournal()
  const w = r.take(j, () => ({ v: 1, node: 's10', cluster: 'c', inc: 1, gen: r.nextGen, epoch: 's10.1', carries: [], allocate: true, rules: [], keys: [] }))!
  r.localDone(w.pos)
  r.whenDurable(w.pos, 0, () => {})
  t.deepEqual(r.outbound(0).map(o => o.to).sort(), ['s11', 's12'], 'a grant waits: a quorum of five is three, itself and two')
  t.deepEqual(r.outbound(0, true).map(o => o.to).sort(), ['s13', 's14'], 'the rest of the group catches up on a tick')
})

test('estate: a copy\'s books less what is left of its reservation; an exact key it never changed at its initial share; never below zero', t => {
  const rules = new RuleSet([rule({ name: 'api', limit: 90, perMs: 1000 }), rule({ name: 'day', limit: 30, perMs: 86_400_000 }), rule({ name: 'sig', match: 'sig:*', limit: 5, perMs: 1000 })])
  const seeds = ['a', 'b', 'c']
  const cp = { v: 1, node: 'a', cluster: 'c', inc: 1, gen: 1, epoch: 'a.1', carries: [], allocate: true, rules: [], keys: [['api', 50], ['sig:x', 5]], reserved: [['api', 4]] }
  const text = `${JSON.stringify(cp)}\n${JSON.stringify([['api', -8], ['gave', 'api', 8], ['ceil', 'api', 20], ['sig:x', -5], ['gave', 'sig:x', 5], ['ceil', 'sig:x', 9]])}\n`
  const e = estateOf(text, 'a', 'c', rules, seeds)
  // api: 50 − 8 = 42 books; reservation 20 of which 8 given: 12 left → 30.
  t.is(e.credits.get('api'), 30)
  // day: never in the copy, a's initial share of 30 over 3 seeds.
  t.is(e.credits.get('day'), 10)
  // sig:x: 0 books, 4 left of its reservation: nothing, never negative.
  t.is(e.credits.get('sig:x'), 0)
  t.is(e.tokens, 40)
  t.throws(() => estateOf(text, 'b', 'c', rules, seeds), { code: 'E_JOURNAL_INVALID' }, 'a copy of another seed is refused')
})

// chaos 5 seeds, seed 2: a seed that had inherited two others recovered from its journal with its books of a key
// back at exactly its own share, so its checkpoint named no key (persist.ts journalCheckpoint compares with the own
// share alone). Its heir read the base as own share plus the inherited ones, credited 63 for 32, and the cluster
// admitted 130 per window of 100 for good.
test('estate: a key a checkpoint leaves out is at the writer\'s own share, though it had inherited seeds (their shares are in its books)', t => {
  const rules = new RuleSet([rule({ name: 'api', limit: 95, perMs: 1000 })])
  const seeds = ['a', 'b', 'c']
  const cp = { v: 1, node: 'a', cluster: 'c', inc: 2, gen: 1, epoch: 'a.2', carries: ['a.1'], allocate: true, rules: [], keys: [], inherited: [['c', 1, 0]] }
  const text = `${JSON.stringify(cp)}\n${JSON.stringify([['api', -3]])}\n`
  // a's own share of 95 over 3 seeds is 32 (c's, 31, is in a's books only while a's checkpoint names them).
  t.is(estateOf(text, 'a', 'c', rules, seeds).credits.get('api'), 29)
  // Named, the books are the checkpoint's, whatever the shares.
  const named = `${JSON.stringify({ ...cp, keys: [['api', 63]] })}\n${JSON.stringify([['api', -3]])}\n`
  t.is(estateOf(named, 'a', 'c', rules, seeds).credits.get('api'), 60)
})
