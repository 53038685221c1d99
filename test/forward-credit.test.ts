/**
 * A member's credit from a seed (forward-credit.ts), as pure logic: what it
 * asks for, when it may admit from it, and what makes it drop it.
 */
import test from 'ava'
import { Credits, MAX_KEYS, type CreditRule } from '../src/cluster/forward-credit.js'

const RULE: CreditRule = { name: 'api', hash: 'h1', stock: 100, config: { perMs: 1000, creditMs: 1000 } }

/** Demand of `n` acquires of `key`, one every `gapMs` from `fromMs`, none admitted from credit (there is none yet). */
function demand (c: Credits, key: string, n: number, fromMs: number, gapMs: number, rule = RULE): number {
  let at = fromMs
  for (let i = 0; i < n; i++, at += gapMs) c.take(key, 1, rule, at)
  return at
}

test('no credit is asked before an answer said where the window ends, nor for a key asked for rarely', t => {
  const c = new Credits()
  demand(c, 'k', 40, 0, 10)
  t.is(c.ask('k', RULE, 400), 0, 'no window known yet')
  c.answered('k', 's1', 600, 50, 0, RULE, 400, 401)
  t.true(c.ask('k', RULE, 410) > 0, '40 in 400 ms: it asks')
  const rare = new Credits()
  demand(rare, 'r', 2, 0, 300)
  rare.answered('r', 's1', 400, 50, 0, RULE, 600, 601)
  t.is(rare.ask('r', RULE, 610), 0, 'two in 600 ms: under the least worth asking')
  t.is(c.ask('other', RULE, 410), 0, 'a key never seen')
})

test('it asks about half of its demand over the rule\'s credit, at its rate over the last span or two, within the window; less what it holds', t => {
  const c = new Credits()
  // 100 acquires in the 1,000 ms span that just ended: 0.1 per ms.
  const at = demand(c, 'k', 100, 0, 10)
  c.answered('k', 's1', 900, 50, 0, RULE, at, at)
  t.is(c.ask('k', RULE, at), 45, 'half of 0.1/ms over the 900 ms left of the window')
  t.is(c.ask('k', RULE, at + 500), 13, 'half a span on, with no more demand: 100 over 1.5 spans, over the 400 ms left')
  const short: CreditRule = { ...RULE, config: { perMs: 1000, creditMs: 200 } }
  const d = new Credits()
  const at2 = demand(d, 'k', 100, 0, 2, short)
  d.answered('k', 's1', 900, 50, 0, short, at2, at2)
  t.is(d.ask('k', short, at2), 50, 'half of 0.5/ms over a 200 ms credit')
  // 10 ms on: 100 over 210 ms, and the 20 it holds taken off.
  d.answered('k', 's1', 890, 50, 20, short, at2, at2 + 10)
  t.is(d.ask('k', short, at2 + 10), 27, 'less the 20 it holds')
})

test('credit admits at once until it is spent, and never at or after the seed\'s window end, counted from when the fwd was sent', t => {
  const c = new Credits()
  // Sent at 100; the seed decided later with 400 ms left of its window; the answer came at 180.
  c.answered('k', 's2', 400, 30, 3, RULE, 100, 180)
  const first = c.take('k', 1, RULE, 200)
  t.truthy(first)
  t.is(first?.seed, 's2', 'the seed that spent it')
  t.like(first?.decision, { allowed: true, rule: 'api', limit: 100, retryAfterMs: 0, remaining: 32 })
  t.true((first?.decision.resetMs ?? 0) <= 300, 'its window ends within 300 ms of 200')
  t.is(c.take('k', 5, RULE, 210), null, 'more than it holds: forwarded')
  t.truthy(c.take('k', 2, RULE, 210))
  t.is(c.take('k', 1, RULE, 220), null, 'spent')
  // A fresh credit is good until sent + resetMs less the calendar's slew margin, not from when the answer came.
  c.answered('k', 's2', 400, 30, 5, RULE, 100, 180)
  // 100 + 400 less 0.1% (the seed's calendar may run 500 ppm fast) less 1 ms of rounding: good before 498.
  t.truthy(c.take('k', 1, RULE, 497))
  t.is(c.take('k', 1, RULE, 498), null, 'within the margin of the window end: none')
  t.is(c.take('k', 1, RULE, 497), null, 'what was left went with it')
})

test('a credit is good no longer than the seed\'s lease had left when it decided, when that ends before its window', t => {
  const c = new Credits()
  // Sent at 100; 400 ms to the window's end, but the seed's lease had 150 ms left: good before 100 + 149 - 1.
  c.answered('k', 's1', 400, 30, 5, RULE, 100, 120, 150)
  t.truthy(c.take('k', 1, RULE, 247))
  t.is(c.take('k', 1, RULE, 248), null, 'past the lease: none')
})

test('two credits held at once are good until the earlier end; a credit under another rule hash is not used', t => {
  const c = new Credits()
  c.answered('k', 's1', 500, 30, 2, RULE, 0, 10)
  c.answered('k', 's2', 900, 30, 2, RULE, 50, 60)
  t.truthy(c.take('k', 4, RULE, 100), 'both')
  c.answered('k', 's1', 500, 30, 2, RULE, 0, 10)
  c.answered('k', 's2', 900, 30, 2, RULE, 50, 60)
  t.is(c.take('k', 1, RULE, 499), null, 'past the earlier end, neither is used')
  const reloaded: CreditRule = { ...RULE, hash: 'h2' }
  const d = new Credits()
  d.answered('k', 's1', 500, 30, 10, RULE, 0, 10)
  t.is(d.take('k', 1, reloaded, 20), null, 'the rule changed: the credit is dropped, the acquire forwarded')
})

test('at most MAX_KEYS keys are tracked; past that a new key is forwarded and asks for nothing, until old ones go idle', t => {
  const c = new Credits()
  for (let i = 0; i < MAX_KEYS; i++) c.answered(`k${i}`, 's1', 900, 10, 1, RULE, 0, 1)
  t.is(c.size, MAX_KEYS)
  c.answered('new', 's1', 900, 10, 5, RULE, 0, 1)
  t.is(c.take('new', 1, RULE, 2), null, 'not tracked')
  t.is(c.size, MAX_KEYS)
  // Two spans later, every old key holds nothing good and has had no demand: they make room.
  c.answered('new', 's1', 900, 10, 5, RULE, 2500, 2501)
  t.truthy(c.take('new', 1, RULE, 2502))
  t.is(c.size, 1)
})
