/**
 * Journal replication on real processes (replication.ts, replica-store.ts,
 * replica-file.ts): three seeds and a member share `api`. The member's
 * demand makes the seeds give; each seed's journal is copied to the other
 * two, and a grant leaves only once its give is on two of the three disks.
 * After kill -9 of a seed, the survivors' copies of its journal are what a
 * heir would read: they replay, and the longest is its journal, up to the
 * writes still on their way at the kill. Every wait is for a condition.
 */
import test from 'ava'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { replayJournal } from '../src/cluster/journal.js'
import { initialShare } from '../src/core/share.js'
import { replicaFileName } from '../src/cluster/replica-file.js'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { eventually } from './helpers/proc.js'
import { nodeStatus } from './helpers/settle.js'

const API = [{ name: 'api', match: 'api', limit: 100, per: '1s', algorithm: 'fixed-window' }]

interface ReplStatus { cluster: { counters: { tokensOut: number }, replication: { enabled: boolean, gen: number, end: number, waiting: number, replicas: Record<string, { gen: number, have: number, behind: number }> }, replicas: Record<string, { gen: number, chars: number }> | null } }

async function repl (socket: string): Promise<ReplStatus['cluster']> {
  return (await nodeStatus(socket) as unknown as ReplStatus).cluster
}

function genOf (text: string): number {
  return (JSON.parse(text.slice(0, text.indexOf('\n'))) as { gen: number }).gen
}

test.serial('each seed\'s journal is copied to the other seeds; after kill -9 the survivors\' copies replay to its journal', async t => {
  t.timeout(300_000)
  const c = await makeCluster(['a', 'b', 'c'], API, { extraNodes: [{ name: 'm', seed: false }], cluster: { reclaimMs: 120_000 } })
  t.teardown(async () => await c.stopAll())
  for (const n of c.names) await c.start(n)
  await waitForPeers(c, c.names, 3, 60_000)
  for (const s of ['a', 'b', 'c']) t.true((await repl(c.sockets[s])).replication.enabled, `${s} replicates`)
  t.false((await repl(c.sockets.m)).replication.enabled, 'a member does not')

  // Demand at the member until some seed has given it tokens (each give copied before its grant left).
  const q = await QuotadClient.connect({ socketPath: c.sockets.m, timeoutMs: 30_000 })
  let running = false
  let load: Promise<void> = Promise.resolve()
  const demand = (): void => {
    running = true
    load = (async () => { while (running) await q.acquire('api', { waitMs: 50 }) })()
  }
  const idle = async (): Promise<void> => { running = false; await load.catch(() => {}) }
  t.teardown(async () => { await idle(); await q.close() })
  demand()
  const giver = await eventually('a seed to give the member tokens', async () => {
    for (const s of ['a', 'b', 'c']) if ((await repl(c.sockets[s])).counters.tokensOut > 0) return s
    return undefined
  }, 60_000)
  const others = ['a', 'b', 'c'].filter(s => s !== giver)
  // Idle, the member returns to its lenders what it does not use (rebalance.ts): a credit, one more batch.
  const first = (await repl(c.sockets[giver])).replication.end
  await idle()
  await eventually(`${giver}'s journal to grow`, async () => (await repl(c.sockets[giver])).replication.end > first ? true : undefined, 60_000)
  demand()
  // Both copies catch up while the load runs (the status of the writer says so), and they are its file.
  await eventually(`${giver}'s copies to catch up`, async () => {
    const r = await repl(c.sockets[giver])
    return others.every(o => r.replication.replicas[o].behind === 0) ? r : undefined
  }, 60_000)
  for (const o of others) {
    const s = await repl(c.sockets[o])
    t.true((s.replicas?.[giver]?.chars ?? 0) > 0, `${o} keeps a copy of ${giver}`)
  }

  // kill -9 while the load runs: whatever was on its way is missing from a copy, nothing else.
  c.procs[giver].child.kill('SIGKILL')
  await c.procs[giver].exited
  await idle()
  const own = readFileSync(join(c.dir, 'data', giver, 'quotad-journal.jsonl'), 'utf8')
  const held = others.map(o => ({ holder: o, text: readFileSync(join(c.dir, 'data', o, replicaFileName(giver)), 'utf8') }))
  const copies = held.map(h => h.text)
  for (const copy of copies) {
    const r = replayJournal(copy, 'copy', giver, 'test')
    t.is(r.checkpoint.node, giver, 'a copy replays as the writer\'s journal')
  }
  // The longest copy (newest generation, then longest) is the heir's read.
  held.sort((x, y) => genOf(y.text) - genOf(x.text) || y.text.length - x.text.length)
  const best = held[0].text
  t.is(genOf(best), genOf(own), 'the copy is of the journal\'s current generation')
  const shorter = best.length <= own.length ? best : own
  const longer = best.length <= own.length ? own : best
  t.true(longer.startsWith(shorter), 'the copy and the journal agree up to the shorter')
  // What differs is at most the writes of the last moments (a batch per tick): far less than the whole.
  t.log(`${giver}'s journal: ${own.length} chars, ${own.split('\n').length - 1} lines; best copy ${best.length} chars`)
  t.true(best.split('\n').length > 2, 'the copy holds batches, not only the checkpoint')
  const a = replayJournal(own, 'own', giver, 'test').books.get('api')
  const b = replayJournal(best, 'copy', giver, 'test').books.get('api')
  t.log(`api books: journal ${JSON.stringify(a)}, copy ${JSON.stringify(b)}`)
  t.truthy(b, 'the copy names api')

  // What a heir would credit (estate.ts), as the survivor with the best copy shows it.
  const holder = held[0].holder
  const shown = (await repl(c.sockets[holder])).replicas?.[giver] as unknown as { estate: { tokens: number, keys: Record<string, number> } }
  const ownBooks = (a?.base ?? initialShare(100, false, 'api', giver, ['a', 'b', 'c'])) + (a?.delta ?? 0)
  const res = replayJournal(best, 'copy', giver, 'test').reserved.get('api')
  const left = res === undefined ? 0 : Math.max(0, res.ceiling - res.given)
  t.log(`${holder} shows ${giver}'s estate: ${JSON.stringify(shown.estate)}; its own journal's books ${ownBooks}, reservation left ${left}`)
  // The estate is the best copy's books less what is left of its reservation. It may exceed what the seed's own
  // journal says: a give is journaled before its grant waits for a quorum's copy of its reservation, so a seed killed
  // while waiting has debited tokens that never left, and a credit may reach a copy before the seed's own disk (it
  // needs no fsync). That no give whose grant left is missing from a quorum's best copy is what the simulator's
  // replica witness checks at every departure (src/sim/replica-check.ts).
  const copyBooks = (b?.base ?? initialShare(100, false, 'api', giver, ['a', 'b', 'c'])) + (b?.delta ?? 0)
  t.true(Math.abs(shown.estate.keys.api - Math.max(0, copyBooks - left)) < 1e-9, `the estate is the copy's books ${copyBooks} less the reservation left ${left}`)
  t.true(shown.estate.keys.api <= copyBooks + 1e-9)
})
