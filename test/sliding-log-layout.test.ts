/**
 * The sliding log's compact layout (sliding-log.ts and log-slab.ts: blocks
 * of a shared slab, units, pairs, managed capacity, 32-bit times rebased)
 * must decide exactly as a plain log of (time, count) pairs whose times are
 * rounded up to the slab's unit: every answer and every number of the books
 * bit for bit equal, under random traffic with merges, long gaps, fractional
 * times and fractional counts (transfers can move fractions). The reference
 * below is the log as it was before the layout changed (one [time, count]
 * pair per entry, appended and consumed in order), kept here as the oracle,
 * with the rounding of recorded times the slab brought.
 */
import test from 'ava'
import { createBucket, type Bucket } from '../src/core/algorithms/index.js'
import { quantize, unitFor } from '../src/core/algorithms/log-slab.js'
import { logOf, readBlock, word } from './helpers/log-block.js'

class ReferenceLog {
  held: number
  pending = 0
  private readonly log: number[] = []
  private head = 0
  private readonly unit: number

  constructor (share: number, private readonly perMs: number) {
    this.held = share
    this.unit = unitFor(perMs)
  }

  get share (): number { return this.held + this.pending }

  advance (now: number): void {
    const cutoff = now - this.perMs
    while (this.head < this.log.length && this.log[this.head] <= cutoff) {
      const c = this.log[this.head + 1]
      this.held += c
      this.pending -= c
      this.head += 2
    }
  }

  trySpend (count: number, now: number): boolean {
    this.advance(now)
    if (this.held < count) return false
    this.record(count, now)
    return true
  }

  private record (count: number, now: number): void {
    this.held -= count
    this.pending += count
    const at = quantize(now, this.unit)
    const n = this.log.length
    if (n > this.head && this.log[n - 2] === at) this.log[n - 1] += count
    else this.log.push(at, count)
  }

  outstanding (now: number): number { this.advance(now); return this.pending }

  waitFor (count: number, now: number): number {
    this.advance(now)
    let need = count - this.held
    if (need <= 0) return 0
    for (let i = this.head; i < this.log.length; i += 2) {
      need -= this.log[i + 1]
      if (need <= 0) return this.log[i] + this.perMs - now
    }
    return Infinity
  }

  resetIn (now: number): number {
    this.advance(now)
    const n = this.log.length
    return n > this.head ? Math.min(this.perMs, this.log[n - 2] + this.perMs - now) : 0
  }

  forceSpend (count: number, now: number): void {
    this.advance(now)
    const n = Math.min(count, this.held)
    if (n > 0) this.record(n, now)
  }

  credit (count: number): void { this.held += count }

  debit (count: number): number {
    const n = Math.min(count, this.held)
    this.held -= n
    return n
  }
}

/** A small seeded generator (deterministic runs). */
function rng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = s
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

interface Traffic {
  limit: number
  perMs: number
  /** Chance that the clock does not move between two operations (spends merge). */
  same: number
  /** Chance of a fractional transfer or forced spend. */
  fractions: number
  /** Chance that the clock steps back (up to 1.5 periods: a bucket the limiter does not clamp) or leaps ahead (up to 3 days). */
  back?: number
  leap?: number
}

/** The form the log is in (private fields, read for coverage only): no block, one entry, units or pairs. */
function form (b: Bucket): string {
  const { block, slab } = logOf(b)
  if (block === null) return 'empty'
  const v = readBlock(slab, block)
  if (v.size === 0) return 'residue'
  if (v.wide) return 'wide'
  if (v.size === 1) return 'one'
  return v.mode
}

/** The log's block, the base of its 3-byte times (-1: none, or 32-bit times) and its slab's base: to see them move. */
function where (b: Bucket): { block: number | null, blockBase: number, slabBase: number } {
  const { block, slab } = logOf(b)
  const slabBase = slab === null ? NaN : (slab as unknown as { base: number }).base
  if (block === null || !slab.packed || readBlock(slab, block).wide || readBlock(slab, block).size === 0) return { block, blockBase: -1, slabBase }
  return { block, blockBase: word(slab, block, 1) >>> 22, slabBase }
}

/** Runs `steps` random operations on both logs; throws at the first difference. Returns the forms the log took. */
function run (seed: number, tr: Traffic, steps: number): Set<string> {
  const r = rng(seed)
  const b: Bucket = createBucket('sliding-log', { limit: tr.limit, perMs: tr.perMs, burst: tr.limit, share: tr.limit }, 0)
  const ref = new ReferenceLog(tr.limit, tr.perMs)
  let now = 86_400_000.123 + r() * 1000
  const forms = new Set<string>()
  const same = (what: string, a: unknown, e: unknown, i: number): void => {
    if (!Object.is(a, e)) throw new Error(`seed ${seed} step ${i}: ${what} is ${String(a)}, the reference says ${String(e)}`)
  }
  for (let i = 0; i < steps; i++) {
    const x = r()
    if (x >= tr.same) {
      const y = r()
      // Mostly short steps (the log fills up), sometimes a long one (it drains, in part or all).
      now += y < 0.8 ? r() * tr.perMs / tr.limit : y < 0.95 ? r() * tr.perMs : tr.perMs * (1 + r())
      const z = tr.back === undefined ? 0.5 : r()
      if (z < (tr.back ?? 0)) now -= r() * 1.5 * tr.perMs
      else if (z > 1 - (tr.leap ?? 0)) now += r() * 3 * 86_400_000
    }
    const before = where(b)
    const op = r()
    if (op < 0.55) {
      const count = r() < 0.7 ? 1 : 1 + Math.floor(r() * Math.min(tr.limit, 5))
      same('trySpend', b.trySpend(count, now), ref.trySpend(count, now), i)
    } else if (op < 0.65) {
      const count = 1 + Math.floor(r() * tr.limit)
      same('waitFor', b.waitFor(count, now), ref.waitFor(count, now), i)
    } else if (op < 0.7) {
      same('resetIn', b.resetIn(now), ref.resetIn(now), i)
    } else if (op < 0.75) {
      same('outstanding', b.outstanding(now), ref.outstanding(now), i)
    } else if (op < 0.75 + tr.fractions) {
      const n = r() < 0.5 ? 1 + Math.floor(r() * 3) : r() * 2
      const which = r()
      if (which < 0.4) { b.credit(n); ref.credit(n) } else if (which < 0.7) same('debit', b.debit(n), ref.debit(n), i)
      else { b.forceSpend(n, now); ref.forceSpend(n, now) }
    } else {
      b.advance(now)
      ref.advance(now)
    }
    same('held', b.held, ref.held, i)
    same('share', b.share, ref.share, i)
    forms.add(form(b))
    const after = where(b)
    // Only where the traffic is meant to move them (the forms of the other traffic stay as they were).
    if (tr.back !== undefined && after.slabBase !== before.slabBase && !Number.isNaN(before.slabBase)) forms.add('slab rebased')
    if (tr.back !== undefined && after.block === before.block && after.blockBase !== before.blockBase) forms.add('block rebased')
  }
  return forms
}

const TRAFFIC: Array<[string, Traffic]> = [
  ['limit 10, every spend at its own time', { limit: 10, perMs: 1000, same: 0, fractions: 0 }],
  ['limit 10, half the spends merge', { limit: 10, perMs: 1000, same: 0.5, fractions: 0 }],
  ['limit 1', { limit: 1, perMs: 50, same: 0.2, fractions: 0 }],
  ['limit 200, long logs that grow, wrap around and shrink', { limit: 200, perMs: 60_000, same: 0.1, fractions: 0 }],
  ['limit 10, transfers and forced spends of fractions', { limit: 10, perMs: 1000, same: 0.3, fractions: 0.15 }],
  ['limit 50, fractions and merges', { limit: 50, perMs: 7.5, same: 0.4, fractions: 0.1 }],
  // A unit of 1/16 ms: the slab rebases every ~37 h of this run's ~100 days, with entries live across it.
  ['limit 20, a 5 h period, rebased many times', { limit: 20, perMs: 5 * 3_600_000, same: 0.1, fractions: 0.05 }],
  // 3-byte times (log-slab.ts): a period near the longest that packs, so that times leave a block's window often;
  // a clock that steps back makes times span more than the window (the log goes wide), leaps of days rebase the slab.
  ['limit 10, 3-byte times, a clock that steps back and leaps days', { limit: 10, perMs: 190_000, same: 0.1, fractions: 0.05, back: 0.05, leap: 0.01 }]
]

for (const [name, tr] of TRAFFIC) {
  test(`sliding log decides as a plain log of pairs: ${name}`, t => {
    const forms = new Set<string>()
    for (let seed = 1; seed <= 20; seed++) for (const f of run(seed, tr, 3000)) forms.add(f)
    // Every form of the log took part (a run that never left one form would prove little).
    const expected = tr.limit === 1 ? ['empty', 'one'] : ['empty', 'one', 'units', 'pairs']
    if (tr.back !== undefined) expected.push('wide', 'slab rebased', 'block rebased')
    t.deepEqual([...forms].sort(), expected.sort())
  })
}

test('a total left a rounding off zero by fractions is kept in an empty block, as the field kept it', t => {
  const perMs = 1000
  const b = createBucket('sliding-log', { limit: 10, perMs, burst: 10, share: 10 }, 0)
  const ref = new ReferenceLog(10, perMs)
  const both = (what: string): void => {
    t.true(Object.is(b.held, ref.held), `${what}: held`)
    t.true(Object.is(b.share, ref.share), `${what}: share`)
  }
  // 0 + 0.3 + 2 - 0.3 - 2 is -2^-52, not 0, in doubles.
  b.forceSpend(0.3, 5000); ref.forceSpend(0.3, 5000)
  t.true(b.trySpend(2, 5001)); ref.trySpend(2, 5001)
  both('two spends')
  t.is(b.outstanding(7000), ref.outstanding(7000))
  t.is(ref.outstanding(7000), -(2 ** -52), 'the reference keeps a residue')
  t.is(form(b), 'residue')
  both('all back')
  t.is(b.resetIn(7000), ref.resetIn(7000))
  t.is(b.waitFor(11, 7000), ref.waitFor(11, 7000))
  t.true(b.trySpend(1, 7001)); ref.trySpend(1, 7001)
  t.is(form(b), 'one')
  t.is(b.outstanding(7001), ref.outstanding(7001))
  t.true(b.trySpend(1, 7002)); ref.trySpend(1, 7002)
  t.is(form(b), 'pairs', 'counts all 1, but a total of 2 - 2^-52 is not their number: no units')
  t.is(b.outstanding(7002), ref.outstanding(7002))
  t.is(b.resetIn(7500), ref.resetIn(7500))
  both('spends on the residue')
  t.is(b.outstanding(9000), ref.outstanding(9000))
  t.is(form(b), 'residue')
  both('back again')
})
