/** A small seeded PRNG (mulberry32): the simulator's only source of randomness. */
export class Rng {
  private s: number

  constructor (seed: number) {
    this.s = seed >>> 0
  }

  /** Uniform in [0, 1). */
  next (): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  int (lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }

  chance (p: number): boolean {
    return this.next() < p
  }

  /** Exponential with the given mean (inverse CDF; 1 - next() is in (0, 1], so the log is finite). */
  exp (mean: number): number {
    return -mean * Math.log(1 - this.next())
  }

  /** A uniformly chosen element of a non-empty array. */
  pick<T> (xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('Rng.pick: empty array')
    return xs[Math.floor(this.next() * xs.length)]
  }

  /** Fisher–Yates shuffle in place; returns xs. */
  shuffle<T> (xs: T[]): T[] {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1))
      const x = xs[i]
      xs[i] = xs[j]
      xs[j] = x
    }
    return xs
  }
}
