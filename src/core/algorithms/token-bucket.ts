/**
 * Token bucket (rate limit/per, capacity burst). As conserved tokens, a node's
 * share is two conserved quantities: a capacity share and a refill-rate share.
 * Spent tokens return at the node's rate share, capped by its capacity share.
 * Across the cluster the shares sum to `burst` and `limit/per`, so admissions
 * in any interval of length t stay within the central envelope burst + rate*t.
 *
 * Here the rate share is proportional to the capacity share:
 * rate = (limit / perMs) * capacity / burst.
 *
 * Reserve (cluster caution, after a rule change lowered the stock while some
 * node owes a burn): the cluster then holds more capacity than the new burst,
 * and so refills faster than the new rate. Every node that reserves R of its
 * holding also refills only at the rate of (capacity - R): summed over the
 * nodes that is at most the new stock's rate (the same argument as for held
 * tokens, caution.ts), while a node that owes burns its own refills.
 */
import { EPSILON, type Bucket, type BucketSpec } from './bucket.js'
import { KeyState } from '../key-state.js'

export class TokenBucket extends KeyState implements Bucket {
  held: number
  private capacity: number
  private last: number

  constructor (spec: BucketSpec, share: number, nowMs: number) {
    super(spec)
    this.held = share
    this.capacity = share
    this.last = nowMs
  }

  private get ratePerCap (): number { return this.h.spec.ratePerCap }

  get share (): number { return this.capacity }

  private get rate (): number { return Math.max(0, this.capacity - this.bucketReserve) * this.ratePerCap }

  /** Kept in the key's head (key-state.ts): set only while the cluster is cautious. */
  setReserve (reserve: number): void { this.bucketReserve = reserve }

  advance (nowMs: number): void {
    const dt = nowMs - this.last
    if (dt <= 0) return
    this.last = nowMs
    if (this.held < this.capacity) {
      this.held = Math.min(this.capacity, this.held + dt * this.rate)
    }
  }

  trySpend (count: number, nowMs: number): boolean {
    this.advance(nowMs)
    if (this.held + EPSILON < count) return false
    this.held -= count
    return true
  }

  outstanding (nowMs: number): number {
    this.advance(nowMs)
    return this.capacity - this.held
  }

  waitFor (count: number, nowMs: number): number {
    this.advance(nowMs)
    const need = count - this.held
    if (need <= EPSILON) return 0
    if (count > this.capacity + EPSILON || this.rate <= 0) return Infinity
    return need / this.rate
  }

  resetIn (nowMs: number): number {
    this.advance(nowMs)
    const gap = this.capacity - this.held
    // With the whole refill reserved, say when it would be back at the nominal rate.
    const rate = this.rate > 0 ? this.rate : this.capacity * this.ratePerCap
    return gap > EPSILON && rate > 0 ? gap / rate : 0
  }

  forceSpend (count: number, nowMs: number): void {
    this.advance(nowMs)
    this.held -= Math.min(count, Math.max(0, this.held))
  }

  /** A transfer in carries capacity (and with it rate) as well as held tokens. */
  credit (count: number): void {
    this.capacity += count
    this.held += count
  }

  debit (count: number): number {
    const n = Math.min(count, Math.max(0, this.held))
    this.held -= n
    this.capacity -= n
    return n
  }
}
