import test from 'ava'
import { checkKey } from '../src/sim/oracle.js'
import type { Admission, OracleRule } from '../src/sim/types.js'

const T0 = 1_800_000_000_000 // a multiple of 1000 and 60_000: a window boundary
const NO_SKEW = { maxSkewMs: 0 }

function rule (algorithm: OracleRule['algorithm'], limit: number, perMs: number, burst = limit): OracleRule {
  return { algorithm, limit, perMs, burst }
}

/** An admission at true time `at`; `skew` shifts the node's local clock. */
function adm (at: number, count = 1, node = 'a', skew = 0): Admission {
  return { at, local: at + skew, node, key: 'k', count }
}

/** `n` single-token admissions at the same instant. */
function burst (at: number, n: number, node = 'a', skew = 0): Admission[] {
  return Array.from({ length: n }, () => adm(at, 1, node, skew))
}

// fixed window

test('fixed window: the limit in one window passes, one more fails', t => {
  const r = rule('fixed-window', 100, 1000)
  const ok = checkKey(r, [...burst(T0, 60), ...burst(T0 + 999, 40), ...burst(T0 + 1000, 100)], NO_SKEW)
  t.deepEqual(ok, { admitted: 200, overshoot: 0, violations: [] })

  const bad = checkKey(r, [...burst(T0, 100), adm(T0 + 500, 3)], NO_SKEW)
  t.is(bad.admitted, 103)
  t.is(bad.overshoot, 3)
  t.is(bad.violations.length, 1)
  t.is(bad.violations[0].count, 3)
  t.is(bad.violations[0].at, T0 + 500)
  t.is(bad.violations[0].detail, `window ${T0}: 103 > limit 100`)
})

test('fixed window under skew is judged by each node\'s local windows', t => {
  const r = rule('fixed-window', 10, 1000)
  // Node b's clock runs 300 ms ahead: at true T0+800 its local time is T0+1100,
  // already the next window. Each node fills its own window: 20 tokens within
  // the same true window, all legal by local windows.
  const adms = [...burst(T0 + 100, 10, 'a'), ...burst(T0 + 800, 10, 'b', 300)]
  t.is(checkKey(r, adms, { maxSkewMs: 300 }).overshoot, 0)
  // Judged by true time those 20 would share one window; the same stream with
  // no skew fails, so the oracle really is using `local`.
  const unskewed = [...burst(T0 + 100, 10, 'a'), ...burst(T0 + 800, 10, 'b')]
  t.is(checkKey(r, unskewed, NO_SKEW).overshoot, 10)
  // And a node's local window still caps the other node's spends in it.
  const clash = [...burst(T0 + 1100, 10, 'a'), ...burst(T0 + 800, 1, 'b', 300)]
  const c = checkKey(r, clash, { maxSkewMs: 300 })
  t.is(c.overshoot, 1)
  t.is(c.violations[0].node, 'b')
  t.regex(c.violations[0].detail, /limit 10$/)
})

// sliding window

test('sliding window: the weighted bound passes exactly, one more fails', t => {
  const r = rule('sliding-window', 100, 1000)
  // Window k-1 spends 100; at f = 0.5 the previous window weighs 50, so 50 more fit.
  const base = burst(T0 - 1000, 100)
  const ok = checkKey(r, [...base, ...burst(T0 + 500, 50)], NO_SKEW)
  t.is(ok.overshoot, 0)
  t.is(ok.admitted, 150)

  const bad = checkKey(r, [...base, ...burst(T0 + 500, 50), adm(T0 + 500, 2)], NO_SKEW)
  t.is(bad.overshoot, 2)
  t.is(bad.violations.length, 1)
  t.regex(bad.violations[0].detail, /weighted 102 > limit 100 \+ slack 0$/)
})

test('sliding window: a window\'s own count never exceeds the limit', t => {
  const r = rule('sliding-window', 100, 1000)
  const ok = checkKey(r, burst(T0, 100), NO_SKEW)
  t.is(ok.overshoot, 0)
  // With an empty previous window, and even with a huge skew slack, 101 in one window fails.
  const bad = checkKey(r, [...burst(T0 - 1000, 100), ...burst(T0 + 999, 100), adm(T0 + 999)], { maxSkewMs: 1000 })
  t.is(bad.overshoot, 1)
  t.is(bad.violations[0].detail, `window ${T0}: 101 > limit 100`)
})

test('sliding window: slack is 0 without skew and prev * 2*skew/perMs with it', t => {
  const r = rule('sliding-window', 100, 1000)
  // prev = 100 at f = 0.5: weighted 50 + 51 = 101.
  const adms = [...burst(T0 - 1000, 100), ...burst(T0 + 500, 51)]
  const noSkew = checkKey(r, adms, NO_SKEW)
  t.is(noSkew.overshoot, 1)
  t.regex(noSkew.violations[0].detail, /slack 0$/)
  // maxSkewMs 5 gives slack 100 * 10/1000 = 1: now exactly at the bound.
  t.is(checkKey(r, adms, { maxSkewMs: 5 }).overshoot, 0)
  // One more exceeds even the slack.
  const over = checkKey(r, [...adms, adm(T0 + 500)], { maxSkewMs: 5 })
  t.is(over.overshoot, 1)
  t.regex(over.violations[0].detail, /weighted 102 > limit 100 \+ slack 1$/)
})

test('sliding window orders by local time: the previous window is complete first', t => {
  const r = rule('sliding-window', 10, 1000)
  // Node b (local clock 200 ms behind) spends in local window k-1 AFTER node a
  // has spent in window k by true time. Ordered by local, b's 10 land in k-1
  // first; then a at f = 0.1 sees prev 10 weighing 9, slack 10 * 400/1000 = 4,
  // so only 5 of a's 10 fit (9 + 5 <= 14). By true time all 20 would pass.
  const adms = [...burst(T0 + 100, 10, 'a'), ...burst(T0 + 150, 10, 'b', -200)]
  const c = checkKey(r, adms, { maxSkewMs: 200 })
  t.is(c.overshoot, 5)
  t.true(c.violations.every(v => v.node === 'a'))
})

// sliding log

test('sliding log: the limit per perMs passes, one more fails', t => {
  const r = rule('sliding-log', 10, 1000)
  const ok = checkKey(r, [...burst(T0, 5), ...burst(T0 + 999, 5), ...burst(T0 + 1000, 5)], NO_SKEW)
  t.is(ok.overshoot, 0)
  const bad = checkKey(r, [...burst(T0, 5), ...burst(T0 + 999, 5), adm(T0 + 999, 4)], NO_SKEW)
  t.is(bad.overshoot, 4)
  t.is(bad.violations[0].detail, `log (${T0 - 1}, ${T0 + 999}]: 14 > limit 10`)
})

test('sliding log boundary: a spend at t0 is free again at exactly t0 + perMs', t => {
  const r = rule('sliding-log', 10, 1000)
  t.is(checkKey(r, [...burst(T0, 10), ...burst(T0 + 1000, 10)], NO_SKEW).overshoot, 0)
  const early = checkKey(r, [...burst(T0, 10), adm(T0 + 999)], NO_SKEW)
  t.is(early.overshoot, 1)
  t.regex(early.violations[0].detail, /11 > limit 10/)
})

test('sliding log orders by true time, not local', t => {
  const r = rule('sliding-log', 10, 1000)
  // Skewed local clocks must not move spends in or out of the true window.
  const adms = [...burst(T0, 10, 'a', 900), ...burst(T0 + 1000, 10, 'b', -900)]
  t.is(checkKey(r, adms, { maxSkewMs: 900 }).overshoot, 0)
})

test('sliding log handles 100k+ admissions quickly', t => {
  const r = rule('sliding-log', 1000, 1000)
  const adms: Admission[] = []
  for (let i = 0; i < 200_000; i++) adms.push(adm(T0 + i))
  // CPU time of this process, not wall time: other processes keeping the machine busy do not
  // count. Typically about 100 ms of CPU; the bound, twenty times that, catches a check that
  // got much slower, never a busy machine.
  const started = process.cpuUsage()
  const c = checkKey(r, adms, NO_SKEW)
  const used = process.cpuUsage(started)
  const cpuMs = (used.user + used.system) / 1000
  t.is(c.overshoot, 0)
  t.is(c.admitted, 200_000)
  t.true(cpuMs < 2000, `${cpuMs} ms of CPU`)
})

// token bucket

test('token bucket: burst at once then rate-paced passes; faster fails', t => {
  const r = rule('token-bucket', 10, 1000, 5) // 0.01 token/ms, capacity 5
  const paced = [...burst(T0, 5)]
  for (let i = 1; i <= 20; i++) paced.push(adm(T0 + i * 100))
  const ok = checkKey(r, paced, NO_SKEW)
  t.deepEqual(ok, { admitted: 25, overshoot: 0, violations: [] })

  // One more token at the first instant exceeds the burst.
  const overBurst = checkKey(r, burst(T0, 6), NO_SKEW)
  t.is(overBurst.overshoot, 1)
  t.is(overBurst.violations[0].detail, 'bucket level 0 < 1 (burst 5, rate 0.01/ms)')

  // After the burst, pacing at 99 ms is faster than the rate: the shortfall
  // accumulates until one request finds less than a token.
  const fast = [...burst(T0, 5)]
  for (let i = 1; i <= 20; i++) fast.push(adm(T0 + i * 99))
  const f = checkKey(r, fast, NO_SKEW)
  t.true(f.overshoot >= 1)
  t.regex(f.violations[0].detail, /burst 5, rate 0\.01\/ms/)
})

test('token bucket is the envelope: any interval t admits at most burst + rate*t', t => {
  const r = rule('token-bucket', 10, 1000, 5)
  // Idle refill is capped at burst: after a long pause, burst + 1 at once fails.
  const c = checkKey(r, [adm(T0), ...burst(T0 + 60_000, 6)], NO_SKEW)
  t.is(c.overshoot, 1)
  // Exactly burst + rate*t over t = 300 ms (5 + 3 = 8 tokens) passes.
  t.is(checkKey(r, [adm(T0, 5), adm(T0 + 300, 3)], NO_SKEW).overshoot, 0)
  t.is(checkKey(r, [adm(T0, 5), adm(T0 + 300, 4)], NO_SKEW).overshoot, 4)
})

// shared semantics

test('denied admissions are not spent: only the violating counts overshoot', t => {
  for (const algorithm of ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'] as const) {
    const r = rule(algorithm, 10, 1000)
    // 5 spent, 7 more is a violation, then 5 more: legal only if the 7 were
    // never spent. Then a legal tail that fills a fresh window every 2 s (far
    // enough apart that the sliding window's previous window is empty and the
    // bucket has refilled).
    const adms = [...burst(T0, 5), adm(T0 + 1, 7), ...burst(T0 + 2, 5)]
    for (let w = 1; w <= 5; w++) adms.push(...burst(T0 + w * 2000, 10))
    const c = checkKey(r, adms, NO_SKEW)
    t.is(c.admitted, 67, algorithm)
    t.is(c.overshoot, 7, algorithm)
    t.is(c.violations.length, 1, algorithm)
    t.is(c.violations[0].count, 7, algorithm)
    t.is(c.violations[0].at, T0 + 1, algorithm)
  }
})

test('at most 5 violations are reported, but all overshoot is counted', t => {
  const c = checkKey(rule('fixed-window', 1, 1000), burst(T0, 20), NO_SKEW)
  t.is(c.overshoot, 19)
  t.is(c.violations.length, 5)
})

test('unsorted input gives the same result as sorted', t => {
  // Deterministic shuffle (LCG) of a stream with violations for every algorithm.
  for (const algorithm of ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket'] as const) {
    const r = rule(algorithm, 20, 1000, 10)
    const sorted: Admission[] = []
    for (let i = 0; i < 500; i++) sorted.push(adm(T0 + i * 13, 1 + (i % 3), `n${i % 4}`, (i % 4) * 7))
    const shuffled = [...sorted]
    let s = 12345
    for (let i = shuffled.length - 1; i > 0; i--) {
      s = (s * 1103515245 + 12345) % 2147483648
      const j = s % (i + 1)
      ;[shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]]
    }
    const a = checkKey(r, sorted, { maxSkewMs: 21 })
    const b = checkKey(r, shuffled, { maxSkewMs: 21 })
    t.true(a.overshoot > 0, algorithm)
    t.deepEqual(b, a, algorithm)
  }
})

test('the input array is not mutated', t => {
  const adms = [adm(T0 + 5), adm(T0)]
  checkKey(rule('sliding-log', 10, 1000), adms, NO_SKEW)
  t.is(adms[0].at, T0 + 5)
})
