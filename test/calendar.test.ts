/**
 * The calendar (src/core/calendar.ts) against a wall clock that truncates
 * to the millisecond, as Date.now() does: started at the wall clock's tick
 * (clock.ts `wallEdge`) and synced on truncated readings, it stays on true
 * time. Followed reading for reading, it would settle up to a millisecond
 * behind, and under load each window's tail would be spent in the next true
 * window (the short chaos seed's first window once admitted 202 of 200).
 */
import test from 'ava'
import { Calendar } from '../src/core/calendar.js'
import { wallEdge, type Clock } from '../src/clock.js'

/** A clock whose true time is `t` (ms, fractional); its wall reads floor(t + wallStep), its mono reads t exactly. */
class TruncatingClock implements Clock {
  t = 1_700_000_000_000.37
  wallStep = 0
  readonly resolutionMs = 1
  /** Each reading moves true time on by this much (a clock read costs time). */
  perRead = 0.013
  now (): number { this.t += this.perRead; return Math.floor(this.t + this.wallStep) }
  mono (): number { this.t += this.perRead; return this.t }
}

/** Drive a calendar for `ms` of true time with a sync every `tickMs`; the worst lag and lead of calendar vs true time seen after the first second. */
function drive (cal: Calendar, clock: TruncatingClock, ms: number, tickMs = 100): { lag: number, lead: number } {
  let lag = 0
  let lead = 0
  const end = clock.t + ms
  const settled = clock.t + 1000
  let i = 0
  while (clock.t < end) {
    // Ticks land at varied phases of the millisecond, as timers do.
    clock.t += tickMs + ((i++ * 0.381) % 1)
    cal.sync(clock.now(), clock.mono())
    const m = clock.mono()
    // Calendar minus true time: mono reads true time here.
    const off = cal.at(m) - m
    if (clock.t > settled) {
      lag = Math.max(lag, -off)
      lead = Math.max(lead, off)
    }
  }
  return { lag, lead }
}

test('started at the wall clock\'s tick and synced on truncated readings, a calendar stays on true time', t => {
  const clock = new TruncatingClock()
  const start = wallEdge(clock)
  t.is(start.wallResolutionMs, 1)
  // The reading came at the tick: true time is within a read's cost of it.
  t.true(start.monoMs - start.wallMs >= 0 && start.monoMs - start.wallMs < 0.05, `${start.monoMs - start.wallMs}`)
  const cal = new Calendar(start.wallMs, start.monoMs, start.wallResolutionMs)
  const { lag, lead } = drive(cal, clock, 60_000)
  t.true(lag < 0.05, `lag ${lag}`)
  t.true(lead < 0.05, `lead ${lead}`)
  t.true(cal.wallGapMs === 0, `wallGapMs ${cal.wallGapMs}`)
})

test('sabotage: followed reading for reading (no resolution), a calendar settles behind true time', t => {
  const clock = new TruncatingClock()
  const cal = new Calendar(clock.now(), clock.mono())
  const { lag } = drive(cal, clock, 60_000)
  t.true(lag > 0.5, `lag ${lag}`)
})

test('with a resolution, a wall clock stepped back still slows the calendar, and one stepped forward still pulls it on', t => {
  const clock = new TruncatingClock()
  const start = wallEdge(clock)
  const cal = new Calendar(start.wallMs, start.monoMs, start.wallResolutionMs)
  const m0 = clock.mono()
  const c0 = cal.at(m0)
  clock.wallStep = -50
  clock.t += 10
  cal.sync(clock.now(), clock.mono())
  t.true(cal.wallGapMs < -40, `${cal.wallGapMs}`)
  drive(cal, clock, 2000)
  const m1 = clock.mono()
  // Slower than mono (it waits for the wall clock), never backwards.
  t.true(cal.at(m1) - c0 < m1 - m0 - 40, `${cal.at(m1) - c0} vs ${m1 - m0}`)
  t.true(cal.at(m1) > c0)
  t.is(cal.wallGapMs, 0, 'caught up with the stepped wall clock')
  clock.wallStep = 50
  const c1 = cal.at(clock.mono())
  const m2 = clock.mono()
  drive(cal, clock, 2000)
  const m3 = clock.mono()
  t.true(cal.at(m3) - c1 > m3 - m2, 'gains on mono while behind the wall clock')
})

test('a clock without a resolution (virtual time) is read once: no wait', t => {
  let reads = 0
  const clock: Clock = { now: () => { reads++; return 5 }, mono: () => 7 }
  t.deepEqual(wallEdge(clock), { wallMs: 5, monoMs: 7, wallResolutionMs: 0 })
  t.is(reads, 1)
})
