/**
 * Sabotage for the marks tests (estate-marks.ts): while `fn` runs, every
 * giver settles its waiting grants as if the mark were 0, so it takes back
 * every one of them, also those the crashed node's books hold. The token
 * audit must then see tokens created.
 */
import { EstateMarks } from '../../src/cluster/estate-marks.js'

export function ignoringMarks<T> (fn: () => T): T {
  const proto = EstateMarks.prototype as unknown as { resolve: (id: string, h: unknown, mark: number, nowMs: number) => void }
  const resolve = proto.resolve
  proto.resolve = function (this: EstateMarks, id: string, h: unknown, _mark: number, nowMs: number) {
    resolve.call(this, id, h, 0, nowMs)
  }
  try {
    return fn()
  } finally {
    proto.resolve = resolve
  }
}
