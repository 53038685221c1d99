/**
 * The chaos harness's checker and plan (bench/lib/chaos-check.ts,
 * src/sim/fault-plan.ts), on hand-made answers: what counts as a grant in a window,
 * the bound under reloads, the envelopes of sliding-log and token-bucket,
 * and a plan that replays from its seed and ends every fault in time.
 */
import test from 'ava'
import { checkKey, allowedIn, type Answer, type CheckRule } from '../bench/lib/chaos-check.js'
import { FAULT_KINDS, makePlan, type ChaosEvent } from '../src/sim/fault-plan.js'
import { lastWithLeastShortfall, type NodeEnd } from '../bench/lib/chaos-run.js'

const W = 1_800_000_000_000 // a multiple of 2000: a window boundary
const grant = (t0: number, t1 = t0 + 1, node = 'a'): Answer => ({ node, key: 'k', rule: 'r', t0, t1, allowed: true })
const fixed = (limit: number, more: Array<{ at: number, limit: number }> = []): CheckRule =>
  ({ name: 'r', algorithm: 'fixed-window', perMs: 2000, limits: [{ at: -Infinity, limit }, ...more] })

test('fixed window: grants over the limit in one window are an overshoot; denials and straddling grants are not counted', t => {
  const answers = [
    ...Array.from({ length: 12 }, (_, i) => grant(W + i * 100)),
    { ...grant(W + 1500), allowed: false },
    grant(W + 1999, W + 2001) // sent in one window, answered in the next: it may have been decided in either
  ]
  const v = checkKey('k', fixed(10), answers, new Map())
  t.is(v.allowed, 13)
  t.is(v.overshoot, 2)
  t.deepEqual(v.worst, { at: W, count: 12, bound: 10 })
})

test('fixed window: the bound is the highest limit in force during the window', t => {
  const answers = Array.from({ length: 15 }, (_, i) => grant(W + 2000 + i * 100))
  // Raised from 10 to 15 in the middle of the window: 15 is what one exact limiter allows.
  t.is(checkKey('k', fixed(10, [{ at: W + 2500, limit: 15 }]), answers, new Map()).overshoot, 0)
  // Lowered to 5 in the window before: 15 is over.
  t.is(checkKey('k', fixed(10, [{ at: W + 500, limit: 5 }]), answers, new Map()).overshoot, 10)
})

test('fixed window by node calendars: a node whose calendar runs ahead places its grants in the next window', t => {
  const answers = [...Array.from({ length: 10 }, (_, i) => grant(W + 1000 + i * 50, W + 1000 + i * 50 + 1, 'b')), ...Array.from({ length: 10 }, (_, i) => grant(W + 2100 + i * 50))]
  t.is(checkKey('k', fixed(10), answers, new Map()).overshoot, 0)
  // b's calendar 1.5 s ahead: its 10 grants fall in the same window as a's 10.
  t.is(checkKey('k', fixed(10), answers, new Map([['b', [{ at: 0, offsetMs: 1500 }]]])).overshootByNodeCalendar, 10)
})

test('sliding log: at most the limit in any interval of `per`, across window boundaries', t => {
  const r: CheckRule = { name: 'r', algorithm: 'sliding-log', perMs: 2000, limits: [{ at: -Infinity, limit: 10 }] }
  // 10 at the end of one window and 10 at the start of the next: fine for a fixed window, not for a log.
  const answers = [...Array.from({ length: 10 }, (_, i) => grant(W + 1500 + i * 10)), ...Array.from({ length: 10 }, (_, i) => grant(W + 2100 + i * 10))]
  t.is(checkKey('k', r, answers, new Map()).overshoot, 10)
  t.is(checkKey('k', fixed(10), answers, new Map()).overshoot, 0)
  const spread = Array.from({ length: 20 }, (_, i) => grant(W + i * 210))
  t.is(checkKey('k', r, spread, new Map()).overshoot, 0)
})

test('token bucket: burst + rate·t over any interval', t => {
  const r: CheckRule = { name: 'r', algorithm: 'token-bucket', perMs: 1000, limits: [{ at: -Infinity, limit: 10 }], burst: 10 }
  // A full burst, then the rate: 10 at once and 10 more over the next second.
  const ok = [...Array.from({ length: 10 }, () => grant(W)), ...Array.from({ length: 10 }, (_, i) => grant(W + 100 + i * 100))]
  t.is(checkKey('k', r, ok, new Map()).overshoot, 0)
  // Two bursts 100 ms apart: the second is 9 over (one token came back in 100 ms).
  const over = [...Array.from({ length: 10 }, () => grant(W)), ...Array.from({ length: 10 }, () => grant(W + 100))]
  t.is(checkKey('k', r, over, new Map()).overshoot, 9)
})

test('allowedIn counts allowed answers wholly inside the interval', t => {
  const answers = [grant(W), grant(W + 10, W + 30), { ...grant(W + 5), allowed: false }, grant(W - 1, W + 1)]
  t.is(allowedIn(answers, W, W + 30), 1)
  t.is(allowedIn(answers, W, W + 31), 2)
})

const spec = (seed: number): Parameters<typeof makePlan>[0] => ({
  seed, nodes: ['a', 'b', 'c', 'm1'], faultsMs: 60_000, kinds: new Set(FAULT_KINDS), reclaimMs: 5000,
  reloadRules: [{ name: 'api', base: 200, min: 100, max: 300 }]
})

test('a plan replays from its seed, ends every fault by the end of the faults, and restores the limits', t => {
  t.deepEqual(makePlan(spec(7)), makePlan(spec(7)))
  t.notDeepEqual(makePlan(spec(7)), makePlan(spec(8)))
  for (let seed = 1; seed <= 50; seed++) {
    const plan = makePlan(spec(seed))
    t.true(plan.length > 0)
    const endOf = (e: ChaosEvent): number => e.kind === 'kill' || e.kind === 'term' ? e.restartAt : e.kind === 'stop' ? e.contAt : e.kind === 'clock' ? e.backAt : e.kind === 'reload' ? e.at : e.healAt
    for (const e of plan) t.true(endOf(e) <= 60_000 && endOf(e) >= e.at, JSON.stringify(e))
    // One process fault at a time per node.
    const busy = new Map<string, number>()
    for (const e of plan) {
      if (e.kind !== 'kill' && e.kind !== 'term' && e.kind !== 'stop') continue
      t.true(e.at >= (busy.get(e.node) ?? 0), `seed ${seed}: ${e.node} has two process faults at once`)
      busy.set(e.node, endOf(e))
      if (e.kind === 'stop') t.true(e.contAt - e.at > 5000, 'a pause is longer than reclaimMs')
    }
    const reloads = plan.filter(e => e.kind === 'reload')
    if (reloads.length > 0) t.deepEqual(reloads.at(-1), { at: 60_000, kind: 'reload', limits: { api: 200 }, restore: true })
  }
})

test('a plan draws only the kinds asked for', t => {
  for (let seed = 1; seed <= 20; seed++) {
    for (const e of makePlan({ ...spec(seed), kinds: new Set(['kill', 'term'] as const) })) t.true(e.kind === 'kill' || e.kind === 'term')
  }
  t.deepEqual(makePlan({ ...spec(1), kinds: new Set() }), [])
})

test('after the quiet, a key\'s shortfall at a node is its least over the readings: a token in motion once is not lost', t => {
  const end = (node: string, shortfall: number | null, books: number): NodeEnd => ({ node, keys: { api: { shortfall, unacked: 0, books } } })
  const merged = lastWithLeastShortfall([
    [end('a', 3, 10), end('b', 12, 5)],
    [end('a', 0, 11), end('b', 12, 6)],
    [end('a', 2, 12), end('b', null, 7)]
  ])
  // a: missing once, not in the second reading; b: missing in every reading it had one.
  t.deepEqual(merged.map(e => [e.node, e.keys.api.shortfall, e.keys.api.books]), [['a', 0, 12], ['b', 12, 7]])
})
