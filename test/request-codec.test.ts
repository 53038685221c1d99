/**
 * Compact requests (request-codec.ts): want, grant, ack, none, jrep and
 * jack go as arrays in a fixed field order, in fewer bytes than maps, and
 * read back as the very message; a map is still read; a heir's jget stays
 * a map; an array that is not one of the six, or has too many fields, is
 * E_BAD_FRAME.
 */
import test from 'ava'
import { decodeRequest, encodeRequest } from '../src/cluster/request-codec.js'
import { CLUSTER_VERSION, parseMessage, type Ack, type Grant, type None, type Want } from '../src/cluster/messages.js'
import type { Jack, Jrep } from '../src/cluster/replica-messages.js'
import { decisionOf, decodeFans, decodeFwd, encodeFans, encodeFwd, type Fans, type Fwd } from '../src/cluster/forward-messages.js'
import { wire } from '../src/cluster/wire.js'
import { ErrorCodes } from '../src/errors.js'

const head = { v: CLUSTER_VERSION, node: 'n21', epoch: '3e89ee96a3298645', inc: 4 }
const want: Want = { ...head, t: 'want', key: 'api:k20', want: 12 }
const wantMany: Want = { ...want, more: [['api:k3', 2], ['api:k7', 1]] }
const grant: Grant = { ...head, t: 'grant', to: 'n07', toEpoch: '9d3b1c0a5e7f2468', seq: 31, items: [['api:k20', 5, 1_800_000_000_123], ['api:k3', 2.5, 1_800_000_000_124]] }
const ack: Ack = { ...head, t: 'ack', applied: 30 }
const ackRequest: Ack = { ...head, t: 'ack', applied: 31, toEpoch: '9d3b1c0a5e7f2468' }
const refused: Ack = { ...head, t: 'ack', applied: 31, refused: true }
const none: None = { ...head, t: 'none' }
const badFrame = { code: ErrorCodes.BAD_FRAME }

test('want, grant, ack and none go as arrays, in fewer bytes than maps, and read back as the same message', t => {
  for (const m of [want, wantMany, grant, ack, ackRequest, refused, none]) {
    const bytes = encodeRequest(m)
    const plain = wire.pack(m)
    t.true(Array.isArray(wire.unpack(bytes)), m.t)
    t.true(bytes.length < plain.length * 0.7, `${m.t}: ${bytes.length} bytes against ${plain.length} as a map`)
    t.deepEqual(decodeRequest(bytes), parseMessage(wire.unpack(plain)), m.t)
  }
  t.deepEqual(wire.unpack(encodeRequest(want)), [CLUSTER_VERSION, 'want', 'n21', '3e89ee96a3298645', 4, 'api:k20', 12], 'the documented order')
  t.deepEqual(wire.unpack(encodeRequest(wantMany)), [CLUSTER_VERSION, 'want', 'n21', '3e89ee96a3298645', 4, 'api:k20', 12, [['api:k3', 2], ['api:k7', 1]]], 'more keys of one donor: one want')
  const jack: Jack = { ...head, t: 'jack', gen: 2, have: 1234, durable: false, z: true }
  const jrep: Jrep = { ...head, t: 'jrep', gen: 2, offset: 0, data: '[["api:k20",1]]\n' }
  for (const m of [jack, jrep]) {
    const bytes = encodeRequest(m)
    t.true(Array.isArray(wire.unpack(bytes)), m.t)
    t.true(bytes.length < wire.pack(m).length * 0.8, `${m.t}: ${bytes.length} bytes against ${wire.pack(m).length} as a map`)
    t.deepEqual(decodeRequest(bytes), parseMessage(wire.unpack(wire.pack(m))), m.t)
  }
  t.deepEqual(wire.unpack(encodeRequest(jack)), [CLUSTER_VERSION, 'jack', 'n21', '3e89ee96a3298645', 4, 2, 1234, false, true], 'a jack, durable false kept')
  t.deepEqual(wire.unpack(encodeRequest(ack)), [CLUSTER_VERSION, 'ack', 'n21', '3e89ee96a3298645', 4, 30], 'trailing absent fields left off')
  t.deepEqual(wire.unpack(encodeRequest(ackRequest)), [CLUSTER_VERSION, 'ack', 'n21', '3e89ee96a3298645', 4, 31, null, '9d3b1c0a5e7f2468'], 'an absent field inside is nil')
})

test('a map is still read; a heir\'s journal reads stay maps', t => {
  for (const m of [want, grant, ackRequest, none]) t.deepEqual(decodeRequest(wire.pack(m)), parseMessage(wire.unpack(wire.pack(m))))
  const jget = { ...head, t: 'jget', writer: 'n03', gen: 1, from: 0 }
  t.false(Array.isArray(wire.unpack(encodeRequest(jget))), 'a heir\'s jget stays a map')
  t.deepEqual(decodeRequest(encodeRequest(jget)), parseMessage(jget))
})

test('an array that is not a compact want, grant, ack or none is E_BAD_FRAME, and its fields are checked as any message\'s', t => {
  const arr = (a: unknown[]): Uint8Array => wire.pack(a)
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'gossip', 'n21', 'e', 1])), badFrame, 'gossip is never compact')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'jrep', 'n21', 'e', 1])), badFrame)
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'toString', 'n21', 'e', 1])), badFrame, 'not a layout, whatever the prototype has')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, [['j', 2]], 'extra'])), badFrame, 'too many fields')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, 'more'])), badFrame, 'more not a list')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, [['j']]])), badFrame, 'a want item without its amount')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, [['j', 2], ['k', 3]]])), badFrame, 'a key named twice')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, [['j', 2], ['j', 3]]])), badFrame, 'a key named twice in more')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k', 1, Array.from({ length: 4096 }, (_, i) => [`j${i}`, 1])])), badFrame, 'more keys than a message may name')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'none', 'n21'])), badFrame, 'too few')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'want', 'n21', 'e', 1, 'k'])), badFrame, 'a want without its amount')
  t.throws(() => decodeRequest(arr([6, 'none', 'n21', 'e', 1])), badFrame, 'another version')
  t.throws(() => decodeRequest(arr([CLUSTER_VERSION, 'grant', 'n21', 'e', 1, 'n07', 'f', 1, 'items'])), badFrame, 'items not a list')
  t.throws(() => decodeRequest(arr([])), badFrame)
})

test('a forwarded acquire and its answer go as compact arrays without what either end knows, and read back the same; their fields are checked', t => {
  const fwd: Fwd = { node: 'n21', key: 'api:k20', count: 2 }
  const waited: Fwd = { node: 'n21', key: 'api:k20', count: 1, wait: 250 }
  const fans: Fans = { allowed: true, remaining: 11, resetMs: 420, retryAfterMs: 0 }
  const refusal: Fans = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: -1, code: 'E_NOT_SEED' }
  for (const f of [fwd, waited]) t.deepEqual(decodeFwd(encodeFwd(f), 'n21'), f)
  t.deepEqual(decodeFwd(encodeFwd(fwd), ''), { ...fwd, node: '' }, 'the name is the one bound to the session, never sent')
  for (const a of [fans, refusal]) t.deepEqual(decodeFans(encodeFans(a)), a)
  t.deepEqual(wire.unpack(encodeFwd(fwd)), ['api:k20', 2], 'the documented order (the version is the session protocol\'s)')
  t.deepEqual(wire.unpack(encodeFans(refusal)), [false, 0, 0, -1, 'E_NOT_SEED'], 'the documented order')
  t.true(encodeFwd({ node: 'n21', key: 'k:57', count: 1 }).byteLength <= 7, 'a one-token forward of a short key is a few bytes')
  t.true(encodeFans({ allowed: true, remaining: 57, resetMs: 430, retryAfterMs: 0 }).byteLength <= 7)
  // Credit (forward-credit.ts): asked as a 4th field of the fwd (wait 0 kept in its place), given as a 6th of the fans.
  const asking: Fwd = { node: 'n21', key: 'api:k20', count: 1, more: 12 }
  t.deepEqual(decodeFwd(encodeFwd(asking), 'n21'), asking)
  t.deepEqual(wire.unpack(encodeFwd(asking)), ['api:k20', 1, 0, 12])
  t.deepEqual(decodeFwd(encodeFwd({ ...asking, ruleHash: 'abc' }), 'n21'), asking, 'the rule hash the member routed under stays at the member')
  const credited: Fans = { allowed: true, remaining: 30, resetMs: 420, retryAfterMs: 0, credit: 12 }
  t.deepEqual(decodeFans(encodeFans(credited)), credited)
  t.deepEqual(wire.unpack(encodeFans(credited)), [true, 30, 420, 0, null, 12])
  const leased: Fans = { ...credited, creditMs: 150 }
  t.deepEqual(decodeFans(encodeFans(leased)), leased, 'good for the seed\'s lease\'s 150 ms left, under the window\'s 420')
  t.deepEqual(wire.unpack(encodeFans(leased)), [true, 30, 420, 0, null, 12, 150])
  t.deepEqual(wire.unpack(encodeFans({ ...credited, creditMs: 900 })), [true, 30, 420, 0, null, 12], 'not sent when the window ends first')
  t.deepEqual(decisionOf(fans, 100, 'api'), { allowed: true, remaining: 11, limit: 100, resetMs: 420, retryAfterMs: 0, rule: 'api' }, "the member's own rule fills in its name and limit")
  const arr = (a: unknown[]): Uint8Array => wire.pack(a)
  t.throws(() => decodeFwd(arr(['k', 0]), 'n21'), badFrame, 'count 0')
  t.throws(() => decodeFwd(arr(['k', 1.5]), 'n21'), badFrame, 'a fractional count')
  t.throws(() => decodeFwd(arr(['x'.repeat(300), 1]), 'n21'), badFrame, 'a key over the bound')
  t.throws(() => decodeFwd(arr(['k']), 'n21'), badFrame, 'no count')
  t.throws(() => decodeFwd(arr(['k', 1, 5, 3, 'extra']), 'n21'), badFrame, 'too many fields')
  t.throws(() => decodeFwd(arr(['k', 1, 0, -2]), 'n21'), badFrame, 'a negative credit asked')
  t.throws(() => decodeFans(arr([false, 0, 10, 0, null, 5])), badFrame, 'credit with a denial')
  t.throws(() => decodeFans(arr([true, 0, 10, 0, 'E_NO_RULE', 5])), badFrame, 'credit with a refusal')
  t.throws(() => decodeFans(arr([true, 0, 10, 0, null, 1.5])), badFrame, 'a fractional credit')
  t.throws(() => decodeFans(arr([true, 0, 10, 0, null, 0, 5])), badFrame, 'creditMs without credit')
  // A 1.0.0 fwd (its version first) reads as a named one sent on by a seed now (a negative number: `moved`): the
  // session's protocol id keeps it off 5.0.0 sessions.
  t.like(decodeFwd(arr([-1, 'k', 1]), 'n21'), { key: 'k', ref: 0, moved: true, naming: true })
  t.throws(() => decodeFwd(arr([-1.5, 'k', 1]), 'n21'), badFrame, 'a named fwd with a fractional number')
  t.throws(() => decodeFwd(arr([3, 'k', 0]), 'n21'), badFrame, 'a named fwd of count 0')
  t.throws(() => decodeFwd(arr([3, 'k', 1, 0, 0, 9]), 'n21'), badFrame, 'a named fwd of 6 fields')
  t.throws(() => decodeFwd(wire.pack({ key: 'k', count: 1 }), 'n21'), badFrame, 'a map')
  t.throws(() => decodeFwd(new Uint8Array([0xc1]), 'n21'), badFrame, 'not msgpack')
  t.throws(() => decodeFans(arr(['yes', 0, 0, 0])), badFrame, 'allowed not a boolean')
  t.throws(() => decodeFans(arr([true, 0, 0, -5])), badFrame, 'retryAfterMs below -1')
  t.throws(() => decodeFans(arr([false, 0, 0, -1, 'bad code!'])), badFrame, 'a code that is not a name')
})
