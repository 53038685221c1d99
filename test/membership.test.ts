/**
 * Membership (names bound to peer ids), pure: members bound by a majority
 * of the seeds, impostors refused, and a taken name an error on both sides
 * (the seed lists its refusals in gossip; the refused node finds its own).
 */
import test from 'ava'
import { Membership } from '../src/cluster/membership.js'
import { MAX_REFUSED, parseMessage, DEFAULT_BOUNDS, CLUSTER_VERSION } from '../src/cluster/messages.js'

const ID = (n: number): string => `12D3KooW${String(n).padStart(44, 'A')}`

function seed (me: string): Membership {
  return new Membership({ me, listed: new Map([['a', undefined], ['b', undefined], ['c', undefined]]), seeds: ['a', 'b', 'c'], maxMembers: 8 })
}

test('a member is bound by the seeds\' majority; a second peer id in its name is refused and listed', t => {
  const a = seed('a')
  t.is(a.check('m', ID(1), true), 'unknown', 'one seed alone does not bind a member')
  a.attest('b', [['m', ID(1)]])
  t.is(a.check('m', ID(1), true), 'ok', 'two of three seeds vouch for it')
  const v = a.version
  t.is(a.check('m', ID(2), true), 'impostor')
  t.deepEqual(a.refusals(), [['m', ID(2)]])
  t.true(a.version > v, 'the gossip sends the changed list')
  // The same refusal again changes nothing.
  const v2 = a.version
  a.check('m', ID(2), true)
  t.is(a.version, v2)
})

test('refusals are bounded: the oldest goes', t => {
  const a = seed('a')
  for (let i = 0; i < MAX_REFUSED + 5; i++) a.check('b', ID(100 + i), true) // b is first bound to ID(100)
  const r = a.refusals()
  t.is(r.length, 1, 'one name, its latest refused id')
  for (let i = 0; i < MAX_REFUSED + 5; i++) { a.check(`m${i}`, ID(i), true); a.attest('b', [[`m${i}`, ID(i)]]); a.check(`m${i}`, ID(500 + i), true) }
  t.is(a.refusals().length, MAX_REFUSED)
})

test('the refused node finds its own name in a seed\'s refusals, with the peer id that holds it', t => {
  const twin = new Membership({ me: 'm', listed: new Map([['a', undefined], ['b', undefined], ['c', undefined], ['m', undefined]]), seeds: ['a', 'b', 'c'], maxMembers: 8 })
  t.deepEqual(twin.takenBy(ID(2)), { seeds: [], heldBy: undefined })
  twin.attest('a', [['m', ID(1)]])
  twin.noteRefusals('a', [['m', ID(2)], ['x', ID(9)]])
  t.deepEqual(twin.takenBy(ID(2)), { seeds: ['a'], heldBy: ID(1) })
  t.deepEqual(twin.takenBy(ID(1)).seeds, [], 'another process\'s refusal is not ours')
  twin.noteRefusals('z', [['m', ID(2)]])
  t.deepEqual(twin.takenBy(ID(2)).seeds, ['a'], 'only seeds count')
  twin.noteRefusals('a', [])
  t.deepEqual(twin.takenBy(ID(2)).seeds, [], 'a seed that no longer lists it')
})

test('a gossip\'s refusals are parsed strictly and bounded', t => {
  const g = (refused: unknown): unknown => ({ v: CLUSTER_VERSION, t: 'gossip', node: 'a', epoch: 'e1', inc: 1, seq: 1, now: 0, pending: [], carries: [], cfg: 'h', members: [], refused, rules: {}, keys: [], acks: [] })
  const ok = parseMessage(g([['m', ID(2)]]), DEFAULT_BOUNDS)
  t.deepEqual(ok.t === 'gossip' ? ok.refused : null, [['m', ID(2)]])
  t.throws(() => parseMessage(g([['m', 'not a peer id']]), DEFAULT_BOUNDS))
  t.throws(() => parseMessage(g([['m']]), DEFAULT_BOUNDS))
  t.throws(() => parseMessage(g(Array.from({ length: MAX_REFUSED + 1 }, (_, i) => [`m${i}`, ID(i)])), DEFAULT_BOUNDS))
})

// Admission that can't be exhausted (issue 46): one name per peer id, a bounded number per address, only from a
// connected peer, and a silent name's slot freed by its lease unless it owes something.

function seedAB (me: string, hosts: Map<string, string>, maxMembersPerHost = 3): Membership {
  const m = new Membership({ me, listed: new Map([['a', undefined], ['b', undefined]]), seeds: ['a', 'b'], maxMembers: 8, maxMembersPerHost })
  m.hostOf = id => hosts.get(id)
  return m
}

test('a seed admits one name per peer id: 1,000 names from one id take one slot', t => {
  const a = seedAB('a', new Map([[ID(1), '10.0.0.1'], [ID(2), '10.0.0.2']]))
  for (let i = 0; i < 1000; i++) a.check(`fake${i}`, ID(1), true, 0)
  t.deepEqual(a.members(), [['fake0', ID(1)]])
  t.is(a.admission.perPeer, 999)
  a.check('real', ID(2), true, 0)
  t.deepEqual(a.members().map(([n]) => n), ['fake0', 'real'], 'a real member still finds a slot')
})

test('a seed admits at most maxMembersPerHost names from one address, and none from a peer it is not connected to', t => {
  const hosts = new Map<string, string>()
  for (let i = 0; i < 10; i++) hosts.set(ID(i), '10.0.0.9')
  hosts.set(ID(50), '10.0.0.50')
  const a = seedAB('a', hosts)
  for (let i = 0; i < 10; i++) a.check(`fake${i}`, ID(i), true, 0)
  t.is(a.members().length, 3)
  t.is(a.admission.perHost, 7)
  a.check('gone', ID(60), true, 0)
  t.is(a.admission.notConnected, 1)
  t.false(a.members().some(([n]) => n === 'gone'))
  a.check('real', ID(50), true, 0)
  t.true(a.members().some(([n]) => n === 'real'))
})

test('a silent slot is freed after its lease unless it owes; speaking renews it; the name is free again', t => {
  const a = seedAB('a', new Map([[ID(1), 'h1'], [ID(2), 'h2'], [ID(3), 'h3']]))
  a.check('m1', ID(1), true, 0)
  a.check('m2', ID(2), true, 0)
  a.check('m2', ID(2), true, 4000) // m2 speaks again
  const v = a.version
  t.deepEqual(a.expire(4999, 5000, () => false), [], 'not silent long enough')
  t.deepEqual(a.expire(5000, 5000, n => n === 'm1'), [], 'm1 owes: it keeps its slot (the settlement releases it)')
  t.deepEqual(a.expire(5000, 5000, () => false), ['m1'])
  t.true(a.version > v, 'the gossip sends the changed list')
  t.is(a.admission.freed, 1)
  t.deepEqual(a.members(), [['m2', ID(2)]])
  a.check('m1', ID(3), true, 6000)
  t.deepEqual(a.members(), [['m2', ID(2)], ['m1', ID(3)]], 'another peer id may take the freed name')
  t.deepEqual(a.expire(9000, 5000, () => false), ['m2'])
})

test('a freed name is not given to another peer id while another seed still vouches for the first', t => {
  const a = seedAB('a', new Map([[ID(1), 'h1'], [ID(2), 'h2']]))
  a.check('m', ID(1), true, 0)
  a.attest('b', [['m', ID(1)]])
  t.deepEqual(a.expire(5000, 5000, () => false), ['m'])
  t.is(a.check('m', ID(2), true, 5001), 'impostor', 'b still binds m to ID(1)')
  t.deepEqual(a.members(), [])
  t.is(a.check('m', ID(1), true, 5002), 'ok', 'the first holder comes back under the same binding')
})
