/**
 * Builds one gossip message: the batched delta for this interval.
 *
 * A key is included when what peers know of it is stale: its held moved by
 * at least half a token, its outstanding by a token, or its rate by 10%.
 * A full sync marks keys stale as its cursor reaches them. At most `maxGossipKeys` keys,
 * and at most GOSSIP_BYTE_BUDGET bytes,
 * go in one message; the rest stay stale and spill into the next one. So a
 * message's size is bounded whatever the request rate, and traffic grows
 * with the number of changing keys, not with requests.
 */
import type { KeyState } from '../core/limiter.js'
import type { ClusterCore } from './cluster-core.js'
import { ext, keepRate } from './key-ext.js'
import { CLUSTER_VERSION, type Gossip, type GossipKey } from './messages.js'

const round = (n: number): number => Math.round(n * 1000) / 1000

function stale (sent: number, now: number, tolerance: number): boolean {
  return Number.isNaN(sent) || Math.abs(sent - now) >= tolerance
}

/** Bytes a gossip may take: under the transport's 64 KiB message bound, with room for the envelope. */
export const GOSSIP_BYTE_BUDGET = 56 * 1024

export function buildGossip (core: ClusterCore, candidates: Iterable<KeyState>, nowMs: number): Gossip {
  const keys: GossipKey[] = []
  const max = core.tuning.maxGossipKeys
  const rules: Record<string, string> = {}
  // Estimated msgpack size: strings plus a few bytes of framing each; numbers as float64.
  let bytes = 64
  for (const r of core.limiter.rules) { rules[r.name] = r.hash; bytes += r.name.length + r.hash.length + 4 }
  const acks = core.ledger.acks(core.currentEpochs())
  for (const [n, e] of acks) bytes += n.length + e.length + 14
  for (const ks of candidates) {
    const cost = Buffer.byteLength(ks.key) + 32
    if (bytes + cost > GOSSIP_BYTE_BUDGET) break
    const x = ext(ks)
    ks.bucket.advance(nowMs)
    const held = ks.bucket.held
    const outstanding = ks.bucket.outstanding(nowMs)
    const changed = stale(x.sentHeld, held, 0.5) ||
      stale(x.sentOutstanding, outstanding, 1) ||
      stale(x.sentRate, keepRate(x), Math.max(0.1 * x.sentRate, 0.01))
    if (!changed) continue
    x.sentHeld = held
    x.sentOutstanding = outstanding
    // The rate peers plan with is the one this node keeps tokens for: min(slow, fast).
    const rate = keepRate(x)
    x.sentRate = rate
    keys.push([ks.key, round(Math.max(0, held)), round(outstanding), round(rate)])
    bytes += cost
    // Stop right after the last one taken, so a resumable candidate source loses nothing.
    if (keys.length >= max) break
  }
  return { v: CLUSTER_VERSION, t: 'gossip', node: core.node, epoch: core.epoch, now: nowMs, rules, keys, acks, ...(core.leaving ? { leaving: true } : {}) }
}
