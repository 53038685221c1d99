/**
 * Checks transport options up front, undici-style: every bad value is named
 * with the constraint it breaks, all at once, as one E_CONFIG_INVALID error;
 * defaults are filled in here so the transport never sees `undefined`.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { ErrorCodes, QuotadError } from '../../errors.js'
import type { ConfigIssue } from '../../errors.js'
import { TRANSPORT_DEFAULTS } from './types.js'
import type { TransportOptions } from './types.js'

export type ResolvedOptions = Required<Omit<TransportOptions, 'onEvent' | 'threadNice'>> & Pick<TransportOptions, 'onEvent'>

/** The `/p2p` multiaddr protocol code. */
const P2P = 421

/** The multiaddr without a trailing `/p2p/<id>`, in canonical string form. */
export function stripPeer (addr: string): string {
  const ma = multiaddr(addr)
  return ma.getPeerId() === null ? ma.toString() : ma.decapsulateCode(P2P).toString()
}

export function validateOptions (opts: TransportOptions): ResolvedOptions {
  const issues: ConfigIssue[] = []
  const bad = (path: string, message: string): void => { issues.push({ path, message }) }
  const o = { ...TRANSPORT_DEFAULTS, ...stripUndefined(opts) } as ResolvedOptions
  for (const k of ['maxMessageBytes', 'maxRequestBytes', 'dialTimeoutMs', 'minBackoffMs', 'maxBackoffMs', 'seedMaxBackoffMs', 'inboundTimeoutMs'] as const) {
    const v = o[k]
    if (!Number.isSafeInteger(v) || v <= 0) bad(k, `must be a positive integer, got ${String(v)}`)
  }
  if (typeof o.maxGossipPerSec !== 'number' || !Number.isFinite(o.maxGossipPerSec) || o.maxGossipPerSec <= 0) bad('maxGossipPerSec', `must be a positive number, got ${String(o.maxGossipPerSec)}`)
  if (o.maxBackoffMs < o.minBackoffMs) bad('maxBackoffMs', `must be >= minBackoffMs (${o.minBackoffMs}), got ${o.maxBackoffMs}`)
  if (o.psk !== null && (!(o.psk instanceof Uint8Array) || o.psk.byteLength !== 32)) {
    bad('psk', `must be the 32 key bytes from parseSwarmKey, got ${o.psk instanceof Uint8Array ? `${o.psk.byteLength} bytes` : typeof o.psk}`)
  }
  if (typeof o.topic !== 'string' || o.topic === '') bad('topic', 'must be a non-empty string')
  if (o.publishTopic !== undefined && (typeof o.publishTopic !== 'string' || o.publishTopic === '')) bad('publishTopic', 'must be a non-empty string')
  for (const k of ['alsoSubscribe', 'alsoPublish'] as const) {
    const v = o[k]
    if (v !== undefined && (!Array.isArray(v) || v.some(t => typeof t !== 'string' || t === ''))) bad(k, 'must be an array of non-empty strings')
  }
  if (typeof o.dataDir !== 'string' || o.dataDir === '') bad('dataDir', 'must be a non-empty path')
  if (!Array.isArray(o.seeds)) bad('seeds', 'must be an array of multiaddrs')
  const addrs = [['listen', o.listen], ...(Array.isArray(o.seeds) ? o.seeds : []).map((s, i) => [`seeds[${i}]`, s])]
  for (const [path, addr] of addrs) {
    try {
      stripPeer(addr)
    } catch (err) {
      bad(path, `not a multiaddr (${(err as Error).message}), got ${JSON.stringify(addr)}`)
    }
  }
  o.publishTopic ??= o.topic
  o.alsoSubscribe ??= []
  o.alsoPublish ??= []
  if (issues.length > 0) {
    throw new QuotadError(ErrorCodes.CONFIG_INVALID, 'invalid transport options:\n' + issues.map(i => `  ${i.path}: ${i.message}`).join('\n'), issues)
  }
  return o
}

function stripUndefined<T extends object> (obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>
}
