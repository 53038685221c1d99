/**
 * The calendar: where calendar-aligned windows (fixed-window and
 * sliding-window rules, grant window tags, saved return times) are placed.
 *
 * calendar(mono) = mono + offset. The offset starts as wall - mono, so the
 * calendar reads the wall clock at start, and then follows the monotonic
 * clock. `sync(wall, mono)` (called on ticks) pulls it back toward the wall
 * clock, within bounds that keep it safe:
 *
 * - It NEVER runs backwards, and never faster than mono by more than
 *   FORWARD_SLEW (500 ppm, the rate NTP slews at), but for `advance`
 *   below. A window is therefore never shorter than its length in true (monotonic) time, less 500 ppm,
 *   and no window's tokens come back twice: a wall clock stepping back by an
 *   hour does not reopen the last hour's windows, and one stepping forward
 *   by a day does not hand back today's tokens early.
 * - When the wall clock is behind (stepped back), the calendar runs slower
 *   than mono (at least BACK_SLEW_KEEP of its rate) until it has caught up.
 *   Slower windows only return tokens later: always safe.
 * - The caller may hold it instead (`follow` false): it then runs on the
 *   monotonic clock. A cluster node holds it while its wall clock is off a
 *   quorum's (cluster-core.ts `observeWall`), so one wall clock stepped
 *   back does not slow its calendar off the cluster's time.
 * - `advance` jumps it forward: only to calendars a quorum of a cluster's
 *   voters surely keeps (cluster-core.ts `observeWall`), never to a wall
 *   clock's word.
 * - A large forward step is followed only at 500 ppm; `skewMs` reports the
 *   gap (status shows it) and a restart realigns (a clean restart keeps the
 *   node's tokens; their saved return times are wall-clock times).
 *
 * Invariant: successive readings for increasing mono are strictly increasing.
 */

/** Most the calendar may gain on mono, per ms of mono (500 ppm). */
export const FORWARD_SLEW = 0.0005
/** While ahead of the wall clock, the calendar keeps at least this fraction of mono's rate. */
export const BACK_SLEW_KEEP = 0.9

/** What windowed buckets need of a calendar. */
export interface CalendarView {
  at: (monoMs: number) => number
}

/** Calendar time equal to the time passed in: for a lone Limiter driven by one clock (tests, tools). */
export const IDENTITY_CALENDAR: CalendarView = { at: m => m }

export class Calendar implements CalendarView {
  /** calendar - mono. */
  offset: number
  private lastMono: number
  /** The latest reading: a slew back must stall readings, never reverse them. */
  private last = -Infinity
  /**
   * The wall clock minus the calendar at the last `sync` (positive: the
   * calendar is behind the wall clock). A clean stop adds it to the times
   * it saves (persist.ts): the next start's calendar reads the wall clock,
   * so a time saved on a calendar that lagged would come that much early.
   */
  wallGapMs = 0

  /**
   * `resolutionMs`: the wall clock's (clock.ts): a reading `w` means a true
   * time in [w, w + resolutionMs), so a calendar in that interval is on
   * time and is not moved. Without it a calendar follows the truncated
   * readings and settles up to that much behind true time.
   */
  constructor (wallMs: number, monoMs: number, private readonly resolutionMs = 0) {
    this.offset = wallMs - monoMs
    this.lastMono = monoMs
  }

  /** The calendar time at monotonic time `monoMs` (never less than an earlier reading). */
  at (monoMs: number): number {
    const c = monoMs + this.offset
    if (c > this.last) this.last = c
    return this.last
  }

  /** Move toward the wall clock within the slew bounds, unless `follow` is false (held); `wallGapMs` is kept either way. */
  sync (wallMs: number, monoMs: number, follow = true): void {
    const dt = monoMs - this.lastMono
    if (dt <= 0) return
    this.lastMono = monoMs
    const gap = this.gapTo(wallMs, monoMs)
    if (follow && gap > 0) this.offset += Math.min(gap, FORWARD_SLEW * dt)
    else if (follow && gap < 0) this.offset += Math.max(gap, -(1 - BACK_SLEW_KEEP) * dt)
    this.wallGapMs = this.gapTo(wallMs, monoMs)
  }

  /** The wall clock's reading less the calendar, to the interval the reading stands for: 0 inside it. */
  private gapTo (wallMs: number, monoMs: number): number {
    const raw = (wallMs - monoMs) - this.offset
    return raw > 0 ? raw : Math.min(0, raw + this.resolutionMs)
  }

  /** Jump forward by `ms` (> 0): readings stay strictly increasing. */
  advance (ms: number): void {
    if (ms > 0) this.offset += ms
  }

  /** How far the calendar is from the wall clock at `wallMs`/`monoMs` (positive: calendar ahead). */
  skewMs (wallMs: number, monoMs: number): number {
    return this.at(monoMs) - wallMs
  }
}
