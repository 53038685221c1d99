/**
 * Key numbers for forwarded acquires (forward-names.ts): a member names a
 * key to a seed once, then sends its number, a one-token acquire being a
 * bare msgpack integer. A seed that restarted, or dropped its table, knows
 * no number: it answers E_KEY_UNNAMED and the member names the key again.
 * The simulator checks at every forward that a seed read a live member's
 * number as the key it was sent for, and a seed made to misread one is
 * caught. An admission in a window the member was told goes as the bare
 * `remaining`, and the member's `resetMs` for it matches the window's end.
 */
import test from 'ava'
import type { RuleConfig } from '../src/config/types.js'
import type { Decision } from '../src/core/types.js'
import { KeyNumbers, MAX_BOUND, MAX_NUMBERS, Named, UNNAMED } from '../src/cluster/forward-names.js'
import { decodeFans, decodeFwd, encodeFans, encodeFwd, type Fwd } from '../src/cluster/forward-messages.js'
import { wire } from '../src/cluster/wire.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

const GLOB: RuleConfig = { name: 'api', match: 'k:*', limit: 100, perMs: 1000, per: '1s', algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', burst: 100, maxDebt: 10, decide: 'seeds' }
const badFrame = { code: 'E_BAD_FRAME' }

function spec (name: string, seed = 1): SimSpec {
  return { scenario: scenario(name), nodes: 10, seedNodes: 3, seed, mode: 'hard', rule: GLOB, durationMs: 6000, gossipIntervalMs: 250 }
}

function renamed (vc: VirtualCluster | null): { renamed: number, forwarded: number } {
  let r = 0
  let f = 0
  for (const [, core] of vc?.cores ?? []) { r += core.forwarding.counters.forwardRenamed; f += core.forwarding.counters.forwarded }
  return { renamed: r, forwarded: f }
}

test('a member numbers each key per seed, names it until that seed answered a frame that named it, and never gives a number to a second key', t => {
  const k = new KeyNumbers()
  t.deepEqual(k.ref('a', 'k:1'), { n: 0, naming: true })
  t.deepEqual(k.ref('a', 'k:2'), { n: 1, naming: true })
  t.deepEqual(k.ref('b', 'k:2'), { n: 0, naming: true }, 'numbers are per seed')
  k.confirm('a', 'k:1', 5)
  t.deepEqual(k.ref('a', 'k:1'), { n: 0, naming: true }, 'a confirmation of another number is not this one\'s')
  k.confirm('a', 'k:1', 0)
  t.deepEqual(k.ref('a', 'k:1'), { n: 0, naming: false })
  t.deepEqual(k.ref('b', 'k:1'), { n: 1, naming: true }, 'confirmed by one seed, not by another')
  k.forget('a', 'k:1')
  t.deepEqual(k.ref('a', 'k:1'), { n: 0, naming: true }, 'after E_KEY_UNNAMED: named again, under the same number')
  for (let i = 3; k.ref('a', `k:${i}`) !== null; i++) t.true(i < MAX_NUMBERS + 3)
  t.is(k.ref('a', 'k:new'), null, 'past MAX_NUMBERS a new key goes in full')
  t.deepEqual(k.ref('a', 'k:2'), { n: 1, naming: true }, 'a key numbered before keeps its number')
  // Window ends, per seed and rule hash, from whole answers; a forward unanswered forgets them all, and every name, with that seed.
  k.confirm('a', 'k:2', 1)
  k.setWindow('a', 'h1', 5000, 1)
  k.setWindow('a', 'h2', 5500, 0)
  k.setWindow('b', 'h1', 6000, 0)
  t.is(k.windowEnd('a', 'h1', 1), 5000)
  t.is(k.windowEnd('a', 'h2', 0), 5500, 'each rule its own')
  t.true(Number.isNaN(k.windowEnd('a', 'h1', 0)), 'a window of the other parity is not this one')
  k.forget('a', 'k:2')
  t.is(k.windowEnd('a', 'h1', 1), 5000, 'one key named again: the seed tells its rule\'s window again, the old one stays until then')
  k.forgetSeed('a')
  t.true(Number.isNaN(k.windowEnd('a', 'h1', 1)))
  t.deepEqual(k.ref('a', 'k:2'), { n: 1, naming: true })
  t.is(k.windowEnd('b', 'h1', 0), 6000, 'another seed\'s are kept')
})

test('a seed holds each member\'s numbers apart, and drops them all past MAX_BOUND (members then name their keys again)', t => {
  const s = new Named()
  s.bind('p1', 0, 'k:1', 'h')
  s.bind('p1', 1, 'k:3', 'h')
  s.bind('p2', 0, 'k:2', 'h')
  t.is(s.keyOf('p1', 0), 'k:1')
  t.is(s.keyOf('p2', 0), 'k:2')
  t.is(s.keyOf('p1', 2), undefined)
  t.is(s.knownWindow('p1', 0, 'h', 1000, 1), null, 'nothing told yet: a denial goes whole')
  t.deepEqual(s.tell('p1', 0, 'h', 1000, 1), { same: false, parity: 1 }, 'nothing told yet: the answer goes whole, and tells its window\'s end')
  t.deepEqual(s.tell('p1', 0, 'h', 1000.6, 1), { same: true, parity: 1 }, 'the same window: it may go short')
  t.deepEqual(s.tell('p1', 1, 'h', 1000.2, 1), { same: true, parity: 1 }, 'another key of the rule, the same window: short too')
  t.deepEqual(s.knownWindow('p1', 1, 'h', 1000, 1), { same: true, parity: 1 }, 'a denial in that window goes short')
  t.deepEqual(s.tell('p1', 0, 'h2', 1000, 1), { same: false, parity: 1 }, 'another rule: its own window')
  t.deepEqual(s.tell('p2', 0, 'h', 1000, 1), { same: false, parity: 1 }, 'another member: its own')
  t.deepEqual(s.tell('p1', 0, 'h', 2000, 1), { same: false, parity: 0 }, 'the next window: whole again, the parity flipped')
  t.is(s.knownWindow('p1', 0, 'h', 1000, 1), null, 'a denial of the window before: whole')
  t.is(s.tell('p1', 7, 'h', 2000, 1), null, 'a number not named here')
  s.bind('p1', 0, 'k:9', 'h')
  t.is(s.keyOf('p1', 0), 'k:9', 'a member that restarted numbers afresh')
  t.deepEqual(s.tell('p1', 1, 'h', 2000, 1), { same: false, parity: 1 }, 'a key named under the rule: nothing told under it any more, and the parity goes on flipping')
  t.is(s.size, 3)
  for (let i = 1; s.size < MAX_BOUND; i++) s.bind('p3', i, `k:${i}`, 'h')
  s.bind('p4', 0, 'k:4', 'h')
  t.is(s.keyOf('p1', 0), undefined, 'the table was dropped')
  t.is(s.keyOf('p4', 0), 'k:4')
  t.is(s.size, 1)
})

test('on the wire: a named fwd carries the key and its number; a bare one-token acquire is the number alone; plain decisions go short', t => {
  const named: Fwd = { node: 'm', key: 'signup:203.0.113.7', count: 1, ref: 3, naming: true }
  t.deepEqual(wire.unpack(encodeFwd(named)), [3, 'signup:203.0.113.7'], 'its number, then the key; a count of 1 left off')
  t.deepEqual(decodeFwd(encodeFwd(named), 'm'), named)
  t.deepEqual(wire.unpack(encodeFwd({ ...named, count: 2 })), [3, 'signup:203.0.113.7', 2])
  const namedMore: Fwd = { ...named, wait: 40, more: 5 }
  t.deepEqual(wire.unpack(encodeFwd(namedMore)), [3, 'signup:203.0.113.7', 1, 40, 5])
  t.deepEqual(decodeFwd(encodeFwd(namedMore), 'm'), namedMore)
  t.deepEqual(decodeFwd(encodeFwd({ ...named, wait: 40 }), 'm'), { ...named, wait: 40 })
  const bare: Fwd = { node: 'm', key: 'signup:203.0.113.7', count: 1, ref: 3 }
  t.is(encodeFwd(bare).byteLength, 1, 'one byte')
  t.deepEqual(decodeFwd(encodeFwd(bare), 'm'), { node: 'm', key: '', count: 1, ref: 3 }, 'the seed reads the key from its table')
  const waited: Fwd = { ...bare, count: 2, wait: 250, more: 7 }
  t.deepEqual(wire.unpack(encodeFwd(waited)), [3, 2, 250, 7])
  t.deepEqual(decodeFwd(encodeFwd(waited), 'm'), { ...waited, key: '' })
  t.deepEqual(wire.unpack(encodeFwd({ node: 'm', key: 'k', count: 1 })), ['k', 1], 'no number: the key in full, as before')
  t.throws(() => decodeFwd(wire.pack(MAX_NUMBERS), 'm'), badFrame, 'a number out of range')
  t.throws(() => decodeFwd(wire.pack(-1 - MAX_NUMBERS), 'm'), badFrame, 'a number sent on, out of range')
  // Sent on by one of the key's two seeds to the other (forward.ts `partnerFor`): the number as -1 - number.
  const moved: Fwd = { ...bare, moved: true }
  t.deepEqual(wire.unpack(encodeFwd(moved)), -4, 'still one byte')
  t.deepEqual(decodeFwd(encodeFwd(moved), 'm'), { node: 'm', key: '', count: 1, ref: 3, moved: true })
  t.deepEqual(wire.unpack(encodeFwd({ ...named, moved: true })), [-4, 'signup:203.0.113.7'])
  t.deepEqual(decodeFwd(encodeFwd({ ...named, moved: true }), 'm'), { ...named, moved: true })
  t.deepEqual(decodeFwd(encodeFwd({ ...waited, moved: true }), 'm'), { ...waited, key: '', moved: true })
  t.throws(() => decodeFwd(wire.pack(1.5), 'm'), badFrame)
  t.throws(() => decodeFwd(wire.pack([3, 1, 0, 0, 9]), 'm'), badFrame, 'a number with a number')
  t.throws(() => decodeFwd(wire.pack(['k', 1, 0, 0, 3]), 'm'), badFrame, 'the key before its number')

  const admitted = { allowed: true, remaining: 57, resetMs: 430, retryAfterMs: 0 }
  t.deepEqual(wire.unpack(encodeFans(admitted)), [57, 430])
  t.deepEqual(decodeFans(encodeFans(admitted)), admitted)
  const denied = { allowed: false, remaining: 0, resetMs: 430, retryAfterMs: 430 }
  t.deepEqual(wire.unpack(encodeFans(denied)), [0, 430, 430])
  t.deepEqual(decodeFans(encodeFans(denied)), denied)
  const never = { ...denied, retryAfterMs: -1 }
  t.deepEqual(decodeFans(encodeFans(never)), never)
  const none = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1 }
  t.is(wire.unpack(encodeFans(none)), null, 'denied, nothing known: nil')
  t.deepEqual(decodeFans(encodeFans(none)), none)
  t.deepEqual(wire.unpack(encodeFans({ ...denied, known: true })), false, 'denied until the end of a window the member knows: a boolean, its parity')
  t.deepEqual(wire.unpack(encodeFans({ ...denied, known: true, parity: 1 })), true)
  t.deepEqual(decodeFans(encodeFans({ ...denied, known: true, parity: 1 })), { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, known: true, parity: 1 })
  t.is(encodeFans({ ...denied, known: true }).byteLength, 1)
  t.is(encodeFans({ ...admitted, known: true }).byteLength, 1, 'in a window the member knows: the bare remaining')
  t.deepEqual(decodeFans(encodeFans({ ...admitted, known: true })), { allowed: true, remaining: 57, resetMs: 0, retryAfterMs: 0, known: true })
  t.deepEqual(wire.unpack(encodeFans({ ...admitted, known: true })), 114, 'twice the remaining, plus the parity')
  t.deepEqual(wire.unpack(encodeFans({ ...admitted, known: true, parity: 1 })), 115, 'a window of parity 1: the low bit')
  t.is(encodeFans({ ...admitted, remaining: 63, known: true, parity: 1 }).byteLength, 1, 'one byte up to 63, whatever the parity')
  t.throws(() => decodeFans(wire.pack(-3)), badFrame, 'a negative bare answer')
  t.deepEqual(decodeFans(encodeFans({ ...admitted, known: true, parity: 1 })), { allowed: true, remaining: 57, resetMs: 0, retryAfterMs: 0, known: true, parity: 1 })
  t.deepEqual(wire.unpack(encodeFans({ ...admitted, parity: 1 })), [57, -431])
  t.deepEqual(decodeFans(encodeFans({ ...admitted, parity: 1 })), { ...admitted, parity: 1 })
  t.deepEqual(decodeFans(encodeFans({ ...admitted, resetMs: 0, parity: 1 })), { ...admitted, resetMs: 0, parity: 1 })
  t.throws(() => decodeFans(wire.pack(1.5)), badFrame)
  t.throws(() => decodeFans(wire.pack([1, -0.5])), badFrame)
  const refused = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1, code: UNNAMED }
  t.deepEqual(decodeFans(encodeFans(refused)), refused, 'a refusal keeps the long form')
  t.throws(() => decodeFans(wire.pack([1, 2, 3, 4])), badFrame, 'a short form of 4 fields')
  t.throws(() => decodeFans(wire.pack([1])), badFrame)
  t.throws(() => decodeFans(wire.pack([1, 2, -2])), badFrame, 'retryAfterMs below -1')
})

test('seeds that crash and restart, or stop and start, forget members\' numbers, and every check holds; a seed that drops its numbers has members name their keys again', t => {
  for (const name of ['crash-restart', 'stops']) {
    const r = runSim(spec(name))
    t.true(r.ok, `${name}: ${r.failures.join('; ')}`)
    t.is(r.overshoot, 0)
  }
  // A member whose forward to a seed went unanswered names its keys to it again anyway (forgetSeed), so here the
  // seeds drop their tables (as at MAX_BOUND) while the members know nothing of it: E_KEY_UNNAMED, then named again.
  let vc: VirtualCluster | null = null
  const r = runSim({
    ...spec('keys100'),
    sabotage: (v, startMs) => {
      vc = v
      v.at(startMs + 1500, () => { for (const [, core] of v.cores) (core.forwarding as unknown as { named: { clear: () => void } }).named.clear() })
    }
  })
  t.true(r.ok, r.failures.join('; '))
  t.is(r.overshoot, 0)
  const c = renamed(vc)
  t.true(c.renamed > 0 && c.forwarded > 100, `${c.renamed} renamed of ${c.forwarded} forwarded`)
})

test('a seed that read a member\'s number as another key would be caught by the simulator at that forward', t => {
  const sabotaged = (): void => {
    runSim({
      ...spec('keys100'),
      sabotage: v => {
        for (const [, core] of v.cores) {
          const named = (core.forwarding as unknown as { named: Named }).named
          const keyOf = named.keyOf.bind(named)
          named.keyOf = (from, n) => keyOf(from, n === 0 ? 1 : n) ?? keyOf(from, n)
        }
      }
    })
  }
  t.throws(sabotaged, { message: /read .* key number 0 as/ })
})

test('an admission or a denial in a window the member was told comes back bare; the member reads resetMs (a denial\'s retryAfterMs too) from that window\'s end, as the seed\'s within the network\'s latency', t => {
  let denials = 0
  let short = 0
  let whole = 0
  let stale = 0
  let longest = 0
  const errs: number[] = []
  const r = runSim({
    ...spec('keys100'),
    nodes: 10,
    seedNodes: 5,
    durationMs: 3000,
    sabotage: v => {
      const count = v.count.bind(v)
      v.count = (from, bytes, type) => {
        // A bare remaining is one or two bytes, with the call's length and id at most four (sim-ports.ts onSession);
        // a whole admission is five or more.
        if (type === 'fans') { if (bytes <= 4) short++; else whole++ }
        count(from, bytes, type)
      }
      type Acquire = (name: string, key: string, n: number, late?: (d: Decision) => void, ...rest: unknown[]) => ReturnType<VirtualCluster['acquire']>
      const acquire = v.acquire.bind(v) as Acquire
      const wrapped: Acquire = (name, key, n, late, ...rest) => acquire(name, key, n, late === undefined
        ? undefined
        : d => {
          // The rule's 1 s windows end on the second of every node's clock (no skew here). An admission's resetMs
          // points at its window's end: never before it, after it by at most the answer's time on the wire, and
          // that end is not long past (an answer decided just before a second ends may be read just after it).
          // A bare admission whose window the member does not know yet (read before its window's whole answer,
          // which the simulator may reorder) reads the rule's per, the longest resetMs can be: counted apart.
          // A denial that says "retry when the window ends" is read the same way.
          const untilEnd = d.allowed || (d.resetMs > 0 && d.retryAfterMs === d.resetMs)
          if (untilEnd && d.resetMs === 1000) longest++
          else if (untilEnd) {
            if (!d.allowed) denials++
            const at = v.clock(name) + d.resetMs
            const end = Math.round(at / 1000) * 1000
            errs.push(at - end)
            if (end < v.clock(name) - 50) stale++
          }
          late(d)
        }, ...rest)
      v.acquire = wrapped as unknown as VirtualCluster['acquire']
    }
  })
  t.true(r.ok, r.failures.join('; '))
  t.true(short > 2 * whole, `${short} answers as the bare remaining, ${whole} whole`)
  t.true(errs.length > 1000)
  t.true(denials > 100, `${denials} denials until the window's end`)
  // Never earlier than the window's end (a client told to retry later than it could, by at most the latency, never sooner).
  t.true(Math.min(...errs) >= -1, `min ${Math.min(...errs)}`)
  t.true(Math.max(...errs) <= 50, `max ${Math.max(...errs)}`)
  t.is(stale, 0, 'no admission points at a window that ended long before it was read')
  t.true(longest < 0.01 * errs.length, `${longest} read as the rule's per, of ${errs.length + longest}`)
})
