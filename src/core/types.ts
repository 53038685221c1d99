/**
 * The answer shapes of the decision core, shared by the server, the client
 * and the CLI. These are plain data so they cross the wire unchanged.
 */

export interface Decision {
  /** Whether `count` tokens were spent (acquire) or would be (peek). */
  allowed: boolean
  /** Whole tokens this node holds for the key after the decision. */
  remaining: number
  /** The rule's limit (its stock for window algorithms, its burst for token-bucket). */
  limit: number
  /** Milliseconds until every token this node has spent on the key has come back. */
  resetMs: number
  /** 0 when allowed; otherwise milliseconds until `count` tokens could be held here (-1: unknown). */
  retryAfterMs: number
  /** Name of the rule that matched the key. */
  rule: string
}

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
  peek: (key: string, count: number) => Decision
  /** A JSON-safe snapshot of the node's state, for `status`. */
  status: () => Record<string, unknown>
}
