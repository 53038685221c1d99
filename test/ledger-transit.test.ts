/**
 * The ledger's per-key count of tokens in transit (src/cluster/ledger.ts):
 * kept in step with the outboxes as grants are queued, acked (in part, twice,
 * out of order) and stranded, and compared with the sum a scan of the
 * unacked grants gives, over a seeded random run.
 */
import test from 'ava'
import { Ledger } from '../src/cluster/ledger.js'
import type { Grant } from '../src/cluster/messages.js'
import { Rng } from '../src/sim/rng.js'

test('grants, acks and strands move a key\'s transit; settled keys are named once', t => {
  const l = new Ledger('a', 'ea')
  l.grant('b', 'eb', [['day', 5, 0]], 0)
  l.grant('b', 'eb', [['day', 3, 0], ['sig:1', 1, 0]], 0)
  l.grant('c', 'ec', [['day', 2, 0]], 0)
  t.is(l.inTransitOf('day'), 10)
  t.is(l.inTransitOf('sig:1'), 1)
  t.is(l.inTransitOf('other'), 0)
  t.deepEqual(l.settledKeys(), [], 'nothing settled yet')
  // b acks its first grant, then the same again (nothing more), then an ack from a wrong epoch.
  l.ack('b', 'eb', 1)
  l.ack('b', 'eb', 1)
  l.ack('b', 'old', 2)
  t.is(l.inTransitOf('day'), 5)
  t.deepEqual(l.settledKeys(), ['day'])
  t.deepEqual(l.settledKeys(), [], 'named once')
  // b restarts: its second grant can never be applied (stranded, counted as such), and leaves transit.
  const lost = l.peerEpoch('b', 'eb2')
  t.deepEqual([...lost], [['day', 3], ['sig:1', 1]])
  t.is(l.stranded, 4)
  t.is(l.inTransitOf('day'), 2)
  t.is(l.inTransitOf('sig:1'), 0)
  t.deepEqual(l.settledKeys().sort(), ['day', 'sig:1'])
  // c is forgotten: the same.
  l.forgetPeer('c')
  t.is(l.inTransitOf('day'), 0)
  t.is(l.unackedTotal(), 0)
})

test('over a random run, each key\'s transit equals the sum over the unacked grants', t => {
  const rng = new Rng(7)
  const l = new Ledger('a', 'ea')
  const peers = ['b', 'c', 'd']
  const epochs = new Map(peers.map(p => [p, `${p}1`]))
  const keys = ['k0', 'k1', 'k2', 'k3']
  // The test's own record: every grant made and not yet acked or stranded.
  let open: Grant[] = []
  const acked = new Map<string, number>()
  const issued = new Map<string, number>()
  for (let step = 0; step < 3000; step++) {
    const p = rng.pick(peers)
    const e = epochs.get(p) as string
    const r = rng.next()
    if (r < 0.5) {
      const items = keys.filter(() => rng.chance(0.4)).map(k => [k, rng.int(1, 9), 0] as [string, number, number])
      if (items.length > 0) {
        const g = l.grant(p, e, items, step)
        open.push(g)
        issued.set(`${p}/${e}`, g.seq)
      }
    } else if (r < 0.9) {
      // An ack, sometimes stale, sometimes beyond the last grant.
      const mine = open.filter(g => g.to === p && g.toEpoch === e)
      const upTo = (mine.at(-1)?.seq ?? 0) + rng.int(-3, 2)
      l.ack(p, e, upTo)
      // An ack covers only grants that exist: one for more than was sent is taken for all of them.
      const was = acked.get(`${p}/${e}`) ?? 0
      const now = Math.max(was, Math.min(upTo, issued.get(`${p}/${e}`) ?? 0))
      acked.set(`${p}/${e}`, now)
      open = open.filter(g => !(g.to === p && g.toEpoch === e && g.seq <= now))
    } else {
      // The peer restarts: grants to its old epoch are stranded.
      const next = `${p}${step}`
      epochs.set(p, next)
      l.peerEpoch(p, next)
      open = open.filter(g => g.to !== p || g.toEpoch === next)
    }
    if (step % 50 === 0 || step === 2999) {
      for (const k of keys) {
        const want = open.reduce((n, g) => n + g.items.reduce((m, [ik, a]) => m + (ik === k ? a : 0), 0), 0)
        t.is(l.inTransitOf(k), want, `step ${step}, key ${k}`)
      }
    }
  }
})
