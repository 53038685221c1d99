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
