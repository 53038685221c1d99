/**
 * Time enters quotad only through a Clock held at the edges (server, daemon,
 * gossip tick). The decision core takes `nowMs` as an argument and never reads
 * a clock itself, so tests and the simulator drive it with virtual time.
 *
 * Two kinds of time, kept apart on purpose:
 * - `mono()`: a monotonic clock (performance.now). Every duration, deadline,
 *   timeout, rate and liveness check uses it. It never steps. This is the
 *   `nowMs` the core's methods take.
 * - `now()`: the wall clock (Date.now). It is read only to place calendar
 *   windows (a `1d` window starts at UTC midnight) and to date saved state.
 *   It can step (NTP, a VM resume, an operator), so the core never uses it
 *   directly: it feeds a Calendar (calendar.ts), which never runs backwards.
 */
export interface Clock {
  /** Wall-clock milliseconds since the Unix epoch (may step). */
  now: () => number
  /** Monotonic milliseconds from an arbitrary origin (never steps). */
  mono: () => number
  /**
   * The wall clock's resolution: a reading `w` says only that the true time
   * is in [w, w + resolutionMs) (Date.now() truncates to the millisecond).
   * A calendar takes readings within that interval as on time
   * (calendar.ts), so it does not settle up to a millisecond behind.
   * @default 0 (readings are exact: virtual clocks)
   */
  resolutionMs?: number
}

/**
 * A wall and a monotonic reading taken at the same moment, the wall exact:
 * for a clock with a resolution, it waits (at most 2 ms) for the wall
 * clock's next tick, where the true time is its reading. Where a calendar
 * starts (calendar.ts): started off a truncated reading, it would run up to
 * a millisecond behind true time, and under load the tail of each window
 * would be spent in the next true one.
 */
export function wallEdge (clock: Clock): { wallMs: number, monoMs: number, wallResolutionMs: number } {
  const res = clock.resolutionMs ?? 0
  let wall = clock.now()
  let mono = clock.mono()
  if (res > 0) {
    const first = wall
    const until = mono + 2 * res
    while (wall === first && mono < until) {
      wall = clock.now()
      mono = clock.mono()
    }
  }
  return { wallMs: wall, monoMs: mono, wallResolutionMs: res }
}

export const systemClock: Clock = {
  now: () => Date.now(),
  mono: () => performance.now(),
  resolutionMs: 1
}

/**
 * A clock that moves only when told to. For tests. `advance` moves both
 * clocks; `stepWall` moves only the wall clock (an NTP step), either way.
 * Monotonic time starts equal to the wall time, so a test can pass either.
 */
export class ManualClock implements Clock {
  private wall: number
  private monoT: number

  constructor (startMs = 1_700_000_000_000) {
    this.wall = startMs
    this.monoT = startMs
  }

  now (): number {
    return this.wall
  }

  mono (): number {
    return this.monoT
  }

  advance (ms: number): void {
    if (ms < 0) throw new RangeError('a clock never goes back (use stepWall for a wall-clock step)')
    this.wall += ms
    this.monoT += ms
  }

  /** Step the wall clock alone, forward or back. */
  stepWall (ms: number): void {
    this.wall += ms
  }
}
