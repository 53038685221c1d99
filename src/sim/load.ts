/**
 * Load generators: the requests the simulated nodes make.
 *
 * Model. Demand is a Poisson process per node. Rather than generating one
 * process per node and merging them, we generate their superposition directly:
 * one Poisson process at the total rate, each arrival assigned to node i with
 * probability w_i(t), its share of demand at that moment. That is exact
 * (superposition and thinning of Poisson processes), yields arrivals already
 * sorted by time, and needs no merge.
 *
 * The total rate and the weights are piecewise constant; each kind is a
 * `Regime` that says when they next change. Because the exponential is
 * memoryless, when the next inter-arrival would cross a change we restart the
 * clock at the change point and draw again; that is exact too.
 *
 * Kinds: steady (equal weights); zipf and over (weights ∝ 1/rank^s over a
 * seeded permutation of the nodes; 'over' only labels a rate above the limit);
 * moving-hot (one node gets hotShare, moving every moveEveryMs); bursty (each
 * node alternates exponential on/off periods, its on-rate scaled by 1/duty so
 * its long-run mean equals the steady rate). Each request picks a key uniformly.
 */
import type { Arrival, HotMove } from './types.js'
import type { Rng } from './rng.js'

export type LoadKind = 'steady' | 'bursty' | 'zipf' | 'moving-hot' | 'over'

export interface LoadSpec {
  kind: LoadKind
  /** Node names that make requests (the load is spread over these). */
  nodes: readonly string[]
  /** Keys requested; each key gets the same total demand (the request picks a key uniformly). */
  keys: readonly string[]
  /** Total demand per key, tokens per second, summed over nodes. */
  ratePerKey: number
  startMs: number
  durationMs: number
  /** Tokens per request. @default 1 */
  count?: number
  /** Zipf exponent for 'zipf' and 'over'. @default 1.1 */
  zipfS?: number
  /** 'moving-hot': the hot node's share of demand (the rest is spread evenly) @default 0.8, and how often it moves @default 2000 */
  hotShare?: number
  moveEveryMs?: number
  /** 'bursty': mean on and off period lengths per node, ms @default 300 / 700 */
  burstOnMs?: number
  burstOffMs?: number
}

export interface Load { arrivals: Arrival[], moves: HotMove[] }

const KINDS: readonly LoadKind[] = ['steady', 'bursty', 'zipf', 'moving-hot', 'over']
const DEFAULTS = { count: 1, zipfS: 1.1, hotShare: 0.8, moveEveryMs: 2000, burstOnMs: 300, burstOffMs: 700 }
type Full = Required<LoadSpec>

/** Piecewise-constant demand: the current total rate and node choice, and when they change. */
interface Regime {
  /** Total requests per ms over all nodes and keys, now. */
  rate: number
  /** When rate or weights next change (Infinity: never). */
  nextChange: number
  /** Apply the change due at nextChange (and advance it). */
  change (): void
  /** The node for an arrival now. */
  pick (): string
}

export function generateLoad (given: LoadSpec, rng: Rng): Load {
  const spec = resolve(given)
  const { count, keys } = spec
  const end = spec.startMs + spec.durationMs
  const rate = spec.ratePerKey * keys.length / count / 1000
  const moves: HotMove[] = []
  const regime = makeRegime(spec, rate, rng, moves)
  const arrivals: Arrival[] = []
  let t = spec.startMs
  while (true) {
    const dt = regime.rate > 0 ? rng.exp(1 / regime.rate) : Infinity
    const boundary = Math.min(regime.nextChange, end)
    if (t + dt >= boundary) {
      if (boundary >= end) break
      // Memoryless: restarting at the change point loses nothing.
      t = boundary
      regime.change()
      continue
    }
    t += dt
    const node = regime.pick()
    // A single key needs no draw.
    arrivals.push({ at: t, node, key: keys.length === 1 ? keys[0] : rng.pick(keys), count })
  }
  return { arrivals, moves }
}

function makeRegime (spec: Full, rate: number, rng: Rng, moves: HotMove[]): Regime {
  const { nodes } = spec
  const n = nodes.length
  switch (spec.kind) {
    case 'steady':
      return { rate, nextChange: Infinity, change () {}, pick: () => rng.pick(nodes) }
    case 'zipf':
    case 'over': {
      // Ranks over a shuffled copy, so which node is hottest depends on the seed.
      const order = rng.shuffle([...nodes])
      const cum: number[] = []
      let sum = 0
      for (let r = 0; r < n; r++) cum.push(sum += 1 / Math.pow(r + 1, spec.zipfS))
      // Node counts are small, so a linear scan of the cumulative weights is enough.
      const pick = (): string => { const u = rng.next() * sum; return order[cum.findIndex(c => c > u)] }
      return { rate, nextChange: Infinity, change () {}, pick }
    }
    case 'moving-hot': {
      const { hotShare: share, moveEveryMs: every } = spec
      let hot = rng.int(0, n - 1)
      let k = 1
      moves.push({ at: spec.startMs, node: nodes[hot] })
      // Any node but the hot one, uniformly: an offset of 1..n-1 from it.
      const other = (): number => (hot + 1 + rng.int(0, n - 2)) % n
      return {
        rate,
        // With one node there is nowhere to move to.
        nextChange: n > 1 ? spec.startMs + every : Infinity,
        change () {
          hot = other()
          moves.push({ at: this.nextChange, node: nodes[hot] })
          // start + k * every rather than repeated addition, so move times don't drift.
          this.nextChange = spec.startMs + ++k * every
        },
        pick: () => nodes[n === 1 || rng.chance(share) ? hot : other()]
      }
    }
    case 'bursty':
      return bursty(spec, rate, rng)
  }
}

/**
 * Each node flips between on and off after exponential periods. Starting on
 * with probability duty and with a fresh exponential remaining period is the
 * stationary state (memorylessness), so there is no warm-up transient.
 */
function bursty (spec: Full, rate: number, rng: Rng): Regime {
  const { nodes, burstOnMs: onMs, burstOffMs: offMs } = spec
  const n = nodes.length
  const duty = onMs / (onMs + offMs)
  const onRate = rate / n / duty
  const isOn: boolean[] = []
  const toggleAt: number[] = []
  // The nodes that are on, for O(1) picking; pos[i] is i's index in it, or -1.
  const onList: number[] = []
  const pos: number[] = []
  for (let i = 0; i < n; i++) {
    isOn.push(rng.chance(duty))
    toggleAt.push(spec.startMs + rng.exp(isOn[i] ? onMs : offMs))
    pos.push(isOn[i] ? onList.push(i) - 1 : -1)
  }
  // Toggles are rare next to arrivals, so a linear scan for the next one is fine.
  const soonest = (): number => {
    let best = 0
    for (let i = 1; i < n; i++) if (toggleAt[i] < toggleAt[best]) best = i
    return best
  }
  let due = soonest()
  return {
    rate: onRate * onList.length,
    nextChange: toggleAt[due],
    change () {
      const i = due
      isOn[i] = !isOn[i]
      if (isOn[i]) {
        pos[i] = onList.push(i) - 1
      } else {
        // Swap-remove i from onList.
        const last = onList.pop() as number
        if (last !== i) { onList[pos[i]] = last; pos[last] = pos[i] }
        pos[i] = -1
      }
      toggleAt[i] += rng.exp(isOn[i] ? onMs : offMs)
      due = soonest()
      this.rate = onRate * onList.length
      this.nextChange = toggleAt[due]
    },
    pick: () => nodes[onList[Math.floor(rng.next() * onList.length)]]
  }
}

/** Fill in the defaults and check every field, so the generators can trust the spec. */
function resolve (spec: LoadSpec): Full {
  const s = { ...spec } as Full
  for (const k of Object.keys(DEFAULTS) as Array<keyof typeof DEFAULTS>) s[k] = spec[k] ?? DEFAULTS[k]
  const fail = (what: string): never => { throw new Error(`load spec (${String(s.kind)}): ${what}`) }
  if (!KINDS.includes(s.kind)) fail('unknown kind')
  if (s.nodes.length === 0) fail('nodes is empty')
  if (s.keys.length === 0) fail('keys is empty')
  const check = (name: keyof Full, ok: (x: number) => boolean, rule: string): void => {
    const x = s[name] as number
    if (!Number.isFinite(x) || !ok(x)) fail(`${name} must be ${rule}, got ${x}`)
  }
  check('ratePerKey', x => x >= 0, 'finite and >= 0')
  check('startMs', () => true, 'finite')
  check('durationMs', x => x > 0, 'finite and > 0')
  check('count', x => Number.isInteger(x) && x >= 1, 'an integer >= 1')
  check('hotShare', x => x >= 0 && x <= 1, 'in [0, 1]')
  check('moveEveryMs', x => x > 0, 'finite and > 0')
  check('zipfS', x => x >= 0, 'finite and >= 0')
  check('burstOnMs', x => x > 0, 'finite and > 0')
  check('burstOffMs', x => x >= 0, 'finite and >= 0')
  return s
}

/**
 * Parse a user trace: CSV lines `timestamp,node,key[,count]` (optional
 * `timestamp...` header first) or JSON lines {"at"|"timestamp", node, key,
 * count?}; blank and `#` lines are skipped. Timestamps stay as given (absolute
 * ms); the caller shifts them. Sorted by time, stably.
 */
export function parseTrace (text: string, source: string): Arrival[] {
  const out: Arrival[] = []
  let first = true
  const lines = text.split(/\r?\n/)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim()
    if (line === '' || line.startsWith('#')) continue
    const fail = (what: string): never => { throw new Error(`${source}:${i + 1}: ${what}`) }
    const isHeader = first && line.startsWith('timestamp')
    first = false
    if (isHeader) continue
    let at: unknown, node: unknown, key: unknown, count: unknown
    if (line.startsWith('{')) {
      let o: Record<string, unknown>
      try { o = JSON.parse(line) } catch (err) { return fail(`bad JSON: ${(err as Error).message}`) }
      if (o === null || typeof o !== 'object' || Array.isArray(o)) fail('JSON line is not an object')
      at = o.at ?? o.timestamp
      ;({ node, key, count } = o)
      if (at === undefined) fail('missing field "at"')
      if (typeof at !== 'number' || !Number.isFinite(at)) fail(`bad timestamp ${JSON.stringify(at)}`)
    } else {
      const f = line.split(',').map(s => s.trim())
      if (f.length < 3 || f.length > 4) fail(`expected timestamp,node,key[,count], got ${f.length} field(s)`)
      at = num(f[0]) ?? fail(`bad timestamp "${f[0]}"`)
      node = f[1]
      key = f[2]
      if (f.length === 4) count = num(f[3]) ?? fail(`bad count "${f[3]}"`)
    }
    if (node === undefined) fail('missing field "node"')
    if (key === undefined) fail('missing field "key"')
    if (typeof node !== 'string' || node === '') fail('node must be a non-empty string')
    if (typeof key !== 'string' || key === '') fail('key must be a non-empty string')
    if (Buffer.byteLength(key as string) > 256) fail('key is longer than 256 bytes')
    count ??= 1
    if (!Number.isInteger(count) || (count as number) < 1) fail(`count must be a positive integer, got ${JSON.stringify(count)}`)
    out.push({ at: at as number, node: node as string, key: key as string, count: count as number })
  }
  // Array.prototype.sort is stable, so equal timestamps keep file order.
  return out.sort((a, b) => a.at - b.at)
}

/** A strict decimal number (Number() alone would take '', hex and 'Infinity'). */
function num (s: string): number | undefined {
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s) ? Number(s) : undefined
}

/** Total tokens requested per node. */
export function demandByNode (arrivals: readonly Arrival[]): Map<string, number> {
  const m = new Map<string, number>()
  for (const a of arrivals) m.set(a.node, (m.get(a.node) ?? 0) + a.count)
  return m
}
