import test from 'ava'
import { createBucket } from '../src/core/algorithms/index.js'
import type { Algorithm } from '../src/config/types.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000) // a minute boundary

function bucket (algorithm: Algorithm, limit: number, perMs: number, burst = limit, at = T0) {
  return createBucket(algorithm, { limit, perMs, burst, share: algorithm === 'token-bucket' ? burst : limit }, at)
}

function spendAll (b: ReturnType<typeof bucket>, n: number, at: number): number {
  let ok = 0
  for (let i = 0; i < n; i++) if (b.trySpend(1, at)) ok++
  return ok
}

test('fixed window: admits the limit, denies the rest, refills at the calendar boundary', t => {
  const b = bucket('fixed-window', 5, 1000)
  t.is(spendAll(b, 8, T0 + 10), 5)
  t.is(b.waitFor(1, T0 + 10), 990)
  t.is(b.resetIn(T0 + 10), 990)
  t.is(spendAll(b, 1, T0 + 999), 0)
  t.is(spendAll(b, 8, T0 + 1000), 5)
})

test('fixed window admits up to 2x the limit across a window boundary', t => {
  const b = bucket('fixed-window', 5, 1000)
  const before = spendAll(b, 5, T0 + 999)
  const after = spendAll(b, 5, T0 + 1000)
  t.is(before + after, 10) // 10 admissions within 2 ms: the known fixed-window edge
})

test('sliding log never admits more than the limit in any window, even across a boundary', t => {
  const b = bucket('sliding-log', 5, 1000)
  t.is(spendAll(b, 5, T0 + 999), 5)
  t.is(spendAll(b, 5, T0 + 1000), 0)
  t.is(b.waitFor(1, T0 + 1000), 999)
  t.is(spendAll(b, 5, T0 + 1998), 0)
  t.is(spendAll(b, 5, T0 + 1999), 5)
})

test('sliding log: random traffic never exceeds the limit in any sliding interval', t => {
  const limit = 7
  const per = 100
  const b = bucket('sliding-log', limit, per)
  const admitted: number[] = []
  let now = T0
  let seed = 42
  const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff }
  for (let i = 0; i < 5000; i++) {
    now += Math.floor(rnd() * 20)
    const count = 1 + Math.floor(rnd() * 2)
    if (b.trySpend(count, now)) for (let c = 0; c < count; c++) admitted.push(now)
  }
  let lo = 0
  for (let hi = 0; hi < admitted.length; hi++) {
    while (admitted[hi] - admitted[lo] >= per) lo++
    t.true(hi - lo + 1 <= limit, `window ending ${admitted[hi]} admitted ${hi - lo + 1}`)
  }
  t.true(admitted.length > 1000)
})

test('sliding window: 4/min, 4 in the previous window, 2 requests at 25% into the current one: the second is denied', t => {
  const b = bucket('sliding-window', 4, 60_000)
  t.is(spendAll(b, 4, T0 + 30_000), 4) // previous window: 4 spent
  const at = T0 + 60_000 + 15_000 // 25% into the current window
  // estimate = 4 * 0.75 + 0 + 1 = 4 <= 4: allowed
  t.true(b.trySpend(1, at))
  // estimate = 4 * 0.75 + 1 + 1 = 5 > 4: denied
  t.false(b.trySpend(1, at))
  // the previous window's tokens keep returning linearly: one more each 15 s
  t.is(Math.round(b.waitFor(1, at)), 15_000)
  t.true(b.trySpend(1, at + 15_000))
})

test('sliding window conserves tokens: held + outstanding == share at all times', t => {
  const b = bucket('sliding-window', 10, 1000)
  let now = T0
  for (let i = 0; i < 500; i++) {
    now += 37
    b.trySpend(1 + (i % 3), now)
    t.true(Math.abs(b.held + b.outstanding(now) - 10) < 1e-9)
    t.true(b.held > -1e-9)
  }
})

test('token bucket: burst at once, then refill at the rate, capped at the burst', t => {
  const b = bucket('token-bucket', 10, 1000, 5) // 10/s, burst 5
  t.is(spendAll(b, 10, T0), 5)
  t.is(Math.round(b.waitFor(1, T0)), 100)
  t.is(spendAll(b, 10, T0 + 100), 1)
  t.is(spendAll(b, 10, T0 + 10_000), 5) // capped at the burst after a long idle
  t.is(Math.round(b.resetIn(T0 + 10_000)), 500)
})

test('token bucket stays within the envelope burst + rate * t', t => {
  const b = bucket('token-bucket', 20, 1000, 10)
  let admitted = 0
  for (let ms = 0; ms <= 5000; ms += 7) if (b.trySpend(1, T0 + ms)) admitted++
  t.true(admitted <= 10 + 20 * 5)
  t.true(admitted >= 10 + 20 * 5 - 2)
})

test('every algorithm: a count larger than the whole share can never be waited for', t => {
  for (const a of ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket'] as const) {
    const b = bucket(a, 5, 1000)
    t.is(b.waitFor(6, T0), Infinity, a)
    t.is(b.waitFor(5, T0), 0, a)
  }
})

test('every algorithm: credit and debit move held tokens and keep the books', t => {
  for (const a of ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket'] as const) {
    const b = bucket(a, 5, 1000)
    t.true(b.trySpend(2, T0))
    t.is(b.debit(10), 3, `${a}: debit stops at what is held`)
    t.false(b.trySpend(1, T0))
    b.credit(4)
    t.true(b.trySpend(4, T0), a)
    t.is(b.held, 0)
  }
})
