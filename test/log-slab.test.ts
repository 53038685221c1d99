/**
 * The slab the sliding logs of a rule share (log-slab.ts): time units and
 * rounding, blocks handed out and reused, the slab growing, rebasing its
 * time base with entries live across it, and what keys give back when they
 * go. The decisions themselves are checked against a plain log in
 * sliding-log-layout.test.ts.
 */
import test from 'ava'
import { LogSlab, PAIRS, UNITS, blockWords, metaOf, quantize, unitFor } from '../src/core/algorithms/log-slab.js'
import { createBucket } from '../src/core/algorithms/index.js'
import { Limiter } from '../src/core/limiter.js'
import { limits, rule } from './helpers/rules.js'

/** The slab behind a limiter's sliding-log keys (the spec is shared by the rule's keys). */
function slabOf (l: Limiter, key: string): LogSlab {
  const ks = l.existing(key)
  if (ks === undefined) throw new Error(`no state for ${key}`)
  return (ks as unknown as { h: { spec: { logs: LogSlab } } }).h.spec.logs
}

test('the unit is a power of two of ms, 2^-6 at least, and 2^29 units cover the period; times round up', t => {
  for (const perMs of [0.5, 7.5, 1000, 60_000, 3_600_000, 86_400_000, 30 * 86_400_000]) {
    const u = unitFor(perMs)
    t.true(Number.isInteger(Math.log2(u)))
    t.true(u >= 2 ** -6)
    t.true(2 ** 29 * u >= perMs && (u === 2 ** -6 || 2 ** 28 * u < perMs), `perMs ${perMs}`)
  }
  const unit = unitFor(60_000)
  for (const at of [0, 1, 86_400_000.123, 1_700_000_000_000.3, 12.015625]) {
    const q = quantize(at, unit)
    t.true(q >= at && q - at < unit, `${at} -> ${q}`)
  }
  t.is(quantize(12.015625, unit), 12.015625, 'a multiple of the unit stays')
})

test('blocks: freed blocks are reused by length first, the slab grows with its contents intact', t => {
  const L = new LogSlab(1000)
  const a = L.alloc(1, UNITS)
  L.u[a + metaOf(1)] = 7
  const blocks = Array.from({ length: 100 }, (_, i) => {
    const b = L.alloc(10, UNITS)
    L.u[b + metaOf(10)] = i
    return b
  })
  t.is(L.u[a + metaOf(1)], 7, 'the first block survived the slab growing')
  t.deepEqual(blocks.map(b => L.u[b + metaOf(10)]), Array.from({ length: 100 }, (_, i) => i))
  const used = L.used
  t.is(used, blockWords(1, UNITS) + 100 * blockWords(10, UNITS))
  L.release(blocks[3])
  L.release(blocks[50])
  t.is(L.alloc(10, UNITS), blocks[50], 'the last freed block of that length comes back first')
  t.is(L.alloc(10, UNITS), blocks[3])
  t.is(L.alloc(10, UNITS), used, 'none free: a new one at the end')
  L.release(a)
  t.is(L.alloc(3, UNITS), used + blockWords(10, UNITS), 'another length (6 words) does not take a freed block of 4')
})

test('a freed block is reused by one of another layout and the same length, its free list intact', t => {
  const L = new LogSlab(1000)
  // Head and size in one word (a 16-bit capacity) or in two: the free-list link sits after them.
  const wide = 196_606
  t.is(blockWords(65_535, PAIRS), blockWords(wide, UNITS), 'the same length')
  const first = L.alloc(1, UNITS)
  const a = L.alloc(65_535, PAIRS)
  const b = L.alloc(65_535, PAIRS)
  L.release(a)
  L.release(b)
  t.is(L.alloc(wide, UNITS), b)
  t.is(L.alloc(wide, UNITS), a, 'not the block at offset 0, nor garbage')
  t.is(L.alloc(wide, UNITS), first + blockWords(1, UNITS) + 2 * blockWords(wide, UNITS), 'none free: a new one at the end')
})

test('rebasing: a spend live across a rebase returns exactly one period after its rounded time, not earlier', t => {
  const perMs = 5 * 3_600_000
  const unit = unitFor(perMs)
  const b = createBucket('sliding-log', { limit: 3, perMs, burst: 3, share: 3 }, 0)
  const t0 = 1_000.3
  t.true(b.trySpend(1, t0))
  const slab = (b as unknown as { h: { spec: { logs: LogSlab } } }).h.spec.logs
  const base0 = (slab as unknown as { base: number }).base
  // The slab's base puts the first time 2^31 units in; 2^31 units later a time no longer fits.
  const late = t0 + 2 ** 31 * unit + 5 * unit
  t.true(b.trySpend(1, late - perMs / 2))
  t.true(b.trySpend(1, late), 'the first spend has returned long ago')
  t.not((slab as unknown as { base: number }).base, base0, 'the slab rebased')
  const kept = quantize(late - perMs / 2, unit)
  t.false(b.trySpend(2, kept + perMs - unit), 'a spend live across the rebase is still out one unit before its time')
  t.is(b.waitFor(2, kept + perMs - unit), unit)
  t.true(b.trySpend(2, kept + perMs), 'and back at its rounded time plus the period')
  t.is(b.outstanding(kept + perMs), 3)
  t.is(b.resetIn(kept + perMs), perMs, 'a spend logged a fraction of a unit late is reported back in one period')
})

test('a token returns at its rounded time plus the period: a window never admits more than the limit', t => {
  const b = createBucket('sliding-log', { limit: 2, perMs: 1000, burst: 2, share: 2 }, 0)
  const unit = unitFor(1000)
  const s = 5000.001
  t.true(b.trySpend(2, s))
  t.false(b.trySpend(1, s + 1000), 'not back at s + perMs: the time was rounded up')
  t.true(b.trySpend(1, quantize(s, unit) + 1000))
})

test('many keys: blocks go back when logs empty and when keys are evicted or dropped, and are reused', t => {
  const r = rule({ name: 'r', match: 'k:*', limit: 10, perMs: 1000, algorithm: 'sliding-log' })
  const l = new Limiter({ node: 'a', limits: limits(), rules: [r] })
  // The limiter's clock never runs back: each key's spends come after the last key's.
  const fill = (at: number): void => {
    for (let k = 0; k < 2000; k++) for (let i = 0; i < 10; i++) t.true(l.acquire(`k:${k}`, 1, at + k * 5 + i * 0.5).allowed)
  }
  fill(10_000)
  const slab = slabOf(l, 'k:0')
  const used = slab.used
  t.is(used, 2000 * blockWords(10, UNITS) + blockWords(1, UNITS) + blockWords(4, UNITS), 'one full ring per key (and the growth blocks, reused key after key)')
  t.is(l.sweep(30_000, 10_000), 2000, 'every key evicted once its tokens are back')
  fill(40_000)
  t.is(slabOf(l, 'k:0'), slab)
  t.is(slab.used, used, 'the same blocks again')
  // Keys dropped by a reload (no rule matches) give their blocks back with them.
  l.setRules([rule({ name: 'other', match: 'x:*', limit: 10, perMs: 1000, algorithm: 'sliding-log' })], 60_000)
  const free = (slab as unknown as { free: Map<number, number> }).free
  let n = 0
  for (let b = free.get(blockWords(10, UNITS)); b !== undefined && b !== 0xFFFFFFFF; b = slab.u[b + metaOf(10)]) n++
  t.is(n, 2000, 'every full ring is on the free list')
})
