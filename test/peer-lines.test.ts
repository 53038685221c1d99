/**
 * What a peer's gossip lines are labelled with. Pure: a Peers table fed
 * gossip by hand, no network.
 */
import test from 'ava'
import { CLUSTER_VERSION, type Gossip, type GossipKey } from '../src/cluster/messages.js'
import { Peers } from '../src/cluster/peers.js'

const keep = { cfg: 'h', known: () => true, maxKeys: 100 }

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
