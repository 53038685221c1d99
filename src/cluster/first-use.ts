/**
 * The first request for a key at a node that holds none of it (issue 13):
 * a short wait for a transfer instead of a denial. Pure, like the core.
 */
import type { ClusterCore } from './cluster-core.js'
import { ext } from './key-ext.js'

/**
 * How long a request without `waitMs` may wait instead (0: answer now).
 * Only for the first request for a key at this node (a glob key homed
 * elsewhere, any key at a member that joined with nothing, or a home whose
 * stock a peer took first), and those that arrive before its wait ends, all
 * until the same deadline, while no tokens came; only with an alive
 * agreeing peer.
 * So "new here" never denies a key with quota left. Bounded by
 * `tuning.firstUseWaitMs`; the want goes out on a tick the driver runs at
 * once (`LocalQuota`'s `urgent`). Waiting never admits anything by itself:
 * the request is decided by the limiter when tokens arrive, as any waiter.
 */
export function firstUseWaitMs (c: ClusterCore, key: string, count: number, nowMs: number): number {
  const max = c.tuning.firstUseWaitMs
  if (max <= 0 || c.phase !== 'running' || c.peers.size === 0) return 0
  const ks = c.limiter.existing(key) ?? c.limiter.keyState(key, count, nowMs)
  if (ks.bucket.held >= count) return 0
  const x = ext(ks)
  // One first use per key and node: the first request opens a window of one wait; requests within it wait too,
  // bounded by the same deadline. After it (or once tokens came), requests are answered at once as before.
  if (x.lastDemandAt === -Infinity) x.firstUseUntil = nowMs + max
  if (x.transfersIn > 0 || nowMs >= x.firstUseUntil || (ks.rule.config.mode === 'soft' && c.isolated(nowMs))) return 0
  // Not "only while peers are known to hold enough": right after a first use elsewhere, gossip may not yet say where the
  // tokens went (the home says 0, the taker has not spoken). A wait that finds nothing costs its bound, never a wrong answer.
  return c.peers.alive(nowMs).some(p => !p.leaving && c.agrees(p, ks)) ? x.firstUseUntil - nowMs : 0
}
