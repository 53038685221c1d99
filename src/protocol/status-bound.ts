/**
 * Bounds the size of a `status` reply. What `status` holds is up to the node
 * (service.status(): rules, active keys, cluster keys, peers), and it grows
 * with the configuration and with key lengths: 100 keys of 200 characters,
 * listed twice, is already tens of kilobytes. A client asking for it in a loop
 * must not make the daemon build replies of unbounded size, so the reply is
 * cut here, in the protocol layer, without the node's help:
 *
 * - Every array keeps at most `items` entries, every object at most `entries`
 *   fields, every string at most `chars` characters, nesting at most
 *   MAX_DEPTH levels; and an overall budget stops a pathological shape
 *   early.
 * - The trimmed copy is encoded; if the frame is still above
 *   STATUS_MAX_BYTES, the next, tighter level is tried.
 * - If anything was cut, the status carries `truncated: true`.
 *
 * The node's own lists are already capped at 100 entries, so a normal status
 * goes out whole.
 */

/** Largest status reply frame, in bytes. */
export const STATUS_MAX_BYTES = 256 * 1024

interface Level { items: number, entries: number, chars: number }

const LEVELS: readonly Level[] = [
  { items: 1000, entries: 1000, chars: 1024 },
  { items: 100, entries: 200, chars: 256 },
  { items: 20, entries: 64, chars: 128 },
  { items: 5, entries: 32, chars: 64 },
  { items: 0, entries: 16, chars: 32 }
]

const MAX_DEPTH = 8
/** Rough bytes one trimmed copy may hold before everything after is cut. */
const BUDGET_BYTES = 2 * STATUS_MAX_BYTES

interface Trim extends Level {
  budget: number
  truncated: boolean
}

/** Encode `status` with `encode`, trimmed until the frame fits STATUS_MAX_BYTES. */
export function boundStatus (status: Record<string, unknown>, encode: (status: Record<string, unknown>) => Buffer): Buffer {
  for (const level of LEVELS) {
    const t: Trim = { ...level, budget: BUDGET_BYTES, truncated: false }
    const trimmed = trim(status, 0, t)
    const s = (trimmed !== null && typeof trimmed === 'object' && !Array.isArray(trimmed) ? trimmed : {}) as Record<string, unknown>
    if (t.truncated) s.truncated = true
    const frame = encode(s)
    if (frame.length <= STATUS_MAX_BYTES) return frame
  }
  return encode({ truncated: true, error: 'the status is too large to send' })
}

function trim (v: unknown, depth: number, t: Trim): unknown {
  switch (typeof v) {
    case 'number':
    case 'boolean':
      t.budget -= 9
      return v
    case 'bigint':
      t.budget -= 9
      return Number(v)
    case 'string':
      if (v.length > t.chars) t.truncated = true
      t.budget -= Math.min(v.length, t.chars) + 5
      return v.length > t.chars ? v.slice(0, t.chars) : v
    case 'object':
      break
    default:
      return undefined // functions, symbols: not JSON, not sent
  }
  if (v === null) return null
  if (depth >= MAX_DEPTH || t.budget <= 0) {
    t.truncated = true
    return null
  }
  if (Array.isArray(v)) {
    const n = Math.min(v.length, t.items)
    const out: unknown[] = []
    for (let i = 0; i < n && t.budget > 0; i++) out.push(trim(v[i], depth + 1, t) ?? null)
    if (out.length < v.length) t.truncated = true
    return out
  }
  const toJSON = (v as { toJSON?: unknown }).toJSON
  if (typeof toJSON === 'function') return trim(toJSON.call(v), depth + 1, t)
  const out: Record<string, unknown> = {}
  let n = 0
  for (const k in v) {
    if (!Object.hasOwn(v, k) || k === '__proto__') continue
    if (n >= t.entries || t.budget <= 0) {
      t.truncated = true
      break
    }
    const x = trim((v as Record<string, unknown>)[k], depth + 1, t)
    if (x === undefined) continue
    out[k.length > t.chars ? k.slice(0, t.chars) : k] = x
    t.budget -= Math.min(k.length, t.chars) + 5
    n++
  }
  return out
}
