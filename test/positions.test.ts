/** Positions (positions.ts) and the ledger's part in them: Ledger.ack returns each dropped grant exactly once. */
import test from 'ava'
import { Ledger } from '../src/cluster/ledger.js'
import { CLUSTER_VERSION, type Grant, type GrantItem } from '../src/cluster/messages.js'
import { Positions } from '../src/cluster/positions.js'

function grant (from: string, epoch: string, to: string, toEpoch: string, seq: number, items: GrantItem[]): Grant {
  return { v: CLUSTER_VERSION, t: 'grant', node: from, epoch, inc: 1, to, toEpoch, seq, items }
}

test('credited grants add, acked grants subtract, per account and key; zeros are not kept', t => {
  const p = new Positions()
  p.received(grant('b', 'b1', 'a', 'a1', 1, [['k', 5, 0], ['j', 2, 0]]))
  t.is(p.of('b', 'b1', 'k'), 5)
  t.is(p.of('b', 'b1', 'j'), 2)
  t.is(p.size, 2)
  // Our grant of 5 on k back to b, acked: the pair is even on k and the entry goes.
  p.acked([grant('a', 'a1', 'b', 'b1', 1, [['k', 5, 0]])])
  t.is(p.of('b', 'b1', 'k'), 0)
  t.is(p.size, 1)
  t.deepEqual([...p.accounts('b').keys()], ['b1'])
  p.acked([grant('a', 'a1', 'b', 'b1', 2, [['j', 3, 0]])])
  t.is(p.of('b', 'b1', 'j'), -1)
  // A refused grant that was counted as acked comes back.
  p.takenBack(grant('a', 'a1', 'b', 'b1', 2, [['j', 3, 0]]))
  t.is(p.of('b', 'b1', 'j'), 2)
  p.acked([grant('a', 'a1', 'b', 'b1', 3, [['j', 2, 0]])])
  t.is(p.size, 0)
  t.deepEqual([...p.nodes()], [], 'an even pair leaves nothing behind')
})

test('each incarnation is its own account today; forgetting a node drops all of its accounts', t => {
  const p = new Positions()
  p.received(grant('b', 'b1', 'a', 'a1', 1, [['k', 4, 0]]))
  p.received(grant('b', 'b2', 'a', 'a1', 1, [['k', 1, 0]]))
  p.received(grant('c', 'c1', 'a', 'a1', 1, [['k', 2, 0]]))
  t.is(p.of('b', 'b1', 'k'), 4)
  t.is(p.of('b', 'b2', 'k'), 1)
  t.is(p.size, 3)
  p.forget('b')
  t.is(p.size, 1)
  t.is(p.of('b', 'b1', 'k'), 0)
  t.is(p.of('c', 'c1', 'k'), 2)
})

test('the account mapping is injected: incarnations of one account share its positions', t => {
  // As with `acct` in gossip: b2 continues b1's account (a clean restart).
  const p = new Positions((node, epoch) => epoch === 'b2' ? 'b1' : epoch)
  p.received(grant('b', 'b1', 'a', 'a1', 1, [['k', 4, 0]]))
  p.acked([grant('a', 'a1', 'b', 'b2', 1, [['k', 4, 0]])])
  t.is(p.of('b', 'b1', 'k'), 0)
  t.is(p.size, 0)
})

test('Ledger.ack returns the grants it drops, each once, in seq order', t => {
  const l = new Ledger('a', 'a1')
  const g1 = l.grant('b', 'b1', [['k', 1, 0]], 0)
  const g2 = l.grant('b', 'b1', [['k', 2, 0]], 0)
  const g3 = l.grant('b', 'b1', [['k', 3, 0]], 0)
  t.deepEqual(l.ack('b', 'b1', 2), [g1, g2])
  t.deepEqual(l.ack('b', 'b1', 2), [], 'a repeated ack drops nothing')
  t.deepEqual(l.ack('b', 'b1', 1), [], 'an older ack drops nothing')
  t.is(l.ackedTo('b', 'b1'), 2)
  // An ack beyond what was sent is clamped: only real grants are returned.
  t.deepEqual(l.ack('b', 'b1', 9), [g3])
  t.is(l.ackedTo('b', 'b1'), 3)
  t.deepEqual(l.ack('c', 'c1', 5), [], 'no outbox, nothing')
  l.peerEpoch('b', 'b2')
  t.is(l.ackedTo('b', 'b1'), undefined, 'an ended epoch\'s outbox is gone')
})

test('positions follow a ledger through a round trip', t => {
  // a gives b 5 tokens, b acks; b gives 5 back, a credits: even again.
  const la = new Ledger('a', 'a1')
  const lb = new Ledger('b', 'b1')
  const pa = new Positions()
  const pb = new Positions()
  const out = la.grant('b', 'b1', [['k', 5, 0]], 0)
  const { credit } = lb.apply(out, 'a1')
  for (const g of credit) pb.received(g)
  pa.acked(la.ack('b', 'b1', lb.appliedFrom('a', 'a1')))
  t.is(pa.of('b', 'b1', 'k'), -5)
  t.is(pb.of('a', 'a1', 'k'), 5)
  const back = lb.grant('a', 'a1', [['k', 5, 0]], 0)
  for (const g of la.apply(back, 'b1').credit) pa.received(g)
  pb.acked(lb.ack('a', 'a1', la.appliedFrom('b', 'b1')))
  t.is(pa.size + pb.size, 0)
})
