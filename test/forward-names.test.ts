/**
 * Key numbers for forwarded acquires (forward-names.ts): a member names a
 * key to a seed once, then sends its number, a one-token acquire being a
 * bare msgpack integer. A seed that restarted, or dropped its table, knows
 * no number: it answers E_KEY_UNNAMED and the member names the key again.
 * The simulator checks at every forward that a seed read a live member's
 * number as the key it was sent for, and a seed made to misread one is
 * caught.
 */
import test from 'ava'
import type { RuleConfig } from '../src/config/types.js'
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
})

test('a seed holds each member\'s numbers apart, and drops them all past MAX_BOUND (members then name their keys again)', t => {
  const s = new Named()
  s.bind('p1', 0, 'k:1')
  s.bind('p2', 0, 'k:2')
  t.is(s.keyOf('p1', 0), 'k:1')
  t.is(s.keyOf('p2', 0), 'k:2')
  t.is(s.keyOf('p1', 1), undefined)
  s.bind('p1', 0, 'k:9')
  t.is(s.keyOf('p1', 0), 'k:9', 'a member that restarted numbers afresh')
  t.is(s.size, 2)
  for (let i = 1; s.size < MAX_BOUND; i++) s.bind('p3', i, `k:${i}`)
  s.bind('p4', 0, 'k:4')
  t.is(s.keyOf('p1', 0), undefined, 'the table was dropped')
  t.is(s.keyOf('p4', 0), 'k:4')
  t.is(s.size, 1)
})

test('on the wire: a named fwd carries the key and its number; a bare one-token acquire is the number alone; plain decisions go short', t => {
  const named: Fwd = { node: 'm', key: 'signup:203.0.113.7', count: 1, ref: 3, naming: true }
  t.deepEqual(wire.unpack(encodeFwd(named)), ['signup:203.0.113.7', 1, 0, 0, 3])
  t.deepEqual(decodeFwd(encodeFwd(named), 'm'), named)
  const bare: Fwd = { node: 'm', key: 'signup:203.0.113.7', count: 1, ref: 3 }
  t.is(encodeFwd(bare).byteLength, 1, 'one byte')
  t.deepEqual(decodeFwd(encodeFwd(bare), 'm'), { node: 'm', key: '', count: 1, ref: 3 }, 'the seed reads the key from its table')
  const waited: Fwd = { ...bare, count: 2, wait: 250, more: 7 }
  t.deepEqual(wire.unpack(encodeFwd(waited)), [3, 2, 250, 7])
  t.deepEqual(decodeFwd(encodeFwd(waited), 'm'), { ...waited, key: '' })
  t.deepEqual(wire.unpack(encodeFwd({ node: 'm', key: 'k', count: 1 })), ['k', 1], 'no number: the key in full, as before')
  t.throws(() => decodeFwd(wire.pack(MAX_NUMBERS), 'm'), badFrame, 'a number out of range')
  t.throws(() => decodeFwd(wire.pack(-1), 'm'), badFrame)
  t.throws(() => decodeFwd(wire.pack(1.5), 'm'), badFrame)
  t.throws(() => decodeFwd(wire.pack([3, 1, 0, 0, 9]), 'm'), badFrame, 'a number with a number')
  t.throws(() => decodeFwd(wire.pack(['k', 1, 0, 0, 'x']), 'm'), badFrame, 'a name with no number')

  const admitted = { allowed: true, remaining: 57, resetMs: 430, retryAfterMs: 0 }
  t.deepEqual(wire.unpack(encodeFans(admitted)), [57, 430])
  t.deepEqual(decodeFans(encodeFans(admitted)), admitted)
  const denied = { allowed: false, remaining: 0, resetMs: 430, retryAfterMs: 430 }
  t.deepEqual(wire.unpack(encodeFans(denied)), [0, 430, 430])
  t.deepEqual(decodeFans(encodeFans(denied)), denied)
  const never = { ...denied, retryAfterMs: -1 }
  t.deepEqual(decodeFans(encodeFans(never)), never)
  const refused = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1, code: UNNAMED }
  t.deepEqual(decodeFans(encodeFans(refused)), refused, 'a refusal keeps the long form')
  t.throws(() => decodeFans(wire.pack([1, 2, 3, 4])), badFrame, 'a short form of 4 fields')
  t.throws(() => decodeFans(wire.pack([1])), badFrame)
  t.throws(() => decodeFans(wire.pack([1, 2, -2])), badFrame, 'retryAfterMs below -1')
})

test('seeds that crash and restart, or stop and start, forget members\' numbers: members name their keys again, and every check holds', t => {
  for (const name of ['crash-restart', 'stops']) {
    let vc: VirtualCluster | null = null
    const r = runSim({ ...spec(name), sabotage: v => { vc = v } })
    t.true(r.ok, `${name}: ${r.failures.join('; ')}`)
    t.is(r.overshoot, 0)
    const c = renamed(vc)
    t.true(c.renamed > 0 && c.forwarded > 100, `${name}: ${c.renamed} renamed of ${c.forwarded} forwarded`)
  }
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
