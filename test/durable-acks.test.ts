/**
 * A replicating seed's acks wait for its journal copies (durable-acks.ts):
 * driven by hand through JournalReplication, as replication.test.ts does,
 * and in the simulator (`seed-crash-receiving`): a seed killed for good
 * while credits it applied are not yet in a quorum of its copies loses
 * nothing beyond what was left of its reservations, because their givers
 * still hold those grants and take back what its heir's copy lacks. With
 * the seed acking at once (the build before), the same runs lose more.
 */
import test from 'ava'
import { DurableAcks } from '../src/cluster/durable-acks.js'
import { BooksJournal, type JournalCheckpoint } from '../src/cluster/journal.js'
import { Quorum } from '../src/cluster/quorum.js'
import { ReplicaStore } from '../src/cluster/replica-store.js'
import { JournalReplication } from '../src/cluster/replication.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { sweep } from './helpers/long.js'

test('DurableAcks: the mark acked is the one before the first credit whose write is not durable', t => {
  const d = new DurableAcks()
  t.is(d.ackable('g', 'g.1', 3), 3, 'nothing waits: what is applied is acked')
  d.applied('g', 'g.1', 3) // seq 4 credited
  d.applied('g', 'g.1', 4) // seq 5, same write
  t.is(d.ackable('g', 'g.1', 5), 3)
  d.place({ gen: 1, end: 100 })
  d.applied('g', 'g.1', 5) // seq 6, the next write
  d.place({ gen: 1, end: 200 })
  t.is(d.size, 2)
  d.advance(p => p.end <= 100)
  t.is(d.ackable('g', 'g.1', 6), 5, 'the first write is at a quorum: 4 and 5 are acked, 6 waits')
  t.is(d.ackable('h', 'h.1', 2), 2, 'another giver is not held up')
  d.advance(() => true)
  t.true(d.idle)
  t.is(d.ackable('g', 'g.1', 6), 6)
})

test('a replicating seed acks a credit once its write is on its disk and a quorum of copies; a node that does not replicate acks at once', t => {
  const cp = (r: JournalReplication) => (): JournalCheckpoint =>
    ({ v: 1, node: 'a', cluster: 'c', inc: 1, gen: r.nextGen, epoch: 'a.1', carries: [], allocate: true, rules: [], keys: [] })
  const r = new JournalReplication({ node: 'a', epoch: 'a.1', inc: 1, enabled: true, quorum: new Quorum(['a', 'b', 'c']), version: 9, timeoutMs: 1000, retryMs: 250 })
  const j = new BooksJournal()
  const b = new ReplicaStore()
  r.localDone(r.take(j, cp(r))!.pos)
  j.record('k', 5, true, ['g', 'g.1'])
  j.mark('g', 'g.1', 1)
  r.applied('g', 'g.1', 0)
  t.deepEqual(r.ackable([['g', 'g.1', 1]]), [['g', 'g.1', 0]], 'not written yet')
  const w = r.take(j, cp(r))!
  r.localDone(w.pos)
  t.is(r.ackableFrom('g', 'g.1', 1), 0, 'on its own disk only: one of three is no quorum')
  t.is(r.acksWaiting, 1)
  for (const { to, msg } of r.outbound(1000, true)) {
    if (to !== 'b') { r.onFailed(to, 1000); continue }
    const c = b.accept(msg)
    if (c !== null) b.commit(c)
    r.onAck('b', b.ack('a', 'b', 'b.1', 9), 1000)
  }
  t.is(r.ackableFrom('g', 'g.1', 1), 1, 'a and b hold it: acked')
  t.is(r.acksWaiting, 0)

  const off = new JournalReplication({ node: 'm', epoch: 'm.1', inc: 1, enabled: false, quorum: new Quorum(['a', 'b', 'c']), version: 9, timeoutMs: 1000, retryMs: 250 })
  off.applied('g', 'g.1', 0)
  t.is(off.ackableFrom('g', 'g.1', 1), 1)
  t.is(off.acksWaiting, 0)
})

const RULE = { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1000ms', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 } as const

/** One run of seed-crash-receiving: its audit's tokens lost for good, and what the heirs' copies had left of reservations. */
function run (seed: number): { ok: boolean, failures: string[], lost: number, unspent: number } {
  let vc: VirtualCluster | undefined
  const r = runSim({ scenario: scenario('seed-crash-receiving'), nodes: 10, seedNodes: 3, seed, mode: 'hard', rule: RULE, durationMs: 10_000, gossipIntervalMs: 250, sabotage: v => { vc = v } })
  let unspent = 0
  for (const c of (vc as VirtualCluster).cores.values()) for (const e of c.heir.log) unspent += e.unspent
  return { ok: r.ok && r.overshoot === 0, failures: r.failures, lost: r.stranded, unspent }
}

// Seeds 1-16 in `npm run test:long`, 1-8 in `npm test` (test/helpers/long.ts).
const ALL_SEEDS = 16
const SEEDS = Array.from({ length: sweep(8, ALL_SEEDS) }, (_, i) => i + 1)

test.serial('seed-crash-receiving: a seed killed for good with credits not yet copied loses only what was left of its reservations', t => {
  let lost = 0
  for (const seed of SEEDS) {
    const o = run(seed)
    t.true(o.ok, `seed ${seed}: ${o.failures.join('; ')}`)
    t.true(o.lost <= o.unspent + 1e-6, `seed ${seed}: ${o.lost} lost, ${o.unspent} left of reservations`)
    lost += o.lost
  }
  t.log(`lost over ${SEEDS.length} runs: ${lost.toFixed(0)} tokens, all of them unspent reservations`)
})

test.serial('seed-crash-receiving with the seed acking at once (the build before): some run loses credits its copies never had', t => {
  const proto = JournalReplication.prototype
  const { ackable, ackableFrom } = proto
  proto.ackable = function (applied) { return applied }
  proto.ackableFrom = function (_g, _e, applied) { return applied }
  try {
    // Until the first run that loses more than the reservations: that one run is what the test asks for (the whole
    // seeds of `npm run test:long` are the bound).
    const over: number[] = []
    let ran = 0
    for (let seed = 1; seed <= ALL_SEEDS && over.length === 0; seed++) {
      const o = run(seed)
      ran++
      if (o.lost - o.unspent > 1e-6) over.push(o.lost - o.unspent)
    }
    t.log(`runs that lost more than the reservations: ${over.length} of the ${ran} run, ${over.reduce((a, b) => a + b, 0).toFixed(0)} tokens`)
    t.true(over.length > 0)
  } finally {
    proto.ackable = ackable
    proto.ackableFrom = ackableFrom
  }
})
