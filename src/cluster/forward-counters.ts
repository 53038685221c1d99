/** The forwarding counters a node reports in `status` (forward.ts, forward-overflow.ts). */

/** Counters for status: a member's forwarded acquires, and a seed's served ones. */
export interface ForwardCounters {
  forwarded: number
  forwardAllowed: number
  /** No answer in time, or an answer that was not a decision. */
  forwardFailed: number
  /** At a seed: members' acquires decided here. */
  forwardServed: number
  /** Acquires sent past a seed that left forwards unanswered (see `unanswered`). */
  forwardRoutedAround: number
  /** At a member: acquires admitted from credit (forward-credit.ts), and tokens of credit received. */
  forwardFromCredit: number
  forwardCredit: number
  /** At a seed: tokens spent as credit for members. */
  forwardCreditGiven: number
  /** At a member: acquires sent again naming their key, after a seed answered that it did not know its number (forward-names.ts). */
  forwardRenamed: number
  /** At a seed: acquires (its clients' and its members') sent on to the key's other seed for want of tokens here (`partnerFor`). */
  forwardSentOn: number
  /** At a member: acquires denied from a seed's last denial of their key, kept (`kept`). */
  forwardKeptDenials: number
  /** At a member: acquires of a rule it decides itself, sent to a seed for want of tokens here (forward-overflow.ts). */
  forwardOverflow: number
}

export function newForwardCounters (): ForwardCounters {
  return {
    forwarded: 0, forwardAllowed: 0, forwardFailed: 0, forwardServed: 0, forwardRoutedAround: 0, forwardFromCredit: 0, forwardCredit: 0, forwardCreditGiven: 0, forwardRenamed: 0, forwardSentOn: 0, forwardKeptDenials: 0, forwardOverflow: 0
  }
}
