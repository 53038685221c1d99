/**
 * An insider that joins as a member (issue 46): a real libp2p node with
 * only the swarm key, admitted by the seeds under a free name, that then
 * lies in gossip and grants. Two seeds, a hard rule of 100 a day per key:
 * whatever it does, the seeds together admit at most 100 of a key, because
 * a member's grant is credited only against the seeds' own books of what
 * they lent it (grant-checks.ts, no-relay.ts `mayReturn`). And a member
 * that claims much and answers nothing does not keep the seeds from
 * admitting the whole 100.
 *
 * Each attack has its own key (rule) and its own rogue, on one cluster.
 * Spending goes through the seeds' sockets until they deny for a run of
 * rounds in a row (a round that admits anything starts the run again), or
 * until they admitted more than the limit.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import { wantItems } from '../src/cluster/messages.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { InsiderMember } from './helpers/insider-node.js'
import { eventually } from './helpers/proc.js'

const LIMIT = 100
const KEYS = ['d1', 'd2', 'd3', 'd4', 'd5']
const RULES = KEYS.map(k => ({ name: k, match: k, limit: LIMIT, per: '1d', algorithm: 'fixed-window', mode: 'hard' }))

interface Status {
  cluster: { epoch: string, peerId: string, counters: Record<string, number> }
  peers: Array<{ name: string, alive: boolean }>
}

let c: TestCluster
const seeds: Record<string, Status['cluster']> = {}
const clients: Record<string, QuotadClient> = {}
const rogues: InsiderMember[] = []

async function status (node: string): Promise<Status> {
  return await clients[node].status() as unknown as Status
}

test.before(async () => {
  c = await makeCluster(['a', 'b'], RULES)
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  for (const n of ['a', 'b']) {
    clients[n] = await QuotadClient.connect({ socketPath: c.sockets[n] })
    seeds[n] = (await status(n)).cluster
  }
})

test.after.always(async () => {
  for (const r of rogues) await r.stop().catch(() => undefined)
  for (const q of Object.values(clients)) await q.close().catch(() => undefined)
  await c?.stopAll()
})

/** A rogue that both seeds list as an alive peer (admitted); `setup` runs before its first gossip. */
async function joined (name: string, setup: (m: InsiderMember) => void): Promise<InsiderMember> {
  const m = await InsiderMember.start(c, name)
  rogues.push(m)
  setup(m)
  m.gossipEvery(100)
  await eventually(`a and b to admit ${name}`, async () => {
    for (const n of ['a', 'b']) if (!(await status(n)).peers.some(p => p.name === name && p.alive)) return false
    return true
  }, 60_000)
  return m
}

/** Spend `key` at both seeds until QUIET rounds in a row admit nothing, or more than the limit was admitted. */
async function spendAll (key: string): Promise<number> {
  const QUIET = 30
  let allowed = 0
  let quiet = 0
  while (quiet < QUIET && allowed <= LIMIT) {
    let got = 0
    for (const n of ['a', 'b']) for (let i = 0; i < 5; i++) if ((await clients[n].acquire(key)).allowed) got++
    allowed += got
    quiet = got === 0 ? quiet + 1 : 0
    // A round that got nothing waits a gossip interval: the seeds' wants between them may still move tokens.
    if (got === 0) await new Promise(resolve => setTimeout(resolve, 100))
  }
  return allowed
}

/** Both seeds' counters of grants refused, summed. */
async function refused (): Promise<number> {
  let n = 0
  for (const s of ['a', 'b']) n += (await status(s)).cluster.counters.grantsRefused ?? 0
  return n
}

test.serial('(a) a member that claims 1,000,000 and pushes 8 x 100 mints nothing', async t => {
  const m = await joined('ra', r => { r.keys = [['d1', 1_000_000, 0, 0, 0, 0, 0, 0]] })
  const before = await refused()
  for (let i = 0; i < 8; i++) {
    const to = i % 2 === 0 ? 'a' : 'b'
    const ack = await m.push(to, seeds[to].epoch, seeds[to].peerId, [['d1', 100, 0]])
    t.is(ack.t, 'ack')
    t.true(ack.refused, `push ${i + 1} to ${to} is refused`)
  }
  t.is(await refused() - before, 8)
  const allowed = await spendAll('d1')
  t.log(`admitted ${allowed} of ${LIMIT}`)
  t.true(allowed <= LIMIT, `admitted ${allowed} of ${LIMIT}`)
})

test.serial('(b) a member that claims nothing and pushes 25 at a time mints nothing', async t => {
  const m = await joined('rb', () => {})
  for (let i = 0; i < 12; i++) {
    const to = i % 2 === 0 ? 'a' : 'b'
    const ack = await m.push(to, seeds[to].epoch, seeds[to].peerId, [['d2', 25, 0]])
    t.true(ack.refused, `push ${i + 1} to ${to} is refused`)
  }
  const allowed = await spendAll('d2')
  t.log(`admitted ${allowed} of ${LIMIT}`)
  t.true(allowed <= LIMIT, `admitted ${allowed} of ${LIMIT}`)
})

test.serial('(c) a member that claims a share and answers the seeds\' wants with more than it holds mints nothing', async t => {
  const m = await joined('rc', r => {
    r.keys = [['d3', 50, 0, 0, 0, 0, 0, 0]]
    // Every want answered in full: the answer is within what was asked, never within what it holds.
    r.onWant = w => wantItems(w).map(([k, n]) => [k, n, 0])
  })
  // It borrows a few first, so that the seeds' books say it holds some of theirs (and they may ask it).
  let borrowed = 0
  for (const n of ['a', 'b']) {
    // Retried: its first stream to a seed may be reset while the connection is still being set up.
    const g = await eventually(`a grant from ${n}`, async () => await m.want(seeds[n].peerId, 'd3', 5).catch(() => undefined), 60_000)
    for (const [, k] of g.items ?? []) borrowed += k
  }
  const allowed = await spendAll('d3')
  t.log(`admitted ${allowed} of ${LIMIT}; it borrowed ${borrowed}, the seeds sent it ${m.wantsIn} wants`)
  t.true(allowed <= LIMIT, `admitted ${allowed} of ${LIMIT}`)
})

test.serial('(d) a member with another cluster hash and no rules gets no grant credited', async t => {
  const m = await joined('rd', r => { r.cfg = 'another-cluster'; r.rules = {} })
  for (let i = 0; i < 10; i++) {
    const to = i % 2 === 0 ? 'a' : 'b'
    const ack = await m.push(to, seeds[to].epoch, seeds[to].peerId, [['d4', 25, 0]])
    t.true(ack.refused, `push ${i + 1} to ${to} is refused`)
  }
  // It asks, too: a node whose file differs is given nothing.
  const g = await eventually('an answer from a', async () => await m.want(seeds.a.peerId, 'd4', 10).catch(() => undefined), 60_000)
  t.is(g.t, 'none')
  const allowed = await spendAll('d4')
  t.log(`admitted ${allowed} of ${LIMIT}`)
  t.true(allowed <= LIMIT, `admitted ${allowed} of ${LIMIT}`)
})

test.serial('(e) a member that claims 1e15 and never answers is not asked: the seeds admit the whole limit', async t => {
  const m = await joined('re', r => {
    r.keys = [['d5', 1e15, 0, 0, 0, 0, 0, 0]]
    r.onWant = () => 'never'
  })
  const qa = clients.a
  const qb = clients.b
  let allowed = 0
  await eventually('the seeds to admit the whole limit between them', async () => {
    for (const q of [qa, qb]) for (let i = 0; i < 5; i++) if ((await q.acquire('d5')).allowed) allowed++
    return allowed >= LIMIT
  }, 120_000)
  t.log(`admitted ${allowed}; the seeds sent it ${m.wantsIn} wants`)
  t.is(allowed, LIMIT)
  // The seeds never lent it a token of d5: their books say it holds none of theirs, so they don't ask it.
  t.is(m.wantsIn, 0)
})
