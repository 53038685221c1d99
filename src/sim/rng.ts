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
}
