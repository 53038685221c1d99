/**
 * The answer to an acquire or a peek. Plain data, so it crosses the wire
 * unchanged: the daemon's decision core produces it, the client returns it.
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
