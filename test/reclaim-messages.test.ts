/**
 * The reclaim log's messages are input from peers: every shape round-trips
 * through the wire form (and msgpack), and anything malformed or over a
 * bound is refused with E_BAD_FRAME and a stable `{path, reason}`.
 */
import test from 'ava'
import { Packr } from 'msgpackr'
import { CLUSTER_VERSION } from '../src/cluster/messages.js'
import { gossipLogToWire, parseGossipLog, parseReclaimMessage, RECLAIM_BOUNDS, toWire, wireValue, type ReclaimMessage } from '../src/cluster/reclaim-messages.js'
import { valueDigest, type ReclaimValue } from '../src/cluster/reclaim-value.js'

const packr = new Packr({ useRecords: false })
const hdr = { v: CLUSTER_VERSION, node: 'a', epoch: 'e1' }
const value: ReclaimValue = { slot: 3, D: [{ node: 'd', acct: 2, inc: 4, epoch: 'ed' }], heir: { node: 'a', epoch: 'e1', acct: 1 }, listed: [{ node: 'b', acct: 7 }] }
const ballot = { round: 2, node: 'a' }

const samples: ReclaimMessage[] = [
  { ...hdr, t: 'prepare', slot: 3, ballot },
  { ...hdr, t: 'promise', slot: 3, ballot },
  { ...hdr, t: 'promise', slot: 3, ballot, accepted: { ballot: { round: 1, node: 'c' }, value }, known: [['m', 2]], attested: [['d', 2, 4]] },
  { ...hdr, t: 'nack', slot: 3, promised: { round: 5, node: 'c' } },
  { ...hdr, t: 'nack', slot: 3, promised: { round: 0, node: '' }, through: 4 },
  { ...hdr, t: 'accept', slot: 3, ballot, value },
  { ...hdr, t: 'accepted', slot: 3, ballot },
  { ...hdr, t: 'log?', from: 1 },
  { ...hdr, t: 'log', from: 3, through: 3, entries: [{ slot: 3, value }] }
]

for (const [i, m] of samples.entries()) {
  test(`${m.t} (sample ${i}) round-trips through the wire form and msgpack`, t => {
    t.deepEqual(parseReclaimMessage(packr.unpack(packr.pack(toWire(m)))), m)
  })
}

function mutate (m: ReclaimMessage, edit: (w: Record<string, unknown>) => void): Record<string, unknown> {
  const w = toWire(m)
  edit(w)
  return w
}

const accept = samples[5]
const bad: Array<[string, unknown, string, string]> = [
  ['not a map', [1, 2], '$', 'not-a-map'],
  ['another version', mutate(accept, w => { w.v = 1 }), 'v', 'version'],
  ['an unknown type', mutate(accept, w => { w.t = 'decree' }), 't', 'type'],
  ['a bad sender name', mutate(accept, w => { w.node = 'a b' }), 'node', 'name'],
  ['slot 0', mutate(accept, w => { w.slot = 0 }), 'slot', 'whole-number'],
  ['a fractional slot', mutate(accept, w => { w.slot = 1.5 }), 'slot', 'whole-number'],
  ['round 0 in a ballot', mutate(accept, w => { w.ballot = [0, 'a'] }), 'ballot[0]', 'whole-number'],
  ['a ballot that is not a pair', mutate(accept, w => { w.ballot = [1] }), 'ballot', 'tuple'],
  ['a value for another slot', mutate(accept, w => { w.value = wireValue({ ...value, slot: 4 }) }), 'value.slot', 'slot-mismatch'],
  ['a negative inc in D', mutate(accept, w => { (w.value as unknown[])[1] = [['d', 2, -1, 'ed']] }), 'value.D[0].inc', 'whole-number'],
  ['a string acct in listed', mutate(accept, w => { (w.value as unknown[])[3] = [['b', '7']] }), 'value.listed[0].acct', 'whole-number'],
  ['too many dead accounts', mutate(accept, w => { (w.value as unknown[])[1] = Array.from({ length: RECLAIM_BOUNDS.maxD + 1 }, (_, i) => [`d${i}`, 1, 1, 'e']) }), 'value.D', 'too-many'],
  ['too many listed accounts', mutate(accept, w => { (w.value as unknown[])[3] = Array.from({ length: RECLAIM_BOUNDS.maxListed + 1 }, (_, i) => [`l${i}`, 1]) }), 'value.listed', 'too-many'],
  ['a heir without acct', mutate(accept, w => { (w.value as unknown[])[2] = ['a', 'e1'] }), 'value.heir', 'tuple'],
  ['a nack with neither promised nor through', mutate(samples[3], w => { delete w.promised }), 'promised', 'tuple'],
  ['a promise with a bad known entry', mutate(samples[2], w => { w.known = [['m']] }), 'known[0]', 'tuple'],
  ['a log with too many entries', mutate(samples[8], w => { w.entries = Array.from({ length: RECLAIM_BOUNDS.maxEntries + 1 }, () => [3, wireValue(value)]) }), 'entries', 'too-many'],
  ['a log entry whose value is for another slot', mutate(samples[8], w => { w.entries = [[4, wireValue(value)]] }), 'entries[0].value.slot', 'slot-mismatch'],
  ['log? from 0', mutate(samples[7], w => { w.from = 0 }), 'from', 'whole-number']
]

for (const [what, raw, path, reason] of bad) {
  test(`refused: ${what} (E_BAD_FRAME at ${path}, ${reason})`, t => {
    const err = t.throws(() => parseReclaimMessage(raw))
    t.like(err, { code: 'E_BAD_FRAME', details: { path, reason } })
  })
}

test('a gossip log section round-trips; a digest that is not its value\'s is refused', t => {
  const g = { accepted: [{ slot: 3, ballot, digest: valueDigest(value), value }], chosen: [{ slot: 2, value: { ...value, slot: 2 } }] }
  t.deepEqual(parseGossipLog(packr.unpack(packr.pack(gossipLogToWire(g)))), g)
  const forged = gossipLogToWire({ ...g, accepted: [{ ...g.accepted[0], digest: valueDigest({ ...value, heir: { ...value.heir, acct: 9 } }) }] })
  t.like(t.throws(() => parseGossipLog(forged)), { code: 'E_BAD_FRAME', details: { path: 'log.accepted[0].digest', reason: 'digest' } })
  t.like(t.throws(() => parseGossipLog({ accepted: 'x', chosen: [] })), { code: 'E_BAD_FRAME', details: { path: 'log.accepted', reason: 'array' } })
})

test('a value at the bounds with long names fits the 64 KiB frame', t => {
  const long = (p: string, i: number) => `${p}${i}`.padEnd(64, 'x')
  const big: ReclaimValue = {
    slot: 1,
    D: Array.from({ length: RECLAIM_BOUNDS.maxD }, (_, i) => ({ node: long('d', i), acct: 1e9, inc: 1e9, epoch: long('e', i) })),
    heir: { node: long('h', 0), epoch: long('e', 0), acct: 1e9 },
    listed: Array.from({ length: RECLAIM_BOUNDS.maxListed }, (_, i) => ({ node: long('l', i), acct: 1e9 }))
  }
  const bytes = packr.pack(toWire({ ...hdr, t: 'accept', slot: 1, ballot, value: big })).length
  t.true(bytes < 64 * 1024, `${bytes} bytes`)
})
