/**
 * A full sync (gossip-schedule.ts) announces every key once per pass, and a
 * key goes out at most once per message: one that is active and also
 * reached by the pass in the same message was sent twice (its receivers
 * skip the second, same seq), at every full sync. On a real ClusterCore.
 */
import test from 'ava'
import type { Gossip } from '../src/cluster/messages.js'
import { handCore } from './helpers/hand-core.js'
import { rule } from './helpers/rules.js'

const T = 0

test('every gossip names a key at most once, through full syncs, and every key is announced by each pass', t => {
  const c = handCore('a', [rule({ name: 'k', match: 'k:*', limit: 100, perMs: 1000 })])
  const keys = ['k:1', 'k:2', 'k:3', 'k:4']
  const gossips: Gossip[] = []
  let published = 0
  // 3 full-sync passes (every 20 gossips), with demand on two keys all along and two keys idle after the start.
  for (let ms = 0; ms < 60 * 250; ms += 50) {
    for (const k of ms === 0 ? keys : keys.slice(0, 2)) c.acquire(k, 1, T + ms)
    // A gossip that repeats the last goes as an hb (gossip-repeat.ts): no key line in it.
    for (const o of c.tick(T + ms)) {
      if (o.kind !== 'gossip') continue
      published++
      if (o.msg.t === 'gossip') gossips.push(o.msg)
    }
  }
  t.true(published >= 55, `gossips sent (${published}, ${gossips.length} whole)`)
  for (const g of gossips) {
    const names = g.keys.map(k => k[0])
    t.is(new Set(names).size, names.length, `seq ${g.seq}: ${names.join(',')}`)
  }
  // The idle keys are still announced by every pass after their last change (a full sync every 20 gossips).
  for (const idle of ['k:3', 'k:4']) {
    const seqs = gossips.filter(g => g.keys.some(k => k[0] === idle)).map(g => g.seq)
    t.true(seqs.filter(s => s > 20).length >= 2, `${idle} announced by later passes: ${seqs.join(',')}`)
  }
})
