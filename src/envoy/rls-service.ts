/**
 * What quotad answers to Envoy's ShouldRateLimit, apart from gRPC (the
 * transport is rls-server.ts). Each descriptor is looked up as
 * envoyproxy/ratelimit does (descriptors.ts) and, where a limit applies,
 * decided by the node's QuotaService under the key envoy/keys.ts builds:
 * the same `acquire` (and `peek`) the Unix-socket server calls, so the
 * cluster's conserved tokens and hard cap hold for Envoy too.
 *
 * The answer follows envoyproxy/ratelimit (src/service/ratelimit.go):
 * - every descriptor gets a status; `overall_code` is OVER_LIMIT if any
 *   descriptor not in shadow mode is;
 * - a descriptor no limit matches (or an unknown domain) is OK with no
 *   current_limit; `unlimited` is OK with limit_remaining 2^32-1;
 * - a descriptor's `hits_addend` wins over the request's; 0 at the request
 *   means 1, 0 at a descriptor checks without counting (a peek of 1);
 * - over the limit: limit_remaining 0; requests_per_unit 0 is always over;
 * - with `responseHeaders`, RateLimit-Limit/-Remaining/-Reset of the
 *   descriptor with the least remaining.
 * Where quotad differs: limit_remaining is what this node holds now (its
 * part of the cluster's stock), and duration_until_reset is when what this
 * node spent comes back (or, when denied, when it may admit again).
 *
 * Each descriptor is acquired on its own, as envoyproxy/ratelimit counts
 * each: an allowed one spends even when another is over the limit.
 */
import type { Clock } from '../clock.js'
import type { EnvoyConfig, EnvoyLimit, LimitsConfig } from '../config/types.js'
import { UNIT_MS } from '../config/envoy-config.js'
import { isWaitHandle, type Decision, type QuotaService, type WaitHandle } from '../core/types.js'
import { ErrorCodes, QuotadError, isQuotadError } from '../errors.js'
import { DescriptorIndex, type Found } from './descriptors.js'
import { descriptorKey } from './keys.js'
import type { RlsDescriptorStatus, RlsDuration, RlsRequest, RlsResponse, RlsUnit } from './rls-proto.js'

const MAX_U32 = 4_294_967_295
/** Most entries in one descriptor: a request's descriptor is a short path, never a list of data. */
export const MAX_ENTRIES = 64

export interface RlsServiceOptions {
  envoy: EnvoyConfig | undefined
  service: QuotaService
  limits: LimitsConfig
  /** The wall clock places a `requests_per_unit: 0` limit's window (nothing is counted for it). */
  clock: Clock
}

/** A response that waits for some descriptor's tokens (a key new at this node, or one decided at a seed). */
export interface PendingResponse {
  readonly promise: Promise<RlsResponse>
  /** The caller went away: withdraw the waiting acquires (they spend nothing). */
  cancel: () => void
}

interface Plan {
  found: Found
  key: string
  hits: number
}

type Part = RlsDescriptorStatus | { limit: EnvoyLimit, handle: WaitHandle }

export class RlsService {
  private index: DescriptorIndex
  private envoy: EnvoyConfig | undefined
  private readonly service: QuotaService
  private readonly limits: LimitsConfig
  private readonly clock: Clock

  constructor (opts: RlsServiceOptions) {
    this.envoy = opts.envoy
    this.index = new DescriptorIndex(opts.envoy)
    this.service = opts.service
    this.limits = opts.limits
    this.clock = opts.clock
  }

  /** New descriptors (a reload); the daemon sets the rules they made in the same turn. */
  setConfig (envoy: EnvoyConfig | undefined): void {
    this.envoy = envoy
    this.index = new DescriptorIndex(envoy)
  }

  /**
   * The answer to one request, now or pending.
   * @throws QuotadError for a bad request (E_BAD_ARGUMENT, E_KEY_TOO_LONG, E_BATCH_TOO_LARGE) or a node that
   * can't take it (E_KEY_TABLE_FULL, E_QUEUE_FULL, ...); nothing was spent then, except by descriptors before
   * a full table.
   */
  answer (req: RlsRequest): RlsResponse | PendingResponse {
    const plans = this.plan(req)
    const parts: Part[] = []
    try {
      for (const p of plans) parts.push(this.decide(p))
    } catch (err) {
      for (const part of parts) if ('handle' in part) part.handle.cancel()
      throw err
    }
    const waiting = parts.filter((p): p is { limit: EnvoyLimit, handle: WaitHandle } => 'handle' in p)
    if (waiting.length === 0) return this.response(parts as RlsDescriptorStatus[])
    return {
      promise: Promise.all(parts.map(async p => 'handle' in p ? this.status(p.limit, await p.handle.promise) : p)).then(s => this.response(s)),
      cancel: () => { for (const w of waiting) w.handle.cancel() }
    }
  }

  /** Check the whole request, and find each descriptor's limit and key, before anything is spent. */
  private plan (req: RlsRequest): Plan[] {
    if (req.domain === '') throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'rate limit domain must not be empty')
    if (req.descriptors.length === 0) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, 'rate limit descriptor list must not be empty')
    if (req.descriptors.length > this.limits.maxBatchItems) {
      throw new QuotadError(ErrorCodes.BATCH_TOO_LARGE, `${req.descriptors.length} descriptors; at most ${this.limits.maxBatchItems} (limits.maxBatchItems)`)
    }
    return req.descriptors.map((d, i) => {
      if (d.entries.length === 0) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `descriptors[${i}] has no entries`)
      if (d.entries.length > MAX_ENTRIES) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `descriptors[${i}] has ${d.entries.length} entries; at most ${MAX_ENTRIES}`)
      if (d.entries.some(e => e.key === '')) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `descriptors[${i}] has an entry with an empty key`)
      const found = this.index.lookup(req.domain, d.entries)
      const hits = d.hits_addend !== null ? d.hits_addend.value : Math.max(1, req.hits_addend)
      if (found === undefined || found === 'unlimited' || found.rule === null) return { found, key: '', hits }
      const key = descriptorKey(found.rule, req.domain, d.entries)
      if (Buffer.byteLength(key) > this.limits.maxKeyBytes) {
        throw new QuotadError(ErrorCodes.KEY_TOO_LONG, `descriptors[${i}] makes a key of ${Buffer.byteLength(key)} bytes; at most ${this.limits.maxKeyBytes} (limits.maxKeyBytes)`)
      }
      return { found, key, hits }
    })
  }

  private decide ({ found, key, hits }: Plan): Part {
    if (found === undefined) return { code: 'OK', limit_remaining: 0 }
    if (found === 'unlimited') return { code: 'OK', limit_remaining: MAX_U32 }
    if (found.rule === null) return this.over(found, this.windowLeftMs(found))
    if (hits === 0) return this.status(found, this.service.peek(key, 1))
    let r
    try {
      r = this.service.acquire(key, hits, 0)
    } catch (err) {
      // More than the rule could ever admit at once: over the limit, as envoyproxy/ratelimit says.
      if (isQuotadError(err) && err.code === ErrorCodes.COUNT_TOO_LARGE) return this.over(found, 0)
      throw err
    }
    return isWaitHandle(r) ? { limit: found, handle: r } : this.status(found, r)
  }

  private status (limit: EnvoyLimit, d: Decision): RlsDescriptorStatus {
    if (!d.allowed) return this.over(limit, Math.max(d.resetMs, d.retryAfterMs))
    return { code: 'OK', current_limit: currentLimit(limit), limit_remaining: Math.min(MAX_U32, Math.max(0, Math.floor(d.remaining))), duration_until_reset: duration(d.resetMs) }
  }

  private over (limit: EnvoyLimit, resetMs: number): RlsDescriptorStatus {
    return { code: limit.shadowMode ? 'OK' : 'OVER_LIMIT', current_limit: currentLimit(limit), limit_remaining: 0, duration_until_reset: duration(resetMs) }
  }

  /** What is left of the calendar window of a limit's unit, as envoyproxy/ratelimit's CalculateReset. */
  private windowLeftMs (limit: EnvoyLimit): number {
    if (limit.unit === undefined) return 0
    const unitMs = UNIT_MS[limit.unit]
    return unitMs - this.clock.now() % unitMs
  }

  private response (statuses: RlsDescriptorStatus[]): RlsResponse {
    const over = statuses.some(s => s.code === 'OVER_LIMIT')
    const out: RlsResponse = { overall_code: over ? 'OVER_LIMIT' : 'OK', statuses, response_headers_to_add: [] }
    if (this.envoy?.responseHeaders === true) {
      let min: RlsDescriptorStatus | undefined
      for (const s of statuses) if (s.current_limit !== undefined && (min === undefined || s.limit_remaining < min.limit_remaining)) min = s
      if (min?.current_limit !== undefined) {
        const resetS = Math.ceil(((min.duration_until_reset?.seconds ?? 0) * 1000 + (min.duration_until_reset?.nanos ?? 0) / 1e6) / 1000)
        out.response_headers_to_add = [
          { key: 'RateLimit-Limit', value: String(min.current_limit.requests_per_unit) },
          { key: 'RateLimit-Remaining', value: String(min.limit_remaining) },
          { key: 'RateLimit-Reset', value: String(resetS) }
        ]
      }
    }
    return out
  }
}

function currentLimit (limit: EnvoyLimit): { name: string, requests_per_unit: number, unit: RlsUnit } {
  return { name: limit.name ?? '', requests_per_unit: Math.min(MAX_U32, limit.requestsPerUnit), unit: limit.unit === undefined ? 'UNKNOWN' : limit.unit.toUpperCase() as RlsUnit }
}

function duration (ms: number): RlsDuration {
  const whole = Math.max(0, Math.ceil(ms))
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 }
}
