/** The lone node's book of spending recorded ahead (node/spend-ahead.ts): pure, calendar time passed in. */
import test from 'ava'
import { batchOf, lifeEnd, SpendAhead } from '../src/node/spend-ahead.js'

const DAY = { stock: 20, config: { perMs: 86_400_000, algorithm: 'fixed-window' } }
const LOG = { stock: 1000, config: { perMs: 3_600_000, algorithm: 'sliding-log' } }
const T = 1_800_000_000_000

/** Spend `n` of `key` at `now` from what covers it (the hot path's `spend`). */
function take (a: SpendAhead, key: string, rule: typeof LOG, n: number, now: number): void {
  const e = a.entry(key)
  if (e !== undefined) a.spend(e, rule, n, now, now)
}

test('a reservation is about 5% of the stock, at least the count', t => {
  t.is(batchOf(DAY, 1), 1)
  t.is(batchOf(LOG, 1), 50)
  t.is(batchOf(LOG, 80), 80)
})

test('a calendar window\'s reservation lasts to the window\'s end; a sliding log\'s a tenth of the period, within 1 s and 60 s', t => {
  const dayStart = Math.floor(T / DAY.config.perMs) * DAY.config.perMs
  t.is(lifeEnd(DAY, T), dayStart + DAY.config.perMs - 1)
  t.is(lifeEnd(LOG, T), T + 60_000)
  t.is(lifeEnd({ stock: 5, config: { perMs: 2000, algorithm: 'token-bucket' } }, T), T + 1000)
})

test('nothing is spendable until a line is durable; then up to its n, within its life', t => {
  const a = new SpendAhead()
  t.is(a.available('k', T, T), 0)
  const line = a.want('k', LOG, 1, T, T)
  t.deepEqual(line, ['k', 50, T, T + 60_000])
  t.is(a.want('k', LOG, 1, T, T), null, 'one write per key at a time')
  t.true(a.waiting('k'))
  t.is(a.available('k', T, T), 0, 'not before it is on disk')
  if (line !== null) a.durable(line)
  t.false(a.waiting('k'))
  t.is(a.available('k', T, T), 50)
  t.is(a.available('k', T + 60_001, T + 60_001), 0, 'not after its life')
  take(a, 'k', LOG, 20, T)
  t.is(a.available('k', T, T), 30)
  t.is(a.want('k', LOG, 1, T, T), null, 'more than half a batch left, and most of its life: nothing asked yet')
  take(a, 'k', LOG, 10, T)
  const next = a.want('k', LOG, 1, T, T)
  t.truthy(next, 'under half a batch: the next one is asked for ahead of need')
  if (next !== null) a.failed(next)
  t.false(a.waiting('k'), 'a failed write reserves nothing, and may be asked for again')
  t.is(a.available('k', T, T), 20)
})

test('a key used in a window asks for the next window\'s reservation, spendable only from its start', t => {
  const a = new SpendAhead()
  const start = (Math.floor(T / 1000) + 1) * 1000
  const RULE = { stock: 100, config: { perMs: 1000, algorithm: 'fixed-window' } }
  const first = a.want('k', RULE, 1, start - 900, start - 900)
  t.deepEqual(first, ['k', 5, start - 900, start - 1])
  if (first !== null) a.durable(first)
  const next = a.want('k', RULE, 1, start - 800, start - 800)
  t.deepEqual(next, ['k', 5, start, start + 999])
  if (next !== null) a.durable(next)
  t.is(a.available('k', start - 100, start - 100), 5, 'the next window\'s is not spendable before it begins')
  t.is(a.want('k', RULE, 1, start - 100, start - 100), null, 'asked for once')
  t.is(a.available('k', start + 10, start + 10), 5, 'and is from its start')
})

test('expired and spent reservations are swept; live ones are what a compaction keeps', t => {
  const a = new SpendAhead()
  a.durable(['x', 5, T, T + 1000])
  a.durable(['y', 5, T, T + 5000])
  t.is(a.keys, 2)
  a.sweep(T + 2000)
  t.is(a.keys, 1)
  t.deepEqual(a.lines(T + 2000), [['y', 5, T + 2000, T + 5000]])
  take(a, 'y', LOG, 5, T + 2000)
  t.deepEqual(a.lines(T + 2000), [], 'spent: nothing left to keep')
  a.sweep(T + 2000)
  t.is(a.keys, 0)
})

test('spend: one pass takes the tokens and says when the next line is due', t => {
  const a = new SpendAhead()
  const RULE = { stock: 100, config: { perMs: 1000, algorithm: 'fixed-window' } }
  const start = Math.floor(T / 1000) * 1000
  a.durable(['k', 10, start, start + 999])
  const e = a.entry('k')
  if (e === undefined) { t.fail('no entry'); return }
  t.true(a.spend(e, RULE, 1, start + 10, start + 10), 'no next-window reservation yet: due')
  const next = a.want('k', RULE, 1, start + 10, start + 10)
  t.deepEqual(next, ['k', 5, start + 1000, start + 1999])
  t.false(a.spend(e, RULE, 1, start + 20, start + 20), 'one on its way: not due')
  if (next !== null) a.durable(next)
  t.false(a.spend(e, RULE, 1, start + 30, start + 30), '7 left of a batch of 5, and the next window reserved')
  t.true(a.spend(e, RULE, 5, start + 40, start + 40), 'under half a batch left: due')
  t.is(a.available('k', start + 40, start + 40), 2)
})
