/**
 * Keeps a connection to every seed address. Seeds come from the config file
 * as bare multiaddrs (no peer id), so each seed's peer id is learned from the
 * first successful dial and used for later dials: that lets libp2p reuse an
 * existing connection (say, one the seed opened to us) instead of opening a
 * duplicate, and lets us notice that a seed is already connected.
 *
 * Each seed is in one of three states: idle (connected, or stopped), dialling
 * (one dial in flight, never two), or waiting (one timer armed). A failed dial
 * waits `min * 2^(failures-1)` capped at `min(max, seedMax)`, with equal
 * jitter (half fixed, half random) so restarted nodes do not redial in
 * lock-step. A connection that drops soon after it was made counts as a
 * failure too, so a peer that accepts and immediately drops us is redialled
 * with growing backoff instead of in a tight loop.
 *
 * Seeds are the cluster's quorum: while one is cut off, nothing flows to it,
 * not even the gossip that settles grants (docs/design/2026-11-reclaim.md, finding 4).
 * So their cap is short (1.5 s by default, not 10 s: a heal is noticed
 * within about that), and a connection that comes in is taken as a sign the
 * network is back: seeds still waiting are redialled at once.
 *
 * No libp2p import: dialling is a callback; time and randomness are injected.
 */

export interface RedialerOptions {
  seeds: string[]
  /** Dial `addr` (with `/p2p/<peerId>` appended when known); resolves with the remote peer id. */
  dial: (addr: string, peerId: string | undefined) => Promise<string>
  isConnected: (peerId: string) => boolean
  /** Our own peer id: a seed that turns out to be us is dropped. */
  selfId: string
  minBackoffMs: number
  maxBackoffMs: number
  /** A lower cap for seeds (all this redialer dials). @default no lower cap */
  seedMaxBackoffMs?: number
  random?: () => number
  now?: () => number
  onEvent?: (name: string, fields: Record<string, unknown>) => void
}

/** A connection that lasted this long resets the backoff. */
export const STABLE_MS = 2000

interface Seed {
  addr: string
  peerId: string | undefined
  failures: number
  connectedAt: number
  dialling: boolean
  timer: NodeJS.Timeout | undefined
  self: boolean
}

export class Redialer {
  private readonly opts: RedialerOptions
  private readonly seeds: Seed[]
  private readonly random: () => number
  private readonly now: () => number
  private running = false

  constructor (opts: RedialerOptions) {
    this.opts = opts
    this.random = opts.random ?? Math.random
    this.now = opts.now ?? (() => performance.now())
    this.seeds = [...new Set(opts.seeds)].map(addr => ({
      addr, peerId: undefined, failures: 0, connectedAt: 0, dialling: false, timer: undefined, self: false
    }))
  }

  start (): void {
    this.running = true
    for (const s of this.seeds) this.attempt(s)
  }

  stop (): void {
    this.running = false
    for (const s of this.seeds) {
      if (s.timer !== undefined) clearTimeout(s.timer)
      s.timer = undefined
    }
  }

  /** The delay before retry number `failures` (1-based), jitter included. */
  backoff (failures: number): number {
    const { minBackoffMs: min } = this.opts
    const max = Math.min(this.opts.maxBackoffMs, this.opts.seedMaxBackoffMs ?? Infinity)
    const base = Math.min(max, min * 2 ** Math.min(Math.max(failures - 1, 0), 30))
    return Math.round(base / 2 + this.random() * base / 2)
  }

  /** A peer's last connection closed: redial it if it is one of our seeds. */
  peerDisconnected (peerId: string): void {
    if (!this.running) return
    for (const s of this.seeds) {
      if (s.peerId !== peerId || s.dialling || s.timer !== undefined) continue
      // a connection that did not last counts as one more failure
      const lived = this.now() - s.connectedAt
      s.failures = lived < STABLE_MS ? s.failures + 1 : 1
      this.schedule(s)
    }
  }

  /**
   * A peer connected (it dialled us, or we it). If it is a seed, its wait
   * ends, and its backoff starts over once the connection has lasted
   * `STABLE_MS` (one that drops at once still counts as a failure, so a peer
   * that accepts and drops us is not redialled in a tight loop). Either way
   * the network may have healed: every seed still waiting to be redialled is
   * dialled now (its failures stay counted, so one still unreachable goes
   * back to its backoff).
   */
  peerConnected (peerId: string): void {
    if (!this.running) return
    for (const s of this.seeds) {
      if (s.peerId === peerId) s.connectedAt = this.now()
      if (s.timer === undefined || s.dialling) continue
      clearTimeout(s.timer)
      s.timer = undefined
      this.opts.onEvent?.('redial-now', { addr: s.addr, peerId: s.peerId, failures: s.failures, because: peerId })
      this.attempt(s)
    }
  }

  /** A seed answered a manual dial: remember its peer id. */
  learned (addr: string, peerId: string): void {
    for (const s of this.seeds) {
      if (s.addr === addr && !s.self) {
        s.peerId = peerId
        s.connectedAt = this.now()
      }
    }
  }

  /** Seed address -> learned peer id (undefined until the first successful dial). */
  snapshot (): Array<{ addr: string, peerId: string | undefined, failures: number }> {
    return this.seeds.filter(s => !s.self).map(s => ({ addr: s.addr, peerId: s.peerId, failures: s.failures }))
  }

  private schedule (s: Seed): void {
    if (!this.running || s.self || s.timer !== undefined) return
    const delay = this.backoff(s.failures)
    s.timer = setTimeout(() => {
      s.timer = undefined
      this.attempt(s)
    }, delay)
    s.timer.unref()
    this.opts.onEvent?.('redial-scheduled', { addr: s.addr, peerId: s.peerId, failures: s.failures, delayMs: delay })
  }

  private attempt (s: Seed): void {
    if (!this.running || s.self || s.dialling) return
    if (s.peerId !== undefined && this.opts.isConnected(s.peerId)) return
    s.dialling = true
    const known = s.peerId
    this.opts.dial(s.addr, known).then(peerId => {
      s.dialling = false
      if (!this.running) return
      if (peerId === this.opts.selfId) {
        s.self = true
        this.opts.onEvent?.('seed-is-self', { addr: s.addr })
        return
      }
      s.peerId = peerId
      s.connectedAt = this.now()
      // the connection may already be gone; the disconnect event came while
      // we were dialling and found nothing to do
      if (!this.opts.isConnected(peerId)) {
        s.failures++
        this.schedule(s)
      }
    }, (err: unknown) => {
      s.dialling = false
      if (!this.running) return
      s.failures++
      // the seed may have a new identity (wiped data dir): dial bare next time
      if (known !== undefined) s.peerId = undefined
      this.opts.onEvent?.('dial-failed', {
        addr: s.addr, peerId: known, failures: s.failures, error: (err as Error)?.message ?? String(err)
      })
      this.schedule(s)
    })
  }
}
