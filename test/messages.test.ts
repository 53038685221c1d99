/**
 * The cluster messages' parser (src/cluster/messages.ts) on gossip key lines:
 * the 8-field line of protocol v3 is read field by field; anything else (the
 * old 6-field line, a missing or extra field, a number that is negative,
 * not finite or not a number, another protocol version) is E_BAD_FRAME.
 */
import test from 'ava'
import { Packr } from 'msgpackr'
import { ErrorCodes } from '../src/errors.js'
import { CLUSTER_VERSION, KEY_LINE_FIELDS, parseMessage, type Gossip } from '../src/cluster/messages.js'

const packr = new Packr({ useRecords: false })

function gossip (keys: unknown[], v: number = CLUSTER_VERSION): Record<string, unknown> {
  return { v, t: 'gossip', node: 'b', epoch: 'eb', inc: 1, seq: 1, now: 5, pending: [], carries: [], cfg: 'h', rules: { day: 'x' }, keys, acks: [] }
}

/** Through msgpack, as the wire carries it. */
const wire = (m: unknown): unknown => packr.unpack(packr.pack(m))

test('an 8-field key line is read as [key, held, outstanding, rate, owed, debts, deferred, inTransitOut]', t => {
  t.is(KEY_LINE_FIELDS, 8)
  const g = parseMessage(wire(gossip([['day', 21, 40, 1.5, 0, 0, 3, 7], ['sig:1', 0.5, 0, 0, 0, -1, 0, 0]]))) as Gossip
  t.is(g.t, 'gossip')
  t.deepEqual(g.keys[0], ['day', 21, 40, 1.5, 0, 0, 3, 7])
  // debts -1 still means "unknown, spend nothing".
  t.deepEqual(g.keys[1], ['sig:1', 0.5, 0, 0, 0, Infinity, 0, 0])
})

test('malformed key lines are refused with E_BAD_FRAME', t => {
  const bad: Array<[string, unknown]> = [
    ['the old 6-field line', ['day', 21, 40, 1, 0, 0]],
    ['7 fields', ['day', 21, 40, 1, 0, 0, 3]],
    ['9 fields', ['day', 21, 40, 1, 0, 0, 3, 7, 1]],
    ['negative deferred', ['day', 21, 40, 1, 0, 0, -3, 7]],
    ['negative inTransitOut', ['day', 21, 40, 1, 0, 0, 3, -1]],
    ['infinite inTransitOut', ['day', 21, 40, 1, 0, 0, 3, Infinity]],
    ['NaN deferred', ['day', 21, 40, 1, 0, 0, NaN, 0]],
    ['a string for deferred', ['day', 21, 40, 1, 0, 0, '3', 0]],
    ['null for inTransitOut', ['day', 21, 40, 1, 0, 0, 3, null]],
    ['not an array', { key: 'day' }]
  ]
  for (const [what, entry] of bad) {
    const e = t.throws(() => parseMessage(wire(gossip([entry]))), undefined, what)
    t.is((e as { code?: string } | undefined)?.code, ErrorCodes.BAD_FRAME, what)
  }
})

test('a message of another protocol version is refused, whatever its lines', t => {
  for (const v of [CLUSTER_VERSION - 1, CLUSTER_VERSION + 1]) {
    const e = t.throws(() => parseMessage(wire(gossip([['day', 21, 40, 1, 0, 0, 3, 7]], v))))
    t.is((e as { code?: string } | undefined)?.code, ErrorCodes.BAD_FRAME)
  }
})

test("a gossip's sync names a message no later than itself: read back as sent, absent when not sent, refused otherwise", t => {
  const g = (sync: unknown): Record<string, unknown> => ({ ...gossip([]), seq: 7, sync })
  t.is((parseMessage(wire(g(7))) as Gossip).sync, 7)
  t.is((parseMessage(wire(g(3))) as Gossip).sync, 3)
  t.false('sync' in (parseMessage(wire(gossip([]))) as Gossip), 'absent stays absent')
  for (const bad of [8, -1, 2.5, '3', Infinity]) {
    const e = t.throws(() => parseMessage(wire(g(bad))), undefined, String(bad))
    t.is((e as { code?: string } | undefined)?.code, ErrorCodes.BAD_FRAME, String(bad))
  }
})

test("a gossip's wg (its wall clock minus its calendar) is read back as sent, absent when 0 or not sent, refused when not a number within a year", t => {
  const g = (wg: unknown): Record<string, unknown> => ({ ...gossip([]), wg })
  t.is((parseMessage(wire(g(-4000))) as Gossip).wg, -4000)
  t.is((parseMessage(wire(g(12.5))) as Gossip).wg, 12.5)
  t.false('wg' in (parseMessage(wire(g(0))) as Gossip), '0 reads as absent')
  t.false('wg' in (parseMessage(wire(gossip([]))) as Gossip), 'absent stays absent')
  for (const bad of [400 * 24 * 3600 * 1000, -400 * 24 * 3600 * 1000, '3', Infinity, NaN, true]) {
    const e = t.throws(() => parseMessage(wire(g(bad))), undefined, String(bad))
    t.is((e as { code?: string } | undefined)?.code, ErrorCodes.BAD_FRAME, String(bad))
  }
})
