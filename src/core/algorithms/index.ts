/** The one place that maps an algorithm name to its bucket class. */
import type { Algorithm } from '../../config/types.js'
import { bucketSpec, type Bucket, type BucketParams, type BucketSpec } from './bucket.js'
import { IDENTITY_CALENDAR, type CalendarView } from '../calendar.js'
import type { KeyState } from '../key-state.js'
import { FixedWindowBucket } from './fixed-window.js'
import { SlidingLogBucket } from './sliding-log.js'
import { SlidingWindowBucket } from './sliding-window.js'
import { TokenBucket } from './token-bucket.js'

export type { Bucket, BucketParams, BucketSpec } from './bucket.js'
export { EPSILON, bucketSpec } from './bucket.js'

/** A bucket that is also a key's state (the limiter binds its key); `spec` is shared by the rule's keys. */
export function makeBucket (algorithm: Algorithm, spec: BucketSpec, share: number, nowMs: number): KeyState & Bucket {
  switch (algorithm) {
    case 'fixed-window': return new FixedWindowBucket(spec, share, nowMs)
    case 'sliding-log': return new SlidingLogBucket(spec, share)
    case 'sliding-window': return new SlidingWindowBucket(spec, share, nowMs)
    case 'token-bucket': return new TokenBucket(spec, share, nowMs)
  }
}

/** A bucket on its own. `nowMs` is monotonic time; windowed algorithms place their windows on `cal`. */
export function createBucket (algorithm: Algorithm, params: BucketParams, nowMs: number, cal: CalendarView = IDENTITY_CALENDAR): Bucket {
  return makeBucket(algorithm, bucketSpec(params, nowMs, cal), params.share, nowMs)
}
