/**
 * The answer shapes of the decision core, shared by the server and the CLI.
 * `Decision` itself is the client package's, since it crosses the wire.
 */
import type { Decision } from '@quotad/client'

export type { Decision }

/** A queued (waiting) acquire. Resolves with the final decision; never rejects. */
export interface WaitHandle {
  readonly waiting: true
  readonly promise: Promise<Decision>
  /** Withdraw the request (its client went away). Spends nothing. Idempotent. */
  cancel: () => void
}

export type AcquireResult = Decision | WaitHandle

export function isWaitHandle (r: AcquireResult): r is WaitHandle {
  return (r as WaitHandle).waiting === true
}

/**
 * What the Unix-socket server needs from a node. The daemon provides it; tests
 * may provide their own. Methods throw `QuotadError` (synchronously) for bad
 * input: unknown key, key too long, table full, count too large, queue full.
 */
export interface QuotaService {
  acquire: (key: string, count: number, waitMs: number) => AcquireResult
  /** An acquire answered now, never queued (a batch item). Absent: `acquire` with waitMs 0. */
  acquireNow?: (key: string, count: number) => Decision
  peek: (key: string, count: number) => Decision
  /**
   * Whether `key`'s acquires are decided elsewhere (a member's `decide:
   * "seeds"` rule): only an acquire of its own is answered then, never a
   * batch item or a peek, which must answer at once.
   */
  decidedElsewhere?: (key: string) => boolean
  /** A JSON-safe snapshot of the node's state, for `status`. */
  status: () => Record<string, unknown>
}
