/**
 * Time enters quotad only through a Clock held at the edges (server, daemon,
 * gossip tick). The decision core takes `nowMs` as an argument and never reads
 * a clock itself, so tests and the simulator drive it with virtual time.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch (may be fractional). */
  now: () => number
}

export const systemClock: Clock = {
  now: () => Date.now()
}

/** A clock that moves only when told to. For tests. */
export class ManualClock implements Clock {
  private t: number

  constructor (startMs = 1_700_000_000_000) {
    this.t = startMs
  }

  now (): number {
    return this.t
  }

  advance (ms: number): void {
    if (ms < 0) throw new RangeError('a clock never goes back')
    this.t += ms
  }

  set (ms: number): void {
    this.t = ms
  }
}
