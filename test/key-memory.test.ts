/**
 * Guards the memory layout of a key's state (key-state.ts, bench/memory.ts)
 * without measuring the heap: a key is one object whose own fields are
 * counted here, keys of a rule share one head while their rarely used
 * fields are at their defaults (a head of its own exists only while one is set), and the
 * sliding log's array is only as long as its entries. Adding a field to a
 * bucket or to KeyState fails this test on purpose: each costs 8 MB per
 * million keys; rerun bench/memory and update bench/README.md with it.
 */
import test from 'ava'
import { Limiter, type Waiter } from '../src/core/limiter.js'
import { ALGORITHMS, type Algorithm } from '../src/config/types.js'
import type { Decision } from '../src/core/types.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

/** Own fields per key: the key, its head (rule, spec, initial and the rare part), and the algorithm's. */
const FIELDS: Record<Algorithm, number> = {
  'fixed-window': 2 + 3,
  'sliding-log': 2 + 4,
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

test('sliding-log: the log array holds two numbers per distinct spend time, and is dropped when empty', t => {
  const l = limiter('sliding-log')
  l.acquire('k:1', 1, T0)
  l.acquire('k:1', 2, T0)
  const ks = l.existing('k:1')
  const log = (): unknown => (ks as unknown as { log: unknown }).log
  t.deepEqual(log(), [T0, 3])
  l.acquire('k:1', 1, T0 + 5)
  t.deepEqual(log(), [T0, 3, T0 + 5, 1])
  l.peek('k:1', 1, T0 + 60_005)
  t.is(log(), null)
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
