/**
 * A request's or reply's bytes on a transfer stream, in the daemon
 * (node-effects.ts) and the simulator alike.
 *
 * `want`, `grant`, `ack` and `none` go as msgpack arrays, their fields in a
 * fixed order (`LAYOUT`), instead of maps: a field's name took more bytes
 * than its value. Measured in the simulator (keys100, 50 seeds, seed 1,
 * 2026-11-27): a want 64 -> 34 bytes, a `none` 46 -> 25, a grant 106 -> 64,
 * an ack 75 -> 39; these four were half of all the bytes a node sent and
 * received. Since protocol version 8 the journal copies' `jrep` and `jack`
 * go as arrays too: once a jrep was deflated against the text before it
 * (replica-messages.ts), its field names were a tenth of it, and a jack
 * (72 bytes as a map) is all names and numbers. `jget` and `jcopy` (a heir's
 * reads, rare) stay maps.
 *
 * The array is `[v, t, node, epoch, inc, ...the type's fields]`; an absent
 * optional field is nil, and trailing nils are left off. The receiver turns
 * it back into the map and checks it as any message (`parseMessage`), so a
 * map is still read too (an older encoder, a test tool).
 */
import { bad, DEFAULT_BOUNDS, type MessageBounds } from './message-fields.js'
import { parseMessage, type ClusterMessage } from './messages.js'
import { wire } from './wire.js'

/** Each compact type's fields after the common five, in order. Part of the protocol. */
const LAYOUT: Readonly<Record<string, readonly string[]>> = {
  want: ['key', 'want', 'more'],
  grant: ['to', 'toEpoch', 'seq', 'items'],
  ack: ['applied', 'refused', 'toEpoch', 'ended'],
  none: [],
  jrep: ['gen', 'offset', 'data', 'z', 'd'],
  jack: ['gen', 'have', 'durable', 'z']
}
const COMMON = ['v', 't', 'node', 'epoch', 'inc'] as const

/** A message's bytes on a stream: compact for the types in LAYOUT; a map otherwise. */
export function encodeRequest (msg: { readonly t: string }): Uint8Array {
  const layout = LAYOUT[msg.t]
  if (layout === undefined) return wire.pack(msg)
  const m = msg as unknown as Record<string, unknown>
  const a: unknown[] = COMMON.map(f => m[f])
  for (const f of layout) a.push(m[f] ?? null)
  while (a.length > COMMON.length && a[a.length - 1] === null) a.pop()
  return wire.pack(a)
}

/** A message from a stream's bytes, compact or a map; checked in full (parseMessage). */
export function decodeRequest (data: Uint8Array, bounds: MessageBounds = DEFAULT_BOUNDS): ClusterMessage {
  const raw: unknown = wire.unpack(data)
  return parseMessage(Array.isArray(raw) ? expand(raw) : raw, bounds)
}

/** The map a compact message stands for. */
function expand (a: unknown[]): Record<string, unknown> {
  const t = a[1]
  const layout = typeof t === 'string' && Object.hasOwn(LAYOUT, t) ? LAYOUT[t] : undefined
  if (layout === undefined) bad(`a compact message must be one of ${Object.keys(LAYOUT).join(', ')}, got ${String(t)}`)
  if (a.length < COMMON.length || a.length > COMMON.length + layout.length) {
    bad(`a compact ${t as string} has ${COMMON.length} to ${COMMON.length + layout.length} fields, got ${a.length}`)
  }
  const m: Record<string, unknown> = {}
  COMMON.forEach((f, i) => { m[f] = a[i] })
  layout.forEach((f, i) => {
    const v = a[COMMON.length + i]
    if (v !== null && v !== undefined) m[f] = v
  })
  return m
}
