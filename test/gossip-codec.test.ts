/**
 * Deflated gossip (gossip-codec.ts): a gossip worth compressing goes in a
 * `gz` envelope that is smaller than its plain msgpack, the receiver gets
 * the very message the plain bytes give, a small one stays plain, and an
 * envelope that is not a bounded deflate of one gossip is a bad message.
 */
import test from 'ava'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { decodeGossip, encodeGossip, GOSSIP_DICTIONARY, GOSSIP_MAX_INFLATED } from '../src/cluster/gossip-codec.js'
import { CLUSTER_VERSION, parseMessage, type Gossip, type GossipKey } from '../src/cluster/messages.js'
import { wire } from '../src/cluster/wire.js'
import { ErrorCodes } from '../src/errors.js'

const gossip = (keys: GossipKey[]): Gossip => ({
  v: CLUSTER_VERSION, t: 'gossip', node: 'n017', epoch: 'n017.1.d84283', inc: 1, seq: 42, now: 1_800_000_000_533, pending: [], carries: [],
  cfg: 'c0ffee', rules: { api: 'bce16314cf04d8f0' }, keys, acks: [], alloc: false
})
// Key lines as a busy node sends them: a shared prefix, small numbers.
const lines = (n: number): GossipKey[] => Array.from({ length: n }, (_, i) => [`api:k${i}`, i % 7, i % 3, (i % 5) + 0.5, 0, 0, 0, 0])
const envelope = (z: unknown, v: unknown = CLUSTER_VERSION): Uint8Array => wire.pack({ v, t: 'gz', z })
const badFrame = { code: ErrorCodes.BAD_FRAME }

test('a gossip of many key lines goes deflated, in fewer bytes, and reads back as the same message', t => {
  const g = gossip(lines(80))
  const plain = wire.pack(g)
  const bytes = encodeGossip(g)
  t.true(bytes.length < plain.length / 2, `${bytes.length} bytes against ${plain.length} plain`)
  t.is((wire.unpack(bytes) as { t: string }).t, 'gz')
  t.deepEqual(decodeGossip(bytes), parseMessage(wire.unpack(plain)))
})

test('a gossip never goes in more bytes than plain, and plain bytes (an older encoder, a tool) still decode', t => {
  for (const g of [gossip([]), gossip(lines(1)), gossip(lines(500))]) {
    const plain = wire.pack(g)
    t.true(encodeGossip(g).length <= plain.length)
    t.deepEqual(decodeGossip(plain), parseMessage(wire.unpack(plain)))
  }
})

test('the dictionary is the fixed bytes both ends use: field names as msgpack fixstrs', t => {
  t.deepEqual([...GOSSIP_DICTIONARY.subarray(0, 17)], [0xa4, ...Buffer.from('prev'), 0xab, ...Buffer.from('estateMarks')])
  t.true(GOSSIP_DICTIONARY.includes(Buffer.from([0xa4, ...Buffer.from('keys')])))
})

test('empty pending, carries, keys and acks are left out on the wire and read back as empty; a quiet gossip is smaller for it', t => {
  const g = gossip([])
  const bytes = encodeGossip(g)
  const outer = wire.unpack(bytes) as Record<string, unknown>
  const sent = (outer.t === 'gz' ? wire.unpack(inflateRawSync(outer.z as Uint8Array, { dictionary: GOSSIP_DICTIONARY })) : outer) as Record<string, unknown>
  t.is(sent.t, 'gossip')
  for (const f of ['pending', 'carries', 'keys', 'acks']) t.false(f in sent, `${f} is not on the wire`)
  t.deepEqual(decodeGossip(bytes), parseMessage(wire.unpack(wire.pack(g))), 'the receiver gets the same message')
  t.true(bytes.length < wire.pack(g).length)
  // A list that is not empty still goes; one that is not a list is still refused.
  const busy = { ...g, pending: ['api'], acks: [['n002', 'n002.1.aa', 3]] as Gossip['acks'] }
  t.deepEqual(decodeGossip(encodeGossip(busy)), parseMessage(wire.unpack(wire.pack(busy))))
  t.throws(() => decodeGossip(wire.pack({ ...g, carries: 'x' })), badFrame)
})

test('a members\' copy\'s prev must be a seq before its own', t => {
  t.is((decodeGossip(encodeGossip({ ...gossip([]), prev: 37 })) as Gossip).prev, 37)
  t.throws(() => decodeGossip(wire.pack({ ...gossip([]), prev: 42 })), badFrame, 'its own seq')
  t.throws(() => decodeGossip(wire.pack({ ...gossip([]), prev: -1 })), badFrame)
  t.throws(() => decodeGossip(wire.pack({ ...gossip([]), prev: 'x' })), badFrame)
})

test('an envelope that is not a bounded deflate of one gossip is E_BAD_FRAME', t => {
  const g = wire.pack(gossip(lines(3)))
  const z = (b: Uint8Array): Buffer => deflateRawSync(b, { dictionary: GOSSIP_DICTIONARY })
  t.notThrows(() => decodeGossip(envelope(z(g))), 'the well-formed envelope reads')
  t.throws(() => decodeGossip(envelope('not bytes')), badFrame)
  t.throws(() => decodeGossip(envelope(Buffer.from('not deflate at all'))), badFrame)
  t.throws(() => decodeGossip(envelope(z(g), 6)), badFrame, 'another version')
  t.throws(() => decodeGossip(envelope(z(envelope(z(g))))), badFrame, 'an envelope inside an envelope')
  // A bomb: 1 MiB of zeros deflates to about 1 KiB.
  const bomb = z(Buffer.alloc(GOSSIP_MAX_INFLATED * 16))
  t.true(bomb.length < 4096)
  t.throws(() => decodeGossip(envelope(bomb)), badFrame, 'inflates past the bound')
  t.throws(() => decodeGossip(envelope(z(wire.pack({ ...gossip([]), keys: 'x' })))), badFrame, 'the inner message is validated as any gossip')
})
