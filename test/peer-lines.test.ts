/**
 * What a peer's gossip lines are labelled with. Pure: a Peers table fed
 * gossip by hand, no network.
 */
import test from 'ava'
import { CLUSTER_VERSION, type Gossip, type GossipKey } from '../src/cluster/messages.js'
import { heardAll } from '../src/cluster/heard.js'
import { Peers } from '../src/cluster/peers.js'

const keep = { cfg: 'h', known: () => true, maxKeys: 100, seeds: new Set(['a', 'b']) }

function gossip (seq: number, hash: string, keys: GossipKey[]): Gossip {
  return { v: CLUSTER_VERSION, t: 'gossip', node: 'b', epoch: 'eb', inc: 1, seq, now: 0, pending: [], carries: [], cfg: 'h', rules: { api: hash }, keys, acks: [] }
}

test('a late gossip fills a key the newer one left out, labelled with its own (older) rules, not the newer ones', t => {
  const peers = new Peers(1000, keep)
  // seq 2 is said under the new version and does not carry api:x.
  peers.observe(gossip(2, 'new', [['api:y', 1, 0, 0, 0, 0, 0, 0]]), 'a', 'ea', 100, 0)
  // seq 1, under the old version, arrives late and is the only word on api:x (it owes 4 there).
  const late = peers.observe(gossip(1, 'old', [['api:x', 0, 0, 0, 4, 0, 0, 0]]), 'a', 'ea', 110, 0)
  t.is(late?.fresh, false)
  const b = peers.get('b')
  t.is(b?.rules.api, 'new', "the peer's rules are its newest message's")
  t.is(b?.keys.get('api:x')?.owed, 4)
  t.is(b?.keys.get('api:x')?.gen.api, 'old', 'the late line was said under the old version')
  t.is(b?.keys.get('api:y')?.gen.api, 'new')
  // Lines of messages under unchanged rules share the peer's rules object.
  peers.observe(gossip(3, 'new', [['api:z', 1, 0, 0, 0, 0, 0, 0]]), 'a', 'ea', 120, 0)
  t.is(b?.keys.get('api:z')?.gen, b?.rules)
})

test('a peer counts as all heard only once every message from its named pass on was applied, whatever the order', t => {
  const peers = new Peers(1000, keep)
  const at = (seq: number, sync?: number): boolean => {
    peers.observe({ ...gossip(seq, 'v', []), ...(sync === undefined ? {} : { sync }) }, 'a', 'ea', 100 + seq, 0)
    const p = peers.get('b')
    if (p === undefined) throw new Error('no peer')
    return heardAll(p)
  }
  t.false(at(1), 'no pass named yet')
  t.true(at(2, 1), 'messages 1 and 2 applied: the pass from 1 is heard')
  // 3 is overtaken by 4 and arrives after it.
  t.false(at(4, 3), 'the pass from 3 is missing its first message')
  t.true(at(3, 3), 'the late message fills the gap')
  // 6 is lost for good: the pass from 5 is never heard, the next one is.
  t.true(at(5, 3))
  t.false(at(7, 5), 'the pass from 5 lost 6')
  t.false(at(8, 5))
  t.true(at(9, 8), 'a later pass, all of it applied')
  // A gap longer than a reordering starts the run anew; a message before it no longer fills anything.
  t.false(at(40, 9))
  t.false(at(10, 9), 'too far back: the run began at 40')
  t.true(at(41, 40))
  t.true(at(42), 'a gossip that names no pass leaves the last one named')
  // New rules: the pass named under the old ones says nothing of lines under these.
  peers.observe(gossip(43, 'w', []), 'a', 'ea', 600, 0)
  const q = peers.get('b')
  t.false(q !== undefined && heardAll(q), 'rules changed: no pass named under them yet')
  peers.observe({ ...gossip(44, 'w', []), sync: 44 }, 'a', 'ea', 610, 0)
  t.true(q !== undefined && heardAll(q))
  // A new epoch starts from its own first message.
  peers.observe({ ...gossip(1, 'v', []), epoch: 'eb2', inc: 2, sync: 1 }, 'a', 'ea', 500, 0)
  const p = peers.get('b')
  t.true(p !== undefined && heardAll(p), "the new epoch's first message is its pass's first")
})

test('a seed\'s members\' copy that names the copy before it (prev) leaves no gap for the seqs it skipped, and keeps the seed alive for the quiet time', t => {
  // aliveTimeoutMs 1000; the quiet time 4000 (a member that said nolease, or a seed whose copy said prev).
  const peers = new Peers(1000, keep, 4000)
  const at = (seq: number, nowMs: number, extra: Partial<Gossip> = {}): boolean => {
    peers.observe({ ...gossip(seq, 'v', []), ...extra }, 'a', 'ea', nowMs, 0)
    const p = peers.get('b')
    if (p === undefined) throw new Error('no peer')
    return heardAll(p)
  }
  t.true(at(1, 0, { sync: 1 }))
  t.true(at(2, 250, { prev: 1 }), 'at the quiet pace from here')
  // Seqs 3-5 said nothing new to the members, and the seed published no copy of them.
  t.true(at(6, 1250, { prev: 2 }), 'nothing missing: 3-5 were never sent here')
  const b = peers.get('b')
  t.true(b !== undefined && peers.isAlive(b, 1250 + 3900), 'alive for the quiet time after a copy that said prev')
  t.false(b !== undefined && peers.isAlive(b, 1250 + 4100))
  // A copy lost: 7 was published, then skips to 10, which names 7: 7 is missing, 8-9 are not.
  t.false(at(10, 2250, { prev: 7 }), '7 is missing')
  t.deepEqual(b?.missing, [7])
  t.true(at(7, 2260, { prev: 6 }), 'the late copy fills it')
  // Back at the usual pace (no prev): alive for aliveTimeoutMs only.
  at(11, 2500)
  t.true(b !== undefined && peers.isAlive(b, 2500 + 900))
  t.false(b !== undefined && peers.isAlive(b, 2500 + 1100))
})
