/**
 * The slab the sliding logs of a rule share (log-slab.ts): time units and
 * rounding, blocks handed out and reused, the slab growing page by page
 * with blocks larger than a page, held tokens kept in the block, rebasing its
 * time base with entries live across it, and what keys give back when they
 * go. The decisions themselves are checked against a plain log in
 * sliding-log-layout.test.ts.
 */
import test from 'ava'
import { LogSlab, PAGE_WORDS, PAIRS, UNITS, quantize, unitFor } from '../src/core/algorithms/log-slab.js'
import { linkWord, logOf, readBlock, setWord, word } from './helpers/log-block.js'
import { createBucket } from '../src/core/algorithms/index.js'
import { Limiter } from '../src/core/limiter.js'
import { limits, rule } from './helpers/rules.js'

/** The slab behind a limiter's sliding-log keys (the spec is shared by the rule's keys). */
function slabOf (l: Limiter, key: string): LogSlab {
  const ks = l.existing(key)
  if (ks === undefined) throw new Error(`no state for ${key}`)
  return (ks as unknown as { h: { spec: { logs: LogSlab } } }).h.spec.logs
}

/** A block's words before its times: 2 narrow (capacity up to 1023), 4 wide. */
const metaOf = (cap: number): number => cap > 1023 ? 4 : 2

/** Words of a block of `cap` entries in `mode` in slab `L`, narrow if it can be. */
const blockWords = (L: LogSlab, cap: number, mode: number): number => L.words(cap, mode, cap > 1023)

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
  t.true(a > 0, 'no block has handle 0 (a key tells a handle from held tokens by its sign)')
  setWord(L, a, metaOf(1), 7)
  const blocks = Array.from({ length: 100 }, (_, i) => {
    const b = L.alloc(10, UNITS)
    setWord(L, b, metaOf(10), i)
    return b
  })
  t.is(word(L, a, metaOf(1)), 7, 'the first block survived the slab growing')
  t.deepEqual(blocks.map(b => word(L, b, metaOf(10))), Array.from({ length: 100 }, (_, i) => i))
  const used = L.used
  t.is(used, blockWords(L, 1, UNITS) + 100 * blockWords(L, 10, UNITS))
  L.release(blocks[3])
  L.release(blocks[50])
  t.is(L.alloc(10, UNITS), blocks[50], 'the last freed block of that length comes back first')
  t.is(L.alloc(10, UNITS), blocks[3])
  t.is(L.alloc(10, UNITS), a + used, 'none free: a new one at the end')
  L.release(a)
  t.is(L.alloc(3, UNITS), a + used + blockWords(L, 10, UNITS), 'another length (6 words) does not take a freed block of 4')
})

test('pages: blocks fill a page and go on in the next, a block larger than a page has a buffer of its own, none is copied', t => {
  const L = new LogSlab(1000)
  const w = blockWords(L, 10, UNITS)
  const n = Math.ceil(2.5 * PAGE_WORDS / w)
  const blocks = Array.from({ length: n }, (_, i) => {
    const b = L.alloc(10, UNITS)
    setWord(L, b, metaOf(10), i)
    return b
  })
  t.is(L.pages.length, 3)
  const page1 = L.pages[1]
  const big = L.alloc(PAGE_WORDS + 5, PAIRS)
  t.true(big > 0)
  setWord(L, big, metaOf(PAGE_WORDS + 5) + PAGE_WORDS + 4, 99)
  t.is(L.pages.length, 3 + Math.ceil(blockWords(L, PAGE_WORDS + 5, PAIRS) / PAGE_WORDS), 'the large block reserves the page slots it spans')
  const after = L.alloc(10, UNITS)
  t.is(after >>> 16, 2, 'small blocks go on in the page they were cut from')
  t.is(L.pages[1], page1, 'a full page is never copied')
  t.deepEqual(blocks.map(b => word(L, b, metaOf(10))), Array.from({ length: n }, (_, i) => i))
  t.is(word(L, big, metaOf(PAGE_WORDS + 5) + PAGE_WORDS + 4), 99)
  // What a page leaves unused at its end is less than one block.
  t.true(L.used - (n + 1) * w - blockWords(L, PAGE_WORDS + 5, PAIRS) < 2 * w)
  L.release(big)
  t.is(L.alloc(PAGE_WORDS + 5, PAIRS), big, 'a freed large block is reused')
})

test('a freed block is reused by one of another layout and the same length, its free list intact', t => {
  const L = new LogSlab(1000)
  // Head and size in the first word (a capacity up to 1023, 3-byte times here) or in words of their own: the free-list link sits after them.
  const wide = 2816
  t.is(blockWords(L, 1023, PAIRS), blockWords(L, wide, UNITS), 'the same length')
  t.not(metaOf(1023), metaOf(wide))
  const first = L.alloc(1, UNITS)
  const a = L.alloc(1023, PAIRS)
  const b = L.alloc(1023, PAIRS)
  L.release(a)
  L.release(b)
  t.is(L.alloc(wide, UNITS), b)
  t.is(L.alloc(wide, UNITS), a, 'not the block at offset 0, nor garbage')
  t.is(L.alloc(wide, UNITS), first + blockWords(L, 1, UNITS) + 2 * blockWords(L, wide, UNITS), 'none free: a new one at the end')
})

test('held tokens live in the block: a word while they are an integer below 2^32, else a double; none negative with no block', t => {
  const b = createBucket('sliding-log', { limit: 10, perMs: 1000, burst: 10, share: 10 }, 0)
  t.is(logOf(b).block, null)
  t.true(b.trySpend(1, 5000))
  t.true(b.trySpend(1, 5001))
  const { block, slab } = logOf(b)
  if (block === null) return t.fail('no block')
  t.like(readBlock(slab, block), { mode: 'units', held: 8, pending: 2 })
  b.credit(2 ** 32)
  const big = logOf(b).block
  if (big === null) return t.fail('no block')
  t.like(readBlock(slab, big), { mode: 'pairs', held: 8 + 2 ** 32, pending: 2 }, 'held past a word: pairs')
  t.is(b.held, 8 + 2 ** 32)
  t.is(b.debit(2 ** 32), 2 ** 32)
  t.is(b.held, 8)
  t.is(b.outstanding(7000), 0)
  t.is(logOf(b).block, null, 'all back, no residue: no block, held in the field')
  t.is(b.held, 10)
  b.credit(0.25)
  t.is(b.held, 10.25)
  t.is(b.debit(11), 10.25)
  t.true(Object.is(b.held, 0), 'held 0, not -0')
  b.credit(-1.5)
  t.is(b.held, -1.5, 'a negative held (no caller makes one) is kept, in a block')
  t.not(logOf(b).block, null)
  b.credit(3)
  t.is(b.held, 1.5)
  t.true(b.trySpend(1, 8000))
  t.is(b.outstanding(9000), 0)
  t.is(b.held, 1.5)
  t.is(logOf(b).block, null)
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

test('3-byte times: a slab rebase moves each block\'s base; a block left behind keeps its expired times at 0, one live across it keeps its times exactly', t => {
  const perMs = 60_000
  const r = rule({ name: 'r', match: 'k:*', limit: 3, perMs, algorithm: 'sliding-log' })
  const l = new Limiter({ node: 'a', limits: limits(), rules: [r] })
  const t0 = 1_000.3
  for (let i = 0; i < 3; i++) t.true(l.acquire('k:a', 1, t0 + i).allowed)
  const slab = slabOf(l, 'k:a')
  t.true(slab.packed)
  const base = (): number => (slab as unknown as { base: number }).base
  // The first time whose offset no longer fits 32 bits; twice, so that k:a's block falls behind the base by 9 hours.
  const edge = (): number => (base() + 2 ** 32) * slab.unit
  const base0 = base()
  t.true(l.acquire('k:c', 1, edge() + 1).allowed)
  const base1 = base()
  t.not(base1, base0, 'the slab rebased')
  const tb = edge() - 30_000
  t.true(l.acquire('k:b', 1, tb).allowed)
  t.is(base(), base1, 'not yet')
  const end = edge()
  t.true(l.acquire('k:d', 1, end + 1).allowed)
  t.not(base(), base1, 'the slab rebased again')
  const ks = l.existing('k:b')
  if (ks === undefined) return t.fail('no state for k:b')
  const { block } = logOf(ks)
  if (block === null) return t.fail('k:b has no block')
  t.deepEqual(readBlock(slab, block).entries, [[quantize(tb, slab.unit), 1]], 'a live time reads back exactly after the rebase')
  t.true(l.acquire('k:a', 3, end + 2).allowed, 'times left behind by 18 hours are back, not read as recent')
  t.false(l.acquire('k:b', 3, quantize(tb, slab.unit) + perMs - slab.unit).allowed, 'one unit early: not back')
  t.true(l.acquire('k:b', 3, quantize(tb, slab.unit) + perMs).allowed)
})

test('3-byte times: a time out of a block\'s window moves its base; times too far apart for it make the log wide, with every time exact', t => {
  const perMs = 190_000
  const b = createBucket('sliding-log', { limit: 5, perMs, burst: 5, share: 5 }, 0)
  const unit = unitFor(perMs)
  // The first offset one unit below a multiple of 2^22 units: the block's window ends 2^24 - 1 - 2^22 units after it.
  const step = 2 ** 22
  const t0 = (1000 * step - 1) * unit
  t.true(b.trySpend(1, t0))
  const { block: b0, slab } = logOf(b)
  if (b0 === null) return t.fail('no block')
  t.true(slab.packed)
  const t1 = t0 + 150_000
  const t2 = t0 + (2 ** 24 - step + 10) * unit
  t.true(b.trySpend(1, t1))
  t.true(b.trySpend(1, t2), 'the first spend is back; t1 is live')
  const moved = logOf(b).block
  if (moved === null) return t.fail('no block')
  const v = readBlock(slab, moved)
  t.false(v.wide)
  t.deepEqual(v.entries, [[t1, 1], [t2, 1]], 'both times exact: the base moved to t1\'s step')
  // A clock that runs back (a bucket the limiter does not clamp): 260 s before t2 and t1 still live span more than 2^24 units.
  const t3 = t2 - 260_000
  t.true(b.trySpend(1, t3))
  const wide = logOf(b).block
  if (wide === null) return t.fail('no block')
  const w = readBlock(slab, wide)
  t.true(w.wide, '32-bit times')
  t.deepEqual(w.entries, [[t1, 1], [t2, 1], [t3, 1]])
  t.is(b.waitFor(3, t2), t1 + perMs - t2, 'in log order, as a plain log: the oldest entry first')
  t.is(b.waitFor(4, t2), perMs)
  t.is(b.outstanding(t1 + perMs), 2)
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
  t.is(used, 2000 * blockWords(slab, 10, UNITS) + blockWords(slab, 1, UNITS) + blockWords(slab, 4, UNITS), 'one full ring per key (and the growth blocks, reused key after key)')
  t.is(l.sweep(30_000, 10_000), 2000, 'every key evicted once its tokens are back')
  fill(40_000)
  t.is(slabOf(l, 'k:0'), slab)
  t.is(slab.used, used, 'the same blocks again')
  // Keys dropped by a reload (no rule matches) give their blocks back with them.
  l.setRules([rule({ name: 'other', match: 'x:*', limit: 10, perMs: 1000, algorithm: 'sliding-log' })], 60_000)
  const free = (slab as unknown as { free: Map<number, number> }).free
  let n = 0
  for (let b = free.get(blockWords(slab, 10, UNITS)); b !== undefined && b !== 0xFFFFFFFF; b = word(slab, b, linkWord(slab, b))) n++
  t.is(n, 2000, 'every full ring is on the free list')
})
