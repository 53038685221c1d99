/** The one place that maps an algorithm name to its bucket class. */
import type { Algorithm } from '../../config/types.js'
import type { Bucket, BucketParams } from './bucket.js'
import { FixedWindowBucket } from './fixed-window.js'
import { SlidingLogBucket } from './sliding-log.js'
import { SlidingWindowBucket } from './sliding-window.js'
import { TokenBucket } from './token-bucket.js'

export type { Bucket, BucketParams } from './bucket.js'
export { EPSILON } from './bucket.js'

export function createBucket (algorithm: Algorithm, params: BucketParams, nowMs: number): Bucket {
  switch (algorithm) {
    case 'fixed-window': return new FixedWindowBucket(params, nowMs)
    case 'sliding-log': return new SlidingLogBucket(params, nowMs)
    case 'sliding-window': return new SlidingWindowBucket(params, nowMs)
    case 'token-bucket': return new TokenBucket(params, nowMs)
  }
}
