// Load generators: determinism, rates and shares within statistical tolerance,
// moving hot spots, bursts, and trace parsing. Seeds are fixed, so the
// tolerances guard against a wrong model, not against flakiness.
import test from 'ava'
import { generateLoad, parseTrace, demandByNode, type LoadSpec } from '../src/sim/load.js'
import { Rng } from '../src/sim/rng.js'
import type { Arrival } from '../src/sim/types.js'

const NODES = ['a', 'b', 'c', 'd', 'e']
const T0 = 1_000_000

function spec (over: Partial<LoadSpec> = {}): LoadSpec {
  return { kind: 'steady', nodes: NODES, keys: ['k1', 'k2', 'k3'], ratePerKey: 1000, startMs: T0, durationMs: 10_000, ...over }
}

function sorted (xs: readonly Arrival[]): boolean {
  for (let i = 1; i < xs.length; i++) if (xs[i].at < xs[i - 1].at) return false
  return true
}

function near (actual: number, expected: number, rel: number): boolean {
  return Math.abs(actual - expected) <= rel * expected
}

test('Rng: next, int and chance are unchanged; exp, pick and shuffle behave', t => {
  const r = new Rng(1)
  t.deepEqual([r.next(), r.next(), r.next()], [0.6270739405881613, 0.002735721180215478, 0.5274470399599522])
  const q = new Rng(42)
  t.deepEqual([q.int(0, 9), q.int(0, 9), q.int(0, 9), q.chance(0.5), q.chance(0.5)], [6, 4, 8, false, true])

  const e = new Rng(3)
  let sum = 0
  for (let i = 0; i < 100_000; i++) {
    const x = e.exp(50)
    t.true(x >= 0 && Number.isFinite(x))
    sum += x
  }
  t.true(near(sum / 100_000, 50, 0.02))

  const seen = new Set<string>()
  for (let i = 0; i < 200; i++) seen.add(e.pick(['x', 'y', 'z']))
  t.deepEqual([...seen].sort(), ['x', 'y', 'z'])
  t.throws(() => e.pick([]), { message: /empty/ })

  const xs = [1, 2, 3, 4, 5, 6, 7, 8]
  const out = e.shuffle(xs)
  t.is(out, xs)
  t.deepEqual([...xs].sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8])
  t.notDeepEqual(new Rng(9).shuffle([...xs]), new Rng(10).shuffle([...xs]))
})

test('same seed gives identical arrivals; a different seed different ones', t => {
  for (const kind of ['steady', 'bursty', 'zipf', 'moving-hot', 'over'] as const) {
    const a = generateLoad(spec({ kind }), new Rng(11))
    const b = generateLoad(spec({ kind }), new Rng(11))
    const c = generateLoad(spec({ kind }), new Rng(12))
    t.deepEqual(a, b, kind)
    t.notDeepEqual(a.arrivals, c.arrivals, kind)
  }
})

test('steady: total, per-node and per-key demand match the rate; times sorted and in range', t => {
  const { arrivals, moves } = generateLoad(spec({ count: 4 }), new Rng(5))
  t.deepEqual(moves, [])
  // 3 keys * 1000 tokens/s * 10 s = 30000 tokens = 7500 requests of 4.
  t.true(near(arrivals.length, 7500, 0.05), `${arrivals.length}`)
  t.true(arrivals.every(a => a.count === 4 && a.at >= T0 && a.at < T0 + 10_000))
  t.true(sorted(arrivals))
  const byNode = demandByNode(arrivals)
  t.deepEqual([...byNode.keys()].sort(), NODES)
  for (const n of NODES) t.true(near(byNode.get(n) ?? 0, 30_000 / 5, 0.1), n)
  const byKey = new Map<string, number>()
  for (const a of arrivals) byKey.set(a.key, (byKey.get(a.key) ?? 0) + a.count)
  for (const k of ['k1', 'k2', 'k3']) t.true(near(byKey.get(k) ?? 0, 10_000, 0.1), k)
})

test('every kind delivers rate * duration in total', t => {
  for (const kind of ['steady', 'bursty', 'zipf', 'moving-hot', 'over'] as const) {
    // Bursty's total varies with the on/off phases, so give it more cycles.
    const durationMs = kind === 'bursty' ? 200_000 : 20_000
    const { arrivals } = generateLoad(spec({ kind, durationMs, ratePerKey: 200 }), new Rng(21))
    const expected = 3 * 200 * durationMs / 1000
    t.true(near(arrivals.length, expected, 0.05), `${kind}: ${arrivals.length} vs ${expected}`)
    t.true(sorted(arrivals), kind)
  }
})

test('zipf: the hottest node gets about 1/H(n, s); which node varies by seed; over is the same process', t => {
  const s = 1.1
  let h = 0
  for (let r = 1; r <= NODES.length; r++) h += 1 / Math.pow(r, s)
  const hottest = new Set<string>()
  for (let seed = 1; seed <= 12; seed++) {
    const { arrivals } = generateLoad(spec({ kind: 'zipf', zipfS: s }), new Rng(seed))
    const shares = [...demandByNode(arrivals)].map(([n, d]) => [n, d / arrivals.length] as const).sort((x, y) => y[1] - x[1])
    t.true(Math.abs(shares[0][1] - 1 / h) < 0.02, `seed ${seed}: ${shares[0][1]} vs ${1 / h}`)
    // The second rank gets about 2^-s of the first.
    t.true(Math.abs(shares[1][1] / shares[0][1] - Math.pow(2, -s)) < 0.05)
    hottest.add(shares[0][0])
  }
  t.true(hottest.size > 1)
  t.deepEqual(generateLoad(spec({ kind: 'over' }), new Rng(4)), generateLoad(spec({ kind: 'zipf' }), new Rng(4)))
})

test('moving-hot: moves every moveEveryMs to a different node, which gets about hotShare', t => {
  const every = 2500
  const share = 0.7
  const { arrivals, moves } = generateLoad(spec({ kind: 'moving-hot', hotShare: share, moveEveryMs: every, durationMs: 20_000, ratePerKey: 2000 }), new Rng(8))
  t.deepEqual(moves.map(m => m.at), [0, 1, 2, 3, 4, 5, 6, 7].map(k => T0 + k * every))
  for (let i = 1; i < moves.length; i++) t.not(moves[i].node, moves[i - 1].node)
  t.true(new Set(moves.map(m => m.node)).size > 2)
  for (let i = 0; i < moves.length; i++) {
    const seg = arrivals.filter(a => a.at >= moves[i].at && a.at < moves[i].at + every)
    t.true(near(seg.length, 3 * 2000 * every / 1000, 0.05))
    const d = demandByNode(seg)
    t.true(Math.abs((d.get(moves[i].node) ?? 0) / seg.length - share) < 0.03, `segment ${i}`)
    // The rest spread evenly over the other four.
    for (const n of NODES) {
      if (n !== moves[i].node) t.true(Math.abs((d.get(n) ?? 0) / seg.length - (1 - share) / 4) < 0.02, `segment ${i} node ${n}`)
    }
  }
})

test('moving-hot: moves stop before the end and never land on it', t => {
  const { moves } = generateLoad(spec({ kind: 'moving-hot', moveEveryMs: 2000, durationMs: 6000 }), new Rng(2))
  t.deepEqual(moves.map(m => m.at), [T0, T0 + 2000, T0 + 4000])
})

test('bursty: per-node long-run demand matches the steady rate, with idle gaps', t => {
  const durationMs = 500_000
  const nodes = ['a', 'b', 'c', 'd']
  const load = spec({ kind: 'bursty', nodes, keys: ['k'], ratePerKey: 200, durationMs })
  const { arrivals } = generateLoad(load, new Rng(13))
  t.true(sorted(arrivals))
  const d = demandByNode(arrivals)
  for (const n of nodes) t.true(near(d.get(n) ?? 0, 200 / 4 * durationMs / 1000, 0.1), `${n}: ${d.get(n)}`)

  // Fraction of time inside gaps over 200 ms: ~0.7 * 0.97 for 300/700 bursts
  // at 167/s while on; ~0 for steady load at 50/s.
  const idle = (xs: readonly Arrival[], node: string): number => {
    let prev = T0
    let gaps = 0
    for (const a of xs) {
      if (a.node !== node) continue
      if (a.at - prev > 200) gaps += a.at - prev
      prev = a.at
    }
    return gaps / durationMs
  }
  for (const n of nodes) {
    const f = idle(arrivals, n)
    t.true(f > 0.55 && f < 0.8, `${n}: ${f}`)
  }
  const steady = generateLoad({ ...load, kind: 'steady' }, new Rng(13)).arrivals
  for (const n of nodes) t.true(idle(steady, n) < 0.01)
})

test('bursty: the duty cycle follows burstOnMs and burstOffMs', t => {
  const durationMs = 400_000
  const { arrivals } = generateLoad(spec({ kind: 'bursty', nodes: ['a', 'b'], keys: ['k'], ratePerKey: 100, durationMs, burstOnMs: 100, burstOffMs: 100 }), new Rng(14))
  const d = demandByNode(arrivals)
  for (const n of ['a', 'b']) t.true(near(d.get(n) ?? 0, 50 * durationMs / 1000, 0.05), n)
})

test('one node: every kind sends everything to it', t => {
  for (const kind of ['steady', 'bursty', 'zipf', 'moving-hot', 'over'] as const) {
    // One bursty node's on-time fraction has ~10% spread over 100 cycles; use 1000.
    const durationMs = kind === 'bursty' ? 1_000_000 : 10_000
    const { arrivals, moves } = generateLoad(spec({ kind, nodes: ['solo'], durationMs, ratePerKey: 100 }), new Rng(6))
    t.true(arrivals.every(a => a.node === 'solo'), kind)
    t.true(near(arrivals.length, 300 * durationMs / 1000, 0.1), `${kind}: ${arrivals.length}`)
    t.deepEqual(moves, kind === 'moving-hot' ? [{ at: T0, node: 'solo' }] : [], kind)
  }
})

test('zero rate yields no arrivals', t => {
  const { arrivals, moves } = generateLoad(spec({ kind: 'moving-hot', ratePerKey: 0 }), new Rng(1))
  t.deepEqual(arrivals, [])
  t.is(moves.length, 5)
  t.deepEqual(generateLoad(spec({ kind: 'bursty', ratePerKey: 0 }), new Rng(1)).arrivals, [])
})

test('two million arrivals generate quickly', t => {
  // CPU time of this process, not wall time: other processes keeping the machine busy do not
  // count. Typically under a second of CPU; the bound, ten times that, catches a generator
  // that got much slower, never a busy machine.
  const started = process.cpuUsage()
  const { arrivals } = generateLoad(spec({ kind: 'zipf', keys: ['k1', 'k2', 'k3', 'k4'], ratePerKey: 5000, durationMs: 100_000 }), new Rng(1))
  const used = process.cpuUsage(started)
  const cpuMs = (used.user + used.system) / 1000
  t.true(near(arrivals.length, 2_000_000, 0.01))
  t.true(cpuMs < 10_000, `${cpuMs} ms of CPU`)
})

test('spec validation', t => {
  const bad: Array<[Partial<LoadSpec>, RegExp]> = [
    [{ nodes: [] }, /nodes is empty/],
    [{ keys: [] }, /keys is empty/],
    [{ ratePerKey: -1 }, /ratePerKey/],
    [{ ratePerKey: NaN }, /ratePerKey/],
    [{ durationMs: 0 }, /durationMs/],
    [{ durationMs: -5 }, /durationMs/],
    [{ count: 0 }, /count/],
    [{ count: 1.5 }, /count/],
    [{ kind: 'moving-hot', hotShare: 1.2 }, /hotShare/],
    [{ kind: 'moving-hot', hotShare: -0.1 }, /hotShare/],
    [{ moveEveryMs: 0 }, /moveEveryMs/],
    [{ burstOnMs: 0 }, /burstOnMs/],
    [{ kind: 'nope' as LoadSpec['kind'] }, /unknown kind/]
  ]
  for (const [over, message] of bad) t.throws(() => generateLoad(spec(over), new Rng(1)), { message }, JSON.stringify(over))
  t.notThrows(() => generateLoad(spec({ kind: 'moving-hot', hotShare: 0 }), new Rng(1)))
  t.notThrows(() => generateLoad(spec({ kind: 'moving-hot', hotShare: 1 }), new Rng(1)))
})

test('parseTrace: CSV with header, comments, blanks and default count, sorted stably', t => {
  const text = [
    'timestamp,node,key,count',
    '# a comment',
    '300,a,k1,2',
    '',
    '100, b , k2',
    '200,a,k1,1',
    '100,c,k3,5',
    '1.5e2,a,k2,1'
  ].join('\r\n')
  t.deepEqual(parseTrace(text, 't.csv'), [
    { at: 100, node: 'b', key: 'k2', count: 1 },
    { at: 100, node: 'c', key: 'k3', count: 5 },
    { at: 150, node: 'a', key: 'k2', count: 1 },
    { at: 200, node: 'a', key: 'k1', count: 1 },
    { at: 300, node: 'a', key: 'k1', count: 2 }
  ])
  t.deepEqual(parseTrace('', 'empty'), [])
})

test('parseTrace: JSON lines with at or timestamp', t => {
  const text = [
    '{"at": 20, "node": "a", "key": "x", "count": 3}',
    '# comment',
    '{"timestamp": 10.5, "node": "b", "key": "y"}'
  ].join('\n')
  t.deepEqual(parseTrace(text, 't.jsonl'), [
    { at: 10.5, node: 'b', key: 'y', count: 1 },
    { at: 20, node: 'a', key: 'x', count: 3 }
  ])
})

test('parseTrace: errors name the source and line', t => {
  const cases: Array<[string, RegExp]> = [
    ['timestamp,node,key\n\n1,a,k\nabc,a,k', /^f:4: bad timestamp "abc"/],
    ['1,a', /^f:1: expected timestamp,node,key\[,count\], got 2/],
    ['1,a,k,1,9', /^f:1: expected .* got 5/],
    ['# c\n1,a,k,0', /^f:2: count must be a positive integer/],
    ['1,a,k,1.5', /^f:1: count must be a positive integer/],
    ['1,a,k,x', /^f:1: bad count "x"/],
    ['1,,k', /^f:1: node must be a non-empty string/],
    ['1,a,', /^f:1: key must be a non-empty string/],
    [`1,a,${'é'.repeat(129)}`, /^f:1: key is longer than 256 bytes/],
    ['1,a,k\n2,a,k\ntimestamp,node,key', /^f:3: bad timestamp/],
    ['{"at": 1, "node": "a", "key": "k"}\n{"node": "a", "key": "k"}', /^f:2: missing field "at"/],
    ['{"at": "1", "node": "a", "key": "k"}', /^f:1: bad timestamp/],
    ['{"at": 1, "key": "k"}', /^f:1: missing field "node"/],
    ['{"at": 1, "node": "a"}', /^f:1: missing field "key"/],
    ['{"at": 1, "node": "a", "key": "k", "count": -2}', /^f:1: count must be a positive integer/],
    ['{"at": 1, "node": "a", "key": 7}', /^f:1: key must be a non-empty string/],
    ['{"at": 1,', /^f:1: bad JSON/]
  ]
  for (const [text, message] of cases) t.throws(() => parseTrace(text, 'f'), { message }, text)
  // Exactly 256 bytes is allowed.
  t.is(parseTrace(`1,a,${'é'.repeat(128)}`, 'f').length, 1)
})

test('demandByNode sums tokens per node', t => {
  const d = demandByNode([
    { at: 1, node: 'a', key: 'k', count: 2 },
    { at: 2, node: 'b', key: 'k', count: 1 },
    { at: 3, node: 'a', key: 'j', count: 5 }
  ])
  t.deepEqual([...d], [['a', 7], ['b', 1]])
})
