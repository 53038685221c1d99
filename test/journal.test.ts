/**
 * The books journal (journal.ts) and recovery after a crash (recovery.ts,
 * persist.ts): the codec, and on the simulator (virtual clock only) that a
 * node killed and restarted gets its tokens back without ever spending a
 * token twice in a window, and that the checks catch a recovery that does
 * not defer, or a journal that misses a give.
 */
import test from 'ava'
import { BooksJournal, CHECKPOINT_EVERY, nextJournal, replayJournal, type JournalCheckpoint } from '../src/cluster/journal.js'
import { isQuotadError } from '../src/errors.js'
import { homeNode } from '../src/core/share.js'
import { Recovery } from '../src/cluster/recovery.js'
import { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { limits, rule } from './helpers/rules.js'

const T0 = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)

function cp (over: Partial<JournalCheckpoint> = {}): JournalCheckpoint {
  return { v: 1, node: 'a', cluster: 'c', inc: 2, epoch: 'e2', carries: [], allocate: true, rules: [], keys: [['k', 7]], ...over }
}

test('replay: checkpoint plus every batch; a torn last line is ignored', t => {
  const text = `${JSON.stringify(cp())}\n[["k",-2],["x",3]]\n[["k",1]]\n[["k",-1`
  const r = replayJournal(text, 'j', 'a', 'c')
  t.true(r.torn)
  t.deepEqual(r.books.get('k'), { base: 7, delta: -1 })
  t.deepEqual(r.books.get('x'), { base: undefined, delta: 3 })
})

test('replay: a bad line before the last, another node\'s or cluster\'s journal, a bad checkpoint: E_JOURNAL_INVALID naming where', t => {
  const cases: Array<[string, RegExp]> = [
    [`${JSON.stringify(cp())}\n[["k",-2\n[["k",1]]\n`, /line 2: is not JSON/],
    [`${JSON.stringify(cp({ node: 'b' }))}\n`, /node: belongs to node "b"/],
    [`${JSON.stringify(cp({ cluster: 'x' }))}\n`, /cluster: belongs to cluster "x"/],
    [`${JSON.stringify({ ...cp(), inc: 0 })}\n`, /inc: must be a positive integer/],
    [`${JSON.stringify(cp())}\n[["k","2"]]\n`, /line 2: holds an entry that is not \[key, number\]/],
    ['', /line 1: the file is empty/],
    ['{"v":1\n', /line 1: is not JSON/]
  ]
  for (const [text, re] of cases) {
    const err = t.throws(() => replayJournal(text, 'j', 'a', 'c'))
    t.true(isQuotadError(err) && err.code === 'E_JOURNAL_INVALID', String(err))
    t.regex(err?.message ?? '', re)
  }
})

test('BooksJournal: a checkpoint first, then batches; a give asks for a sync; a checkpoint every CHECKPOINT_EVERY batches', t => {
  const j = new BooksJournal()
  let text = ''
  const checkpoint = (): JournalCheckpoint => cp({ keys: [] })
  const first = j.take(checkpoint)
  t.truthy(first?.checkpoint)
  text = nextJournal(text, first)
  t.is(j.take(checkpoint), null, 'nothing pending')
  j.record('k', 5, false)
  j.record('k', -2, false)
  const credit = j.take(checkpoint)
  t.false(credit?.sync)
  t.is(credit?.batch, '[["k",3]]')
  text = nextJournal(text, credit)
  j.record('k', -1, true)
  t.true(j.mustSync)
  const give = j.take(checkpoint)
  t.true(give?.sync)
  text = nextJournal(text, give)
  t.deepEqual(replayJournal(text, 'j', 'a', 'c').books.get('k'), { base: undefined, delta: 2 })
  // A change that came from or went to a peer also moves what this node holds of that peer's tokens.
  j.record('k', 4, false, ['b', 'eb'])
  j.record('k', -1, true, ['b', 'eb'])
  text = nextJournal(text, j.take(checkpoint))
  const r = replayJournal(text, 'j', 'a', 'c')
  t.deepEqual(r.books.get('k'), { base: undefined, delta: 5 })
  t.is(r.peers.get('b')?.get('eb')?.get('k'), 3)
  let checkpoints = 0
  for (let i = 0; i < CHECKPOINT_EVERY; i++) {
    j.record('k', 1, false)
    const w = j.take(checkpoint)
    if (w?.checkpoint != null) checkpoints++
    text = nextJournal(text, w)
  }
  t.is(checkpoints, 1, 'one checkpoint in CHECKPOINT_EVERY batches')
  t.true(text.split('\n').length < CHECKPOINT_EVERY, 'a checkpoint replaces the file')
})

test('recovery horizon: the first moment a spend by the crashed process has returned, per algorithm', t => {
  const r = new Recovery(10_250, 500)
  const w = { limit: 10, burst: 10 }
  t.is(r.horizon({ algorithm: 'fixed-window', perMs: 1000, ...w }), 11_000)
  t.is(r.horizon({ algorithm: 'sliding-window', perMs: 1000, ...w }), 12_000)
  t.is(r.horizon({ algorithm: 'sliding-log', perMs: 1000, ...w }), 11_750)
  t.is(r.horizon({ algorithm: 'token-bucket', perMs: 1000, limit: 10, burst: 10 }), 11_750)
  // A burst above the limit takes per × burst / limit to refill once emptied.
  t.is(r.horizon({ algorithm: 'token-bucket', perMs: 1000, limit: 10, burst: 40 }), 14_750)
})

/** A minute's window, so that the restart falls in the window the crashed node spent in. */
function cluster (seed: number): VirtualCluster {
  return new VirtualCluster({
    nodes: ['a', 'b', 'c'],
    rules: [rule({ name: 'api', limit: 60, perMs: 60_000 }), rule({ name: 'sig', match: 'sig:*', limit: 6, perMs: 60_000 })],
    limits: limits(),
    seed,
    startMs: T0 + 1000
  })
}

/** Ask for `key` at `node` until denied `misses` times in a row (or `max` asks); returns how many were allowed. */
function drain (vc: VirtualCluster, node: string, key: string, max = 200): number {
  let got = 0
  let misses = 0
  for (let i = 0; i < max && misses < 20; i++) {
    if (vc.acquire(node, key, 1)?.allowed === true) { got++; misses = 0 } else misses++
    vc.runUntil(vc.now + 20)
  }
  return got
}

/** Every node asks until the window's tokens are gone, in the window the crash happened in; returns what the whole window admitted. */
function crashRestartWindow (vc: VirtualCluster, key: string): { before: number, after: number, restored: number } {
  vc.runUntil(vc.now + 1500)
  // c is busy: it asks for (and gets) more than its share, and spends it all.
  let before = drain(vc, 'c', key)
  before += drain(vc, 'a', key, 5)
  vc.crash('c')
  vc.runUntil(vc.now + 1500)
  vc.start('c')
  const restored = vc.cores.get('c')?.recovery?.restoredTokens ?? NaN
  vc.runUntil(vc.now + 1000)
  let after = 0
  for (const n of ['a', 'b', 'c']) after += drain(vc, n, key)
  return { before, after, restored }
}

test('kill -9 and restart: the node recovers its books, and the window admits no more than its limit', t => {
  for (const seed of [1, 2, 3]) {
    const vc = cluster(seed)
    const { before, after, restored } = crashRestartWindow(vc, 'api')
    t.true(before > 20, `c spent more than its share before the crash: ${before}`)
    t.true(restored > 0, `c restored ${restored}`)
    t.true(before + after <= 60, `seed ${seed}: the window admitted ${before} + ${after}`)
    // The next window: everything is back, c's own recovered share included.
    vc.runUntil(T0 + 60_000 + 500)
    let next = 0
    for (const n of ['a', 'b', 'c']) next += drain(vc, n, 'api')
    t.true(next >= 57, `seed ${seed}: the next window admitted ${next} of 60`)
    const a = vc.audit.account('api')
    t.true(Math.abs(a.error) < 1e-6, `conservation: ${JSON.stringify(a)}`)
  }
})

test('a glob key at its home: the restarted home does not spend its share twice in the window', t => {
  const vc = cluster(4)
  let key = ''
  for (let i = 0; key === ''; i++) if (homeNode(`sig:${i}`, vc.seeds) === 'c') key = `sig:${i}`
  const { before, after } = crashRestartWindow(vc, key)
  t.true(before >= 5, `spent ${before}`)
  t.true(before + after <= 6, `the window admitted ${before} + ${after} of 6`)
})

test('the checks catch a recovery that does not defer, and a journal that misses a give', t => {
  // No deferral: the restarted node spends again, in the same window, what its predecessor spent.
  const orig = Recovery.prototype.horizon
  Recovery.prototype.horizon = function (this: Recovery) { return this.calStartMs }
  try {
    const vc = cluster(1)
    const { before, after } = crashRestartWindow(vc, 'api')
    t.true(before + after > 60, `without deferral the window admitted ${before} + ${after}`)
  } finally {
    Recovery.prototype.horizon = orig
  }
  // Gives not journaled: the restart restores tokens that had left, and the audit sees them created.
  const vc = cluster(1)
  const c = vc.cores.get('c')
  if (c === undefined) return t.fail('no c')
  const record = c.journal.record.bind(c.journal)
  c.journal.record = (k, d, sync) => { if (d > 0) record(k, d, sync) }
  vc.runUntil(vc.now + 1500)
  drain(vc, 'a', 'api')
  t.true(c.counters.tokensOut > 0, 'c gave')
  vc.crash('c')
  vc.runUntil(vc.now + 500)
  vc.start('c')
  t.true(vc.audit.account('api').error > 0, 'created tokens are reported')
})

test('token bucket with a burst above its limit: a recovered node waits for a full refill (per × burst / limit)', t => {
  for (const burst of [6, 60]) {
    const vc = new VirtualCluster({
      nodes: ['a', 'b', 'c'],
      rules: [rule({ name: 'api', algorithm: 'token-bucket', limit: 6, perMs: 60_000, burst })],
      limits: limits(),
      seed: 1,
      startMs: T0 + 1000
    })
    vc.runUntil(vc.now + 1500)
    const start = vc.now
    const before = drain(vc, 'c', 'api', 400)
    vc.crash('c')
    vc.runUntil(vc.now + 1500)
    vc.start('c')
    vc.runUntil(vc.now + 61_000)
    let after = 0
    for (const n of ['a', 'b', 'c']) after += drain(vc, n, 'api', 400)
    // One central bucket: at most its burst plus the refill since.
    const envelope = burst + 6 * (vc.now - start) / 60_000
    t.true(before + after <= envelope + 1, `burst ${burst}: admitted ${before} + ${after}, the envelope is ${envelope.toFixed(1)}`)
  }
})
