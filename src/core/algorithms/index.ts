/** The one place that maps an algorithm name to its bucket class. */
import type { Algorithm } from '../../config/types.js'
import type { Bucket, BucketParams } from './bucket.js'
import { IDENTITY_CALENDAR, type CalendarView } from '../calendar.js'
import { FixedWindowBucket } from './fixed-window.js'
import { SlidingLogBucket } from './sliding-log.js'
import { SlidingWindowBucket } from './sliding-window.js'
import { TokenBucket } from './token-bucket.js'

export type { Bucket, BucketParams } from './bucket.js'
export { EPSILON } from './bucket.js'

/** `nowMs` is monotonic time; windowed algorithms place their windows on `cal`. */
export function createBucket (algorithm: Algorithm, params: BucketParams, nowMs: number, cal: CalendarView = IDENTITY_CALENDAR): Bucket {
  switch (algorithm) {
    case 'fixed-window': return new FixedWindowBucket(params, nowMs, cal)
    case 'sliding-log': return new SlidingLogBucket(params, nowMs)
    case 'sliding-window': return new SlidingWindowBucket(params, nowMs, cal)
    case 'token-bucket': return new TokenBucket(params, nowMs)
  }
}
