/**
 * A member's overflow (forward-overflow.ts), unit by unit: which acquires go
 * to a seed and to which, and when a member stops sending them (answers
 * that come too late may have spent tokens for clients already told no).
 * The core is a stand-in with just what the overflow reads: a member `m`,
 * seeds `s1` and `s2`, one rule decided locally.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import { Overflow, overflowTo } from '../src/cluster/forward-overflow.js'
import { compileRule } from '../src/core/rules.js'
import type { RuleConfig } from '../src/config/types.js'

const RULE: RuleConfig = { name: 'api', match: 'api', limit: 100, perMs: 1000, per: '1s', algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', burst: 100, maxDebt: 10 }

interface Stub { core: ClusterCore, held: Map<string, number>, mine: { held: number, reserve: number }, demand: number[] }

/** Member `m` holding `mine` of key `api` (of which `reserve` it may not spend); seeds s1 and s2 alive, saying they hold `held`; `node` 's1' makes it a seed. */
function stub (rule = compileRule(RULE), node = 'm', overflow = true): Stub {
  const held = new Map([['s1', 10], ['s2', 10]])
  const mine = { held: 0, reserve: 0 }
  const demand: number[] = []
  const peer = (name: string): unknown => ({ name, lastHeard: 0, leaving: false, fenced: false, sameCluster: true, rules: { [rule.name]: rule.hash } })
  const core = {
    node,
    seeds: ['s1', 's2'],
    tuning: { overflow, aliveTimeoutMs: 1000, forwardTimeoutMs: 500 },
    // The key state reads `mine` at each call: what the member holds now.
    limiter: { keyState: () => ({ key: 'api', rule, get reserve () { return mine.reserve }, bucket: { get held () { return mine.held }, advance () {} } }) },
    peers: { get: (s: string) => held.has(s) ? peer(s) : undefined, isAlive: () => true },
    view: { peerHeld: (p: { name: string }) => held.get(p.name) ?? 0 },
    noteDemand: (_k: string, n: number) => { demand.push(n) }
  }
  return { core: core as unknown as ClusterCore, held, mine, demand }
}

const never = (): boolean => false

test('an acquire goes to a seed only when the member holds too few, and only to a seed that says it holds enough', t => {
  const rule = compileRule(RULE)
  const s = stub(rule)
  s.mine.held = 3
  t.is(overflowTo(s.core, 'api', 3, rule, 0, 0, never), null, 'held here: decided here')
  s.mine.reserve = 3
  t.not(overflowTo(s.core, 'api', 3, rule, 0, 0, never), null, 'held but reserved (a fenced member reserves all of a hard key): to a seed')
  s.mine.reserve = 0
  const to = overflowTo(s.core, 'api', 4, rule, 0, 0, never)
  t.true(to === 's1' || to === 's2')
  s.held.set('s1', 3)
  t.is(overflowTo(s.core, 'api', 4, rule, 0, 0, never), 's2', 'only s2 holds 4')
  t.is(overflowTo(s.core, 'api', 4, rule, 0, 0, seed => seed === 's2'), null, 'and s2 is routed around')
  s.held.set('s2', 0)
  t.is(overflowTo(s.core, 'api', 4, rule, 0, 0, never), null, 'no seed holds enough: decided (denied) here')
  // Successive turns spread acquires over the seeds that hold enough.
  s.held.set('s1', 10)
  s.held.set('s2', 10)
  const picked = new Set<string | null>()
  for (let turn = 0; turn < 16; turn++) picked.add(overflowTo(s.core, 'api', 4, rule, turn, 0, never))
  t.deepEqual([...picked].sort(), ['s1', 's2'])
})

test('never for a rule decided at the seeds (that has its own routing), at a seed, or with overflow off', t => {
  const seeds = compileRule({ ...RULE, decide: 'seeds' })
  t.is(overflowTo(stub(seeds).core, 'api', 1, seeds, 0, 0, never), null)
  const rule = compileRule(RULE)
  t.is(overflowTo(stub(rule, 's1').core, 'api', 1, rule, 0, 0, never), null, 'a seed decides its own')
  t.is(overflowTo(stub(rule, 'm', false).core, 'api', 1, rule, 0, 0, never), null, 'tuning.overflow false')
})

test('without an answer in time lately, one forward at a time; after one goes unanswered, none for a while, doubling', t => {
  const rule = compileRule(RULE)
  const s = stub(rule)
  const o = new Overflow(s.core)
  // Never answered: a probe, then nothing until its answer or the forward timeout (500 ms).
  t.not(o.to('api', 1, rule, 0, 0, never), null)
  t.is(s.demand.length, 1, 'counted as the member\'s demand')
  t.is(o.to('api', 1, rule, 1, 100, never), null, 'a probe is out')
  t.is(s.demand.length, 1, 'a request decided here is counted there, not here')
  t.not(o.to('api', 1, rule, 2, 500, never), null, 'the probe\'s time is up: another')
  // It timed out: nothing for aliveTimeoutMs (1 s), then a probe; timed out again: 2 s; then 4 s.
  o.unanswered(1000)
  t.is(o.to('api', 1, rule, 3, 1999, never), null)
  t.not(o.to('api', 1, rule, 4, 2000, never), null)
  o.unanswered(2500)
  t.is(o.to('api', 1, rule, 5, 4499, never), null)
  t.not(o.to('api', 1, rule, 6, 4500, never), null)
  o.unanswered(5000)
  t.is(o.to('api', 1, rule, 7, 8999, never), null)
  // Answered in time: free, many at once, until FRESH_ALIVES (4) × aliveTimeoutMs without another.
  o.answered(9000)
  for (let i = 0; i < 5; i++) t.not(o.to('api', 1, rule, 8 + i, 9001, never), null, `free ${i}`)
  t.not(o.to('api', 1, rule, 20, 13_000, never), null)
  t.not(o.to('api', 1, rule, 21, 13_001, never), null, 'a probe again')
  t.is(o.to('api', 1, rule, 22, 13_002, never), null, 'one at a time')
})

test('a want answered within half the forward timeout vouches for the network; a slower one does not', t => {
  const rule = compileRule(RULE)
  const s = stub(rule)
  const o = new Overflow(s.core)
  o.roundTrip(251, 0)
  t.not(o.to('api', 1, rule, 0, 10, never), null, 'a probe')
  t.is(o.to('api', 1, rule, 1, 11, never), null, 'not vouched: one at a time')
  o.roundTrip(250, 20)
  t.not(o.to('api', 1, rule, 2, 21, never), null)
  t.not(o.to('api', 1, rule, 3, 22, never), null, 'vouched: free')
  o.roundTrip(Number.NaN, 30)
  o.unanswered(40)
  t.is(o.to('api', 1, rule, 4, 1039, never), null, 'a timeout undoes it')
})
