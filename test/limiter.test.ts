import test from 'ava'
import { Limiter, type Waiter } from '../src/core/limiter.js'
import { hash32, initialShare, homeNode } from '../src/core/share.js'
import { ManualClock } from '../src/clock.js'
import type { Decision } from '../src/core/types.js'
import type { QuotadError } from '../src/errors.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

function limiter (overrides: Parameters<typeof limits>[0] = {}) {
  return new Limiter({
    node: 'a',
    limits: limits(overrides),
    rules: [
      rule({ name: 'payments', limit: 5, perMs: 1000 }),
      rule({ name: 'signup', match: 'signup:*', limit: 2, perMs: 60_000, algorithm: 'sliding-log' }),
      rule({ name: 'tb', match: 'tb', limit: 10, perMs: 1000, burst: 2, algorithm: 'token-bucket' })
    ]
  })
}

function isWaiter (r: Decision | Waiter): r is Waiter {
  return !('allowed' in r)
}

test('acquire answers allowed, remaining, limit, resetMs, retryAfterMs and rule', t => {
  const l = limiter()
  const d = l.acquire('payments', 1, T0 + 200)
  t.deepEqual(d, { allowed: true, remaining: 4, limit: 5, resetMs: 800, retryAfterMs: 0, rule: 'payments' })
  l.acquire('payments', 4, T0 + 200)
  const denied = l.acquire('payments', 1, T0 + 300)
  t.deepEqual(denied, { allowed: false, remaining: 0, limit: 5, resetMs: 700, retryAfterMs: 700, rule: 'payments' })
})

test('peek shows the state without spending', t => {
  const l = limiter()
  l.acquire('payments', 2, T0)
  const p = l.peek('payments', 3, T0)
  t.true(p.allowed)
  t.is(p.remaining, 3)
  t.is(l.peek('payments', 4, T0).allowed, false)
  t.is(l.acquire('payments', 3, T0).allowed, true)
})

test('a glob rule gives each distinct key its own bucket', t => {
  const l = limiter()
  t.true(l.acquire('signup:1.2.3.4', 2, T0).allowed)
  t.false(l.acquire('signup:1.2.3.4', 1, T0).allowed)
  t.true(l.acquire('signup:5.6.7.8', 1, T0).allowed)
  t.is(l.keyCount, 2)
})

test('bad keys and counts get stable codes', t => {
  const l = limiter({ maxKeyBytes: 16 })
  t.is(t.throws<QuotadError>(() => l.acquire('nope', 1, T0))?.code, 'E_NO_RULE')
  t.is(t.throws<QuotadError>(() => l.acquire('signup:' + 'x'.repeat(20), 1, T0))?.code, 'E_KEY_TOO_LONG')
  t.is(t.throws<QuotadError>(() => l.acquire('signup:ééééé', 1, T0))?.code, 'E_KEY_TOO_LONG') // 17 UTF-8 bytes
  t.is(t.throws<QuotadError>(() => l.acquire('', 1, T0))?.code, 'E_BAD_ARGUMENT')
  t.is(t.throws<QuotadError>(() => l.acquire('payments', 6, T0))?.code, 'E_COUNT_TOO_LARGE')
  t.is(l.keyCount, 1) // only payments was created; refused keys leave nothing behind
})

test('the key table is bounded: a new key past the bound is refused and no state is reset', t => {
  const l = limiter({ maxKeys: 3 })
  t.true(l.acquire('signup:1', 2, T0).allowed)
  t.true(l.acquire('signup:2', 1, T0).allowed)
  t.true(l.acquire('signup:3', 1, T0).allowed)
  t.is(t.throws<QuotadError>(() => l.acquire('signup:4', 1, T0 + 1000))?.code, 'E_KEY_TABLE_FULL')
  // the exhausted key is still exhausted: nothing was silently reset
  t.false(l.acquire('signup:1', 1, T0 + 1000).allowed)
  // once a key's tokens have all come back it is idle and may be dropped
  t.true(l.acquire('signup:4', 1, T0 + 60_000).allowed)
  t.is(l.keyCount, 1, 'the sweep dropped the three idle keys and only signup:4 is held')
})

test('one glob rule cannot fill the table for another, and never blocks an exact key', t => {
  const l = new Limiter({
    node: 'a',
    limits: limits({ maxKeys: 4 }),
    rules: [
      rule({ name: 'payments', limit: 5, perMs: 1000 }),
      rule({ name: 'signup', match: 'signup:*', limit: 2, perMs: 60_000 }),
      rule({ name: 'mail', match: 'mail:*', limit: 2, perMs: 60_000 })
    ]
  })
  // Each glob rule's share is 4 / 2 = 2 keys.
  t.true(l.acquire('signup:1', 1, T0).allowed)
  t.true(l.acquire('signup:2', 1, T0).allowed)
  const e = t.throws<QuotadError>(() => l.acquire('signup:3', 1, T0))
  t.is(e?.code, 'E_KEY_TABLE_FULL')
  t.regex(e?.message ?? '', /rule "signup" has 2 keys/)
  // The other glob rule still has its share, and the exact key is never refused.
  t.true(l.acquire('mail:1', 1, T0).allowed)
  t.true(l.acquire('mail:2', 1, T0).allowed)
  t.true(l.acquire('payments', 1, T0).allowed)
  // An explicit per-rule maxKeys wins over the even split.
  const big = new Limiter({
    node: 'a',
    limits: limits({ maxKeys: 4 }),
    rules: [rule({ name: 'signup', match: 'signup:*', limit: 2, perMs: 60_000, maxKeys: 1 }), rule({ name: 'mail', match: 'mail:*', limit: 2, perMs: 60_000 })]
  })
  t.true(big.acquire('signup:1', 1, T0).allowed)
  t.is(t.throws<QuotadError>(() => big.acquire('signup:2', 1, T0))?.code, 'E_KEY_TABLE_FULL')
})

test('idle keys are evicted only when all their tokens have come back', t => {
  const l = limiter()
  l.acquire('signup:a', 1, T0)
  l.peek('signup:b', 1, T0) // created, never spent: idle at once
  t.is(l.sweep(T0 + 1, 100), 1)
  t.is(l.keyCount, 1)
  t.is(l.sweep(T0 + 59_999, 100), 0)
  t.is(l.sweep(T0 + 60_000, 100), 1)
  t.is(l.keyCount, 0)
})

test('waiting acquires are served FIFO as tokens return', t => {
  const clock = new ManualClock(T0)
  const l = limiter()
  t.true(l.acquire('tb', 2, clock.now()).allowed) // empty; refills 1 per 100 ms
  const w1 = l.acquireOrWait('tb', 1, 500, clock.now(), 'w1')
  const w2 = l.acquireOrWait('tb', 1, 500, clock.now(), 'w2')
  t.true(isWaiter(w1) && isWaiter(w2))
  // a request that does not wait may not jump the queue
  clock.advance(150)
  t.false(l.acquire('tb', 1, clock.now()).allowed)
  t.is(l.nextWakeAt(), T0 + 100)
  const first = l.poll(clock.now())
  t.deepEqual(first.map(r => r.ref), ['w1'])
  t.true(first[0].decision.allowed)
  clock.advance(50)
  const second = l.poll(clock.now())
  t.deepEqual(second.map(r => r.ref), ['w2'])
  t.is(l.waiterCount, 0)
})

test('a waiter whose wait runs out is denied; a hopeless wait is denied at once', t => {
  const l = limiter()
  l.acquire('payments', 5, T0 + 100)
  // tokens return at T0+1000: 900 ms away, more than the wait
  const now = l.acquireOrWait('payments', 1, 500, T0 + 100, 'x')
  t.false(isWaiter(now))
  t.false((now as Decision).allowed)
  t.is((now as Decision).retryAfterMs, 900)
  const w = l.acquireOrWait('payments', 1, 950, T0 + 100, 'y')
  t.true(isWaiter(w))
  const res = l.poll(T0 + 1000)
  t.is(res.length, 1)
  t.true(res[0].decision.allowed)
  // deadline path: a waiter that cannot be served before its deadline
  l.acquire('tb', 2, T0 + 2000)
  const w2 = l.acquireOrWait('tb', 2, 250, T0 + 2000, 'z')
  t.true(isWaiter(w2))
  l.acquire('payments', 1, T0 + 2000)
  t.deepEqual(l.poll(T0 + 2100), [])
  l.cancel(w2 as Waiter) // its client went away: spends nothing
  t.is(l.waiterCount, 0)
  t.true(l.acquire('tb', 2, T0 + 2200).allowed)
})

test('a waiter past its deadline is answered denied by poll', t => {
  const l = limiter()
  l.acquire('tb', 2, T0)
  const a = l.acquireOrWait('tb', 2, 200, T0, 'a') // 2 tokens need 200 ms: just fits
  t.true(isWaiter(a))
  const c = l.acquireOrWait('tb', 2, 400, T0, 'c') // the queue needs more than the share: the deadline decides
  t.true(isWaiter(c))
  // the clock jumps past c's deadline before a is served: a is granted, c is denied
  const out = l.poll(T0 + 450)
  t.deepEqual(out.map(r => [r.ref, r.decision.allowed]), [['a', true], ['c', false]])
})

test('wait queues are bounded per key and per node', t => {
  const l = limiter({ maxWaitersPerKey: 2, maxWaiters: 3 })
  l.acquire('tb', 2, T0)
  t.true(isWaiter(l.acquireOrWait('tb', 1, 10_000, T0, 1)))
  t.true(isWaiter(l.acquireOrWait('tb', 1, 10_000, T0, 2)))
  t.is(t.throws<QuotadError>(() => l.acquireOrWait('tb', 1, 10_000, T0, 3))?.code, 'E_QUEUE_FULL')
  l.acquire('payments', 5, T0)
  t.true(isWaiter(l.acquireOrWait('payments', 1, 10_000, T0, 4)))
  t.is(t.throws<QuotadError>(() => l.acquireOrWait('payments', 1, 10_000, T0, 5))?.code, 'E_QUEUE_FULL')
})

test('time going backwards never returns tokens early', t => {
  const l = limiter()
  l.acquire('payments', 5, T0 + 900)
  t.false(l.acquire('payments', 1, T0 + 100).allowed)
  t.false(l.acquire('payments', 1, T0 + 999).allowed)
})

test('a reload keeps unchanged rules\' state and carries outstanding spends into changed rules', t => {
  const l = limiter()
  l.acquire('payments', 4, T0)
  l.acquire('signup:x', 2, T0)
  l.setRules([
    rule({ name: 'payments', limit: 3, perMs: 1000 }), // tightened
    rule({ name: 'signup', match: 'signup:*', limit: 2, perMs: 60_000, algorithm: 'sliding-log' }) // unchanged
  ], T0 + 10)
  t.false(l.acquire('payments', 1, T0 + 10).allowed, 'the 4 already spent count against the new limit of 3')
  t.false(l.acquire('signup:x', 1, T0 + 10).allowed)
  t.true(l.acquire('payments', 3, T0 + 1000).allowed)
  t.is(t.throws<QuotadError>(() => l.acquire('tb', 1, T0 + 1000))?.code, 'E_NO_RULE')
})

test('shares: an exact key\'s stock is split over the seeds with nothing created', t => {
  const seeds = ['a', 'b', 'c']
  for (const stock of [1, 2, 3, 100, 101]) {
    const total = seeds.reduce((n, s) => n + initialShare(stock, false, 'k', s, seeds), 0)
    t.is(total, stock)
  }
  t.is(initialShare(100, false, 'k', 'z', seeds), 0, 'a non-seed starts with nothing')
})

test('shares: a glob key starts whole at one home node, spread across nodes', t => {
  const seeds = ['a', 'b', 'c']
  const homes = new Map<string, number>()
  for (let i = 0; i < 3000; i++) {
    const key = `signup:10.0.${i >> 8}.${i & 255}`
    const home = homeNode(key, seeds) as string
    homes.set(home, (homes.get(home) ?? 0) + 1)
    t.is(seeds.reduce((n, s) => n + initialShare(20, true, key, s, seeds), 0), 20)
  }
  for (const s of seeds) t.true((homes.get(s) ?? 0) > 800, `${s} is home to about a third`)
})

test('shares: homes are remembered per seed list, and always what rendezvous hashing gives', t => {
  // The rendezvous choice, written out: the highest hash32(seed + NUL + key), ties by name.
  const fresh = (key: string, seeds: readonly string[]): string =>
    [...seeds].sort().reduce((best, s) => hash32(s + '\u0000' + key) > hash32(best + '\u0000' + key) ? s : best)
  const three = ['a', 'b', 'c']
  const four = ['a', 'b', 'c', 'd']
  // Past the cache's bound (8192 keys), so it is cleared and filled again on the way.
  for (let i = 0; i < 20_000; i++) {
    const key = `k:${i % 10_000}`
    t.is(homeNode(key, three), fresh(key, three))
    t.is(homeNode(key, four), fresh(key, four), 'another list is another cache')
  }
  t.is(initialShare(9, false, 'k', 'b', three), 3)
  t.is(initialShare(10, false, 'k', 'a', three), 4, 'the first seed of the sorted list gets the extra token')
  t.is(initialShare(10, false, 'k', 'd', three), 0, 'not a seed of this list')
  t.is(initialShare(10, false, 'k', 'd', four), 2)
  // A lone node's list answers without the cache, as the scan would.
  const one = ['a']
  for (let i = 0; i < 100; i++) t.is(homeNode(`k:${i}`, one), fresh(`k:${i}`, one))
  t.is(initialShare(10, true, 'k', 'a', one), 10, 'a lone node is every glob key\'s home')
  t.is(homeNode('k', []), undefined, 'no seeds: no home')
})

test('a node of a 3-seed cluster enforces only its own share', t => {
  const l = new Limiter({ node: 'b', seeds: ['a', 'b', 'c'], limits: limits(), rules: [rule({ name: 'p', limit: 10, perMs: 1000 })] })
  let ok = 0
  for (let i = 0; i < 10; i++) if (l.acquire('p', 1, T0).allowed) ok++
  t.is(ok, 3) // a gets 4, b and c get 3
})

test('a waiter on tokens that sit in the reserve is not woken for them: poll returns, the deadline denies, a lowered reserve serves', t => {
  // Found by the simulator: the bucket alone said "now" for tokens the reserve keeps, so poll rescheduled the key at
  // `now` and looped for ever (a hung daemon, for any waitMs request while a burn owed elsewhere was unpaid).
  const l = limiter()
  const first = l.acquire('payments', 1, T0 + 100)
  t.true(first.allowed)
  const ks = l.existing('payments')
  if (ks === undefined) return t.fail('no state')
  ks.reserve = 4 // everything still held (4) is kept for burns owed elsewhere
  const d = l.acquire('payments', 1, T0 + 110)
  t.false(d.allowed)
  t.true(d.retryAfterMs !== 0, `not "retry now" while the reserve keeps the tokens (${d.retryAfterMs})`)
  const w = l.acquireOrWait('payments', 1, 500, T0 + 120, 'w1')
  if (!isWaiter(w)) return t.fail('expected to wait')
  t.deepEqual(l.poll(T0 + 120), [], 'nothing to serve now, and poll returns')
  t.true(l.nextWakeAt() > T0 + 120, 'the key is not due again at once')
  ks.reserve = 0
  l.touched(ks, T0 + 200)
  const served = l.poll(T0 + 200)
  t.is(served.length, 1)
  t.true(served[0].decision.allowed, 'served once the reserve lets the tokens go')
  ks.reserve = 3 // all three still held are kept again
  const w3 = l.acquireOrWait('payments', 1, 300, T0 + 220, 'w3')
  if (!isWaiter(w3)) return t.fail('expected to wait')
  const late = l.poll(T0 + 600)
  t.deepEqual(late.map(r => [r.ref, r.decision.allowed]), [['w3', false]], 'denied at its deadline, not before and not by looping')
})
