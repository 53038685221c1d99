/**
 * A rule change whose debtor's one line at the new version is lost. Pure:
 * two cores driven by hand, each message passed (or dropped) explicitly.
 *
 * A node remembers a changed rule's earlier versions (rule-change.ts
 * `Transitions`) so that caution can expect a burn from a seed whose line
 * it has only heard under an old version. It forgets them once every seed
 * gossips the new rules and no longer names the rule pending. But `pending`
 * clears when the seed has *sent* every key, not when this node has heard
 * them: with the one gossip that carried the debtor's new line lost, the
 * other node read the debtor's old line (owing nothing) and spent the
 * tokens the debtor owed.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import type { Peer } from '../src/cluster/peers.js'
import { stampOf, Transitions } from '../src/cluster/rule-change.js'
import { compileRule } from '../src/core/rules.js'
import type { RuleConfig } from '../src/config/types.js'
import { handCore } from './helpers/hand-core.js'

const DAY = 86_400_000
const day = (limit: number): RuleConfig[] => [{ name: 'api', match: 'api', limit, per: '1d', perMs: DAY, burst: limit, algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', maxDebt: 10 }]

const core = (node: 'a' | 'b'): ClusterCore => handCore(node, day(90))

test("the debtor's line at the lowered limit is lost: the other node still expects its burn and admits only up to the new limit", t => {
  const a = core('a')
  const b = core('b')
  let now = 10
  const exchange = (): void => {
    a.onGossip(b.gossip.now(now), 'id:b', now)
    b.onGossip(a.gossip.now(now), 'id:a', now)
  }
  exchange()
  // b gives a 40 of its 45: b holds 5, a 85.
  const ks = b.limiter.existing('api') ?? b.limiter.keyState('api', 1, now)
  const pa = b.peers.get('a')
  if (pa === undefined) throw new Error('setup')
  const g = b.transfers.give(ks, ks.ext as never, pa, 40, now)
  if (g === undefined) throw new Error('nothing given')
  b.onReply(g, a.onGrant(g, 'id:b', now), now)
  now += 300
  exchange()
  // Both lower the limit to 30 (a share of 15 each): b owes 45 - 15 - 5 = 25, a holds 85 - 30 = 55.
  a.setRules(day(30), now)
  b.setRules(day(30), now)
  t.is((b.limiter.existing('api')?.ext as { burn: number }).burn, 25)
  now += 300
  // b's gossips at the new version: the one that carries its owed line is lost, the rest arrive, up to the
  // first that names no rule pending.
  let lost = 0
  for (let i = 0; i < 10; i++) {
    now += 300
    const m = b.gossip.due(now)
    if (m === null) throw new Error('no gossip due')
    if (m.keys.some(k => k[0] === 'api')) { t.is(m.keys.find(k => k[0] === 'api')?.[4], 25); lost++; continue }
    a.onGossip(m, 'id:b', now)
    if (m.pending.length === 0) break
  }
  t.is(lost, 1, 'one gossip carried the line')
  t.deepEqual(b.gossip.pendingRules(), [], 'b has announced every key')
  t.is(a.peers.get('b')?.keys.get('api')?.owed, 0, "a has only b's old line")
  b.onGossip(a.gossip.now(now), 'id:a', now)
  // a's housekeeping runs with its ticks.
  for (let i = 0; i < 4; i++) { now += 300; a.tick(now); b.tick(now) }
  const drain = (): number => {
    let n = 0
    for (let i = 0; i < 100; i++) if (a.acquire('api', 1, now).allowed) n++
    return n
  }
  let admitted = drain()
  t.true(admitted <= 30, `a admitted ${admitted} after the lowering to 30 (b owes 25 of a's 55)`)
  t.true(admitted >= 15, `the lowered limit is usable (${admitted})`)
  // From here every gossip arrives: b's next full sync re-says its line, and the change is forgotten two full syncs
  // after it was done. a never admits more than the lowered limit.
  for (let i = 0; i < 100; i++) {
    now += 250
    for (const o of b.tick(now)) if (o.kind === 'gossip') a.onGossip(o.msg, 'id:b', now)
    for (const o of a.tick(now)) if (o.kind === 'gossip') b.onGossip(o.msg, 'id:a', now)
    admitted += drain()
  }
  t.is(a.peers.get('b')?.keys.get('api')?.owed, 25, "b's full sync said its line again")
  t.false(a.transitions.active, 'the change is forgotten')
  t.true(admitted <= 30, `a admitted ${admitted} in all`)
})

test('a rule changed again during the grace gets a grace of its own', t => {
  const v = [30, 60, 90].map(limit => compileRule(day(limit)[0]))
  const tr = new Transitions()
  // b is at whatever version is current, done announcing it.
  let at = v[1]
  const b = (): Peer => ({ rules: { api: at.hash }, pending: new Set<string>() }) as unknown as Peer
  const settle = (now: number): void => tr.settle([at], ['a', 'b'], 'a', n => n === 'b' ? b() : undefined, now, 1000)
  tr.changed(stampOf(v[0]), v[1])
  settle(0)
  t.true(tr.active, 'the grace starts')
  settle(999)
  t.true(tr.active)
  // Changed again just before the first grace ends, and b is already at the newest version.
  at = v[2]
  tr.changed(stampOf(v[1]), v[2])
  settle(1000)
  t.true(tr.active, 'not forgotten on the first change grace')
  settle(1999)
  t.true(tr.active)
  settle(2000)
  t.false(tr.active, 'forgotten a grace after every seed was done with the second change')
})
