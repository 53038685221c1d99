/**
 * Repeated gossips as `hb`s (gossip-repeat.ts): what a sender sends whole
 * and what as an `hb`, what a receiver reads them as, the wire form, and a
 * simulated cluster where quiet members and seeds' copies go as `hb`s.
 */
import test from 'ava'
import { decodeGossip, encodeGossip } from '../src/cluster/gossip-codec.js'
import { FULL_EVERY, RepeatReader, RepeatSender } from '../src/cluster/gossip-repeat.js'
import { CLUSTER_VERSION, type Gossip, type Hb } from '../src/cluster/messages.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import { wire } from '../src/cluster/wire.js'
import { rule } from './helpers/rules.js'
import { handCore } from './helpers/hand-core.js'

const quiet = (seq: number, extra: Partial<Gossip> = {}): Gossip => ({
  v: CLUSTER_VERSION, t: 'gossip', node: 'm1', epoch: 'm1.3.abcdef', inc: 3, seq, now: 1_800_000_000_000 + 1000 * seq,
  pending: [], carries: [], cfg: 'c0ffee', rules: { api: '991f2147f236ddca' }, keys: [], acks: [], fenced: true, nolease: true, alloc: false, ...extra
})

test('a sender repeats a quiet gossip as hbs, at most FULL_EVERY - 1 in a row, a new version whole twice, and whole when a peer may not hold it; news goes as it is', t => {
  const s = new RepeatSender()
  const first = s.next(quiet(1), false) as Gossip
  t.is(first.t, 'gossip')
  t.is(first.hv, 1, 'a repeatable gossip gets a version')
  t.is(s.next(quiet(2), false).t, 'gossip', 'a new version goes whole twice')
  const hbs: Hb[] = []
  for (let seq = 3; seq < 3 + FULL_EVERY - 1; seq++) {
    const m = s.next(quiet(seq), false)
    t.is(m.t, 'hb', `gossip ${seq} repeats the first`)
    hbs.push(m as Hb)
  }
  t.deepEqual(hbs[0], { v: CLUSTER_VERSION, t: 'hb', node: 'm1', epoch: 'm1.3.abcdef', inc: 3, seq: 3, now: 1_800_000_003_000, hv: 1 })
  let seq = 3 + FULL_EVERY - 1
  t.is(s.next(quiet(seq++), false).t, 'gossip', 'whole again after FULL_EVERY - 1 hbs')
  t.is(s.next(quiet(seq++), true).t, 'gossip', 'whole while a peer may not hold it')
  const news = s.next(quiet(seq++, { keys: [['k', 1, 0, 0, 0, 0, 0, 0]] }), false) as Gossip
  t.is(news.hv, undefined, 'a gossip with key lines is never repeated')
  t.is(s.next(quiet(seq++), false).t, 'hb', 'after news, the last version still stands')
  t.is(s.next(quiet(seq++, { heard: [['a', 1, 2]] }), false).hv, undefined, 'echoes are news')
  const changed = s.next(quiet(seq++, { fenced: undefined }), false) as Gossip
  t.is(changed.t, 'gossip', 'what it says changed: whole')
  t.is(changed.hv, 2, 'under a new version')
  t.is(s.next(quiet(seq++, { fenced: undefined }), false).t, 'gossip', 'twice')
  t.is(s.next(quiet(seq++, { fenced: undefined }), false).t, 'hb')
  t.is(s.repeats, FULL_EVERY - 1 + 2)
})

test('a receiver reads an hb as the whole gossip it repeats, with its own seq, time and prev; one it cannot place it drops', t => {
  const s = new RepeatSender()
  const r = new RepeatReader()
  const whole = s.next(quiet(1, { prev: undefined }), false) as Gossip
  s.next(quiet(2), false)
  const hb = { ...(s.next(quiet(3), false) as Hb), seq: 2, now: quiet(2).now }
  t.is(hb.t, 'hb')
  t.is(r.expand(hb), null, 'no whole gossip held yet: dropped')
  r.whole(whole)
  t.deepEqual(r.expand(hb), { ...quiet(2), hv: 1 }, 'the sender\'s gossip 2, as it built it')
  t.deepEqual(r.expand({ ...hb, prev: 1 }), { ...quiet(2), hv: 1, prev: 1 }, 'a members\' copy\'s prev comes from the hb')
  t.is(r.expand({ ...hb, hv: 2 }), null, 'another version')
  t.is(r.expand({ ...hb, epoch: 'm1.4.fedcba', inc: 4 }), null, 'another incarnation')
  t.is(r.expand({ ...hb, epoch: 'm1.3.999999' }), null, 'another epoch under the same incarnation number')
  r.whole(quiet(5, { keys: [['k', 1, 0, 0, 0, 0, 0, 0]] }))
  t.deepEqual(r.expand(hb), { ...quiet(2), hv: 1 }, 'a gossip with news leaves the last whole one kept')
  t.deepEqual(r.counters, { read: 3, dropped: 4 })
})

test('on the wire an hb is a short array, checked as any message', t => {
  const h: Hb = { v: CLUSTER_VERSION, t: 'hb', node: 'm1', epoch: 'm1.3.abcdef', inc: 3, seq: 9, now: 1_800_000_000_123.5, hv: 4, prev: 7 }
  const bytes = encodeGossip(h)
  t.deepEqual(wire.unpack(bytes), [CLUSTER_VERSION, 'hb', 'm1', 'm1.3.abcdef', 3, 9, 1_800_000_000_123.5, 4, 7])
  t.deepEqual(decodeGossip(bytes), h)
  const { prev: _, ...noPrev } = h
  t.deepEqual(decodeGossip(encodeGossip(noPrev)), noPrev)
  t.true(bytes.byteLength < 45, `${bytes.byteLength} bytes`)
  t.true(bytes.byteLength * 2 < encodeGossip(quiet(9)).byteLength, 'under half a quiet gossip\'s')
  const bad = { code: 'E_BAD_FRAME' }
  t.throws(() => decodeGossip(wire.pack([CLUSTER_VERSION, 'hb', 'm1', 'e', 3, 9, 0])), bad, 'too short')
  t.throws(() => decodeGossip(wire.pack([CLUSTER_VERSION, 'hb', 'm1', 'e', 3, 9, 0, 1, 9])), bad, 'prev not before seq')
  t.throws(() => decodeGossip(wire.pack([CLUSTER_VERSION, 'hb', 'm1', 'e', 3, 9, 0, -1])), bad, 'a negative version')
  t.throws(() => decodeGossip(wire.pack([CLUSTER_VERSION - 1, 'hb', 'm1', 'e', 3, 9, 0, 1])), bad, 'another protocol version')
  t.throws(() => decodeGossip(wire.pack([CLUSTER_VERSION, 'want', 'm1', 'e', 3, 9, 0, 1])), bad, 'an array that is not an hb')
})

test('in a cluster of members that forward to the seeds, quiet gossips and copies go as hbs, are read as the gossips they repeat, and every check holds, crashes and restarts included', t => {
  const r0 = rule({ name: 'api', match: 'k:*', algorithm: 'fixed-window', limit: 100, perMs: 1000, mode: 'hard', decide: 'seeds' })
  for (const name of ['keys100', 'crash-restart', 'churn', 'lossy']) {
    let read = 0
    let dropped = 0
    let sent = 0
    const r = runSim({
      scenario: scenario(name), nodes: 12, seedNodes: 3, seed: 2, mode: 'hard', rule: r0, durationMs: 8000, gossipIntervalMs: 250,
      sabotage: (vc, startMs) => {
        vc.at(startMs + 7999, () => {
          for (const core of vc.cores.values()) {
            read += core.gossip.repeat.reader.counters.read
            dropped += core.gossip.repeat.reader.counters.dropped
            sent += core.gossip.repeat.own.repeats + core.gossip.repeat.copy.repeats
          }
        })
      }
    })
    t.true(r.ok, `${name}: ${r.failures.join('; ')}`)
    t.is(r.overshoot, 0, name)
    t.log(`${name}: ${sent} hbs sent, ${read} read, ${dropped} dropped`)
    t.true(sent > 20, `${name}: ${sent} hbs sent`)
    t.true(read > 4 * dropped, `${name}: ${read} hbs read, ${dropped} dropped`)
  }
})

test('a gossip refused for its name (another peer id speaking as the sender) is not kept: the sender\'s hbs stay readable', t => {
  const rules = [rule({ name: 'day', limit: 100, perMs: 86_400_000 })]
  const a = handCore('a', rules)
  const b = handCore('b', rules)
  // b's gossips to a, from b's listed peer id, until a has read an hb of b's.
  let last: Gossip | null = null
  let hb: Hb | null = null
  for (let ms = 0; ms < 10_000 && hb === null; ms += 50) {
    for (const o of b.tick(ms)) {
      if (o.kind !== 'gossip') continue
      if (o.msg.t === 'hb' && last !== null) hb = o.msg
      else if (o.msg.t === 'gossip' && o.msg.hv !== undefined) last = o.msg
      a.onGossip(o.msg, 'id:b', ms)
    }
  }
  if (hb === null || last === null) { t.fail('b sent no hb'); return }
  const read = a.gossip.repeat.reader.counters.read
  t.true(read >= 1, 'a read b\'s hbs')
  // Another peer id, in b's name, a gossip of b's version under another epoch: refused, and not kept.
  t.not(a.onGossip({ ...last, epoch: 'b.forged', seq: last.seq + 100 }, 'id:x', 10_000), 'ok')
  const dropped = a.gossip.repeat.reader.counters.dropped
  a.onGossip({ ...hb, epoch: 'b.forged', seq: last.seq + 101 }, 'id:x', 10_000)
  t.is(a.gossip.repeat.reader.counters.dropped, dropped + 1, 'nor is an hb of it read: dropped')
  t.is(a.onGossip({ ...hb, seq: hb.seq + 200, now: hb.now + 1 }, 'id:b', 10_000), 'ok')
  t.is(a.gossip.repeat.reader.counters.read, read + 1, 'b\'s own next hb is still read as its gossip')
})
