/**
 * Which of a seed's gossips its members get a copy of (member-copies.ts).
 * Pure: a MemberCopies fed copies by hand, on a virtual clock.
 */
import test from 'ava'
import { MemberCopies, plain } from '../src/cluster/member-copies.js'
import { CLUSTER_VERSION, type Gossip } from '../src/cluster/messages.js'

const QUIET = 1000
const copy = (seq: number, extra: Partial<Gossip> = {}): Gossip => ({
  v: CLUSTER_VERSION, t: 'gossip', node: 's1', epoch: 's1.1.ab', inc: 1, seq, now: 1_800_000_000_000 + seq * 250, pending: [], carries: [], cfg: 'c', rules: { api: 'h1' }, keys: [], acks: [], ...extra
})

/** Feed seqs 1..n at 250 ms apart; the seqs published, and each one's prev. */
function run (c: MemberCopies, from: number, to: number, extra: (seq: number) => Partial<Gossip> = () => ({})): Array<[number, number | undefined]> {
  const out: Array<[number, number | undefined]> = []
  for (let s = from; s <= to; s++) {
    const g = c.next(copy(s, extra(s)), s * 250, QUIET)
    if (g !== undefined) out.push([g.seq, g.prev])
  }
  return out
}

test('a copy that says nothing new goes once per quietGossipMs, each naming the one before; the first that says prev is never skipped after', t => {
  const c = new MemberCopies()
  // seq 1 has nothing new either, but no copy said prev yet: members give the seed the usual time.
  t.deepEqual(run(c, 1, 13), [[1, 0], [5, 1], [9, 5], [13, 9]])
})

test('anything a member acts on goes at once, and the copy after a skip names the last one published', t => {
  const c = new MemberCopies()
  run(c, 1, 5)
  // An ack at seq 7, a key line at 8, the rules changed at 9 (and stay changed).
  const out = run(c, 6, 14, s => s === 7 ? { acks: [['m1', 'm1.1.aa', 3]] } : s === 8 ? { keys: [['api', 1, 0, 0, 0, 0, 0, 0]] } : s >= 9 ? { rules: { api: 'h2' } } : {})
  t.deepEqual(out, [[7, 5], [8, undefined], [9, 8], [13, 9]])
  for (const extra of [{ sync: 3 }, { leaving: true }, { heard: [['m1', 1, 4]] as Gossip['heard'] }, { members: [] as Gossip['members'] }]) {
    t.false(plain(copy(20, extra)), JSON.stringify(extra))
  }
  t.true(plain(copy(20, { fenced: true, alloc: false })))
})

test('for a while after a member came into view, every copy goes', t => {
  const c = new MemberCopies()
  t.deepEqual(run(c, 1, 4), [[1, 0]])
  c.memberReturned(8 * 250)
  // At the usual pace (no prev but after the skip) until then; then quiet again, the first copy naming the last.
  t.deepEqual(run(c, 5, 12), [[5, 1], [6, undefined], [7, undefined], [8, 7], [12, 8]])
})
