/**
 * Guards the memory layout of a key's state (key-state.ts, bench/memory.ts)
 * without measuring the heap: a key is one object whose own fields are
 * counted here, keys of a rule share one head while their rarely used
 * fields are at their defaults (a head of its own exists only while one is set), and the
 * sliding log keeps its entries in its rule's slab (log-slab.ts): one spend
 * in a block of 4 words, a token spent at its own time in 3 bytes (a period
 * of a minute: times packed in 24 bits).
 * Adding a field to a
 * bucket or to KeyState fails this test on purpose: each costs 8 MB per
 * million keys; rerun bench/memory and update bench/README.md with it.
 */
import test from 'ava'
import { Limiter, type Waiter } from '../src/core/limiter.js'
import { ALGORITHMS, type Algorithm } from '../src/config/types.js'
import type { Decision } from '../src/core/types.js'
import { limits, rule } from './helpers/rules.js'
import { logOf, readBlock } from './helpers/log-block.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

/** Own fields per key: the key, its head (rule, spec, initial and the rare part), and the algorithm's (the sliding log's: one, its block or its held tokens). */
const FIELDS: Record<Algorithm, number> = {
  'fixed-window': 2 + 3,
  'sliding-log': 2 + 1,
  'sliding-window': 2 + 5,
  'token-bucket': 2 + 3
}

function limiter (algorithm: Algorithm): Limiter {
  return new Limiter({ node: 'a', limits: limits(), rules: [rule({ name: 'r', match: 'k:*', limit: 10, perMs: 60_000, algorithm })] })
}

function isWaiter (r: Decision | Waiter): r is Waiter {
  return !('allowed' in r)
}

/** The key's head if it is its own (a rare field is set); null while it shares its rule's head. */
function rareOf (ks: object): unknown {
  const h = (ks as { h: { shared: boolean } }).h
  return h.shared ? null : h
}

function headOf (ks: object): unknown {
  return (ks as { h: unknown }).h
}

for (const algorithm of ALGORITHMS) {
  test(`${algorithm}: a key is one object of ${FIELDS[algorithm]} fields; the rare part comes and goes with waiters`, t => {
    const l = limiter(algorithm)
    t.true(l.acquire('k:1', 1, T0).allowed)
    const ks = l.existing('k:1')
    if (ks === undefined) return t.fail('the key has no state')
    t.is(ks.bucket as unknown, ks, 'the key state is its own bucket')
    t.is(Object.keys(ks).length, FIELDS[algorithm])
    t.is(rareOf(ks), null, 'no rare part for a key nobody waits on')

    t.true(l.acquire('k:1', 9, T0).allowed)
    const w = l.acquireOrWait('k:1', 1, 120_000, T0, 'ref')
    if (!isWaiter(w)) return t.fail('expected to wait')
    t.is(ks.queued, 1)
    t.not(rareOf(ks), null)
    l.cancel(w)
    t.is(ks.queued, 0)
    t.is(ks.waiters, null)
    t.is(rareOf(ks), null, 'the rare part is dropped once nobody waits')
    t.is(Object.keys(ks).length, FIELDS[algorithm], 'no field was added on the way')
  })
}

/** The sliding log's private block (sliding-log.ts, log-slab.ts), decoded: null, or its mode, capacity, length and [time, count] entries. */
function slidingLog (ks: object): null | { mode: string, cap: number, words: number, entries: number[][] } {
  const { block, slab } = logOf(ks)
  if (block === null) return null
  const { mode, cap, words, entries } = readBlock(slab, block)
  return { mode, cap, words, entries }
}

test('sliding-log: one spend is a block of 4 words, tokens spent one at a time are 3 bytes each, and the log empties', t => {
  const l = limiter('sliding-log')
  l.acquire('k:1', 1, T0)
  const ks = l.existing('k:1')
  if (ks === undefined) return t.fail('the key has no state')
  t.deepEqual(slidingLog(ks), { mode: 'units', cap: 1, words: 4, entries: [[T0, 1]] }, 'one entry: 16 bytes')
  l.acquire('k:1', 2, T0)
  t.like(slidingLog(ks), { mode: 'pairs', entries: [[T0, 3]] }, 'a spend at the same time merges into it')
  t.is(ks.bucket.outstanding(T0), 3)

  l.acquire('k:1', 1, T0 + 5)
  t.deepEqual(slidingLog(ks), { mode: 'pairs', cap: 2, words: 4 + 8, entries: [[T0, 3], [T0 + 5, 1]] }, 'a count other than 1: pairs')
  l.peek('k:1', 1, T0 + 60_000)
  t.like(slidingLog(ks), { entries: [[T0 + 5, 1]] })
  l.peek('k:1', 1, T0 + 60_005)
  t.is(slidingLog(ks), null)

  const times = Array.from({ length: 10 }, (_, i) => T0 + 60_010 + i * 0.25)
  for (const at of times) t.true(l.acquire('k:1', 1, at).allowed)
  t.deepEqual(slidingLog(ks), { mode: 'units', cap: 10, words: 10, entries: times.map(at => [at, 1]) }, 'the whole limit, one token at a time: 3 bytes per token, 40 bytes in all')
})

test('sliding-log: the ring wraps around, and pairs whose counts are all 1 again turn back to units when the ring grows', t => {
  const l = limiter('sliding-log')
  for (let i = 0; i < 10; i++) l.acquire('k:1', 1, T0 + i)
  // Each later spend is let in by the return of the oldest one: the full ring wraps around.
  const at = (j: number): number => T0 + 60_000 * (1 + Math.floor(j / 10)) + (j % 10) + 0.5
  for (let j = 0; j < 15; j++) t.true(l.acquire('k:1', 1, at(j)).allowed, `spend ${j}`)
  const ks = l.existing('k:1')
  if (ks === undefined) return t.fail('the key has no state')
  t.deepEqual(slidingLog(ks), { mode: 'units', cap: 10, words: 10, entries: Array.from({ length: 10 }, (_, i) => [at(i + 5), 1]) })
  t.is(ks.bucket.waitFor(1, at(14)), at(5) + 60_000 - at(14))
  t.is(ks.bucket.waitFor(10, at(14)), at(14) + 60_000 - at(14))

  const m = limiter('sliding-log')
  m.acquire('k:1', 2, T0)
  for (let i = 1; i <= 3; i++) m.acquire('k:1', 1, T0 + 10 * i)
  const ms = m.existing('k:1')
  if (ms === undefined) return t.fail('the key has no state')
  t.like(slidingLog(ms), { mode: 'pairs', entries: [[T0, 2], [T0 + 10, 1], [T0 + 20, 1], [T0 + 30, 1]] })
  m.peek('k:1', 1, T0 + 60_000) // the spend of 2 returns; every count left is 1
  m.acquire('k:1', 1, T0 + 60_001)
  t.like(slidingLog(ms), { mode: 'pairs' }, 'pairs while there is room')
  m.acquire('k:1', 1, T0 + 60_002)
  t.like(slidingLog(ms), { mode: 'units', entries: [[T0 + 10, 1], [T0 + 20, 1], [T0 + 30, 1], [T0 + 60_001, 1], [T0 + 60_002, 1]] }, 'units once it grows')
})

test('a reload that changes the rule gives the key a bucket of its own, and the state stays one key', t => {
  const l = limiter('fixed-window')
  l.acquire('k:1', 4, T0)
  const ks = l.existing('k:1')
  l.setRules([rule({ name: 'r', match: 'k:*', limit: 20, perMs: 60_000, algorithm: 'sliding-window' })], T0 + 1)
  if (ks === undefined) return t.fail('the key has no state')
  t.is(l.existing('k:1'), ks)
  t.not(ks.bucket as unknown, ks)
  t.is(ks.bucket.share, 20)
  t.is(ks.bucket.outstanding(T0 + 1), 4, 'the spends carried over')
})

test('keys of one rule share one head until one of them needs its own, and get it back after', t => {
  const l = limiter('token-bucket')
  l.acquire('k:1', 1, T0)
  l.acquire('k:2', 1, T0)
  const a = l.existing('k:1')
  const b = l.existing('k:2')
  if (a === undefined || b === undefined) return t.fail('no state')
  const shared = headOf(a)
  t.is(headOf(b), shared)
  a.reserve = 2
  t.not(headOf(a), shared, 'a rare field set: a head of its own')
  t.is(headOf(b), shared, 'the other key still shares')
  t.is(b.reserve, 0)
  a.reserve = 0
  t.is(headOf(a), shared, 'back to the shared head')
  a.initial = 3
  t.not(headOf(a), shared, 'another initial share: another shared head')
  t.is(a.initial, 3)
  t.is(b.initial, 10)
  t.is(rareOf(a), null)
})
