/**
 * Real quotad processes forming a cluster over libp2p on loopback.
 *
 * On a busy machine the load these tests can drive, and how soon the nodes
 * act on it, varies: the upper bounds (never over the limit, never a token
 * created) are checked on every reading; what the cluster achieves (close to
 * the limit, tokens handed over, stranded tokens reported) is waited for,
 * with a deadline of a minute.
 */
import test from 'ava'
import { QuotadClient } from '@quotad/client'
import type { Decision } from '../src/core/types.js'
import { makeCluster, waitForPeers, type TestCluster } from './helpers/cluster-procs.js'
import { eventually, stop } from './helpers/proc.js'
import { keyBooks, nodeStatus, settledHeld } from './helpers/settle.js'

const PER_MS = 2000
const LIMIT = 60
const RULES = [{ name: 'api', match: 'api', limit: LIMIT, per: '2s', algorithm: 'fixed-window', mode: 'hard' }]
const SLOW = 240_000
/** Requests a node may have unanswered at once: far above what the limit needs, never a flood that slows the machine. */
const MAX_INFLIGHT = 30
/** Rounding of resetMs and the nodes' calendar slew, in ms. */
const SLACK = 50

interface Tally {
  perWindow: Map<number, number>
  /** Allowed, but the round trip straddled a window boundary: which window is unknown. */
  unplaced: number
  /** Failed or timed out: the node may or may not have spent a token. */
  ambiguous: number
  /** Full windows: the load ran from before their start to after their end. */
  loadFrom: number
  loadTo: number
}

const newTally = (): Tally => ({ perWindow: new Map(), unplaced: 0, ambiguous: 0, loadFrom: Infinity, loadTo: -Infinity })

/**
 * The window of an allowed decision. The node made it between `sentAt` and
 * `receivedAt` (wall clock here and there: same machine), and its window ends
 * `resetMs` after that, on the window grid. Only a round trip that contains
 * exactly one grid point places it; a long one (a busy machine) leaves it unplaced.
 */
function windowOf (d: Decision, sentAt: number, receivedAt: number): number | undefined {
  const lo = Math.ceil((sentAt + d.resetMs - SLACK) / PER_MS)
  const hi = Math.floor((receivedAt + d.resetMs + SLACK) / PER_MS)
  return lo === hi ? lo - 1 : undefined
}

function fullWindows (tally: Tally): Array<[number, number]> {
  return [...tally.perWindow.entries()]
    .filter(([w]) => w * PER_MS >= tally.loadFrom && (w + 1) * PER_MS <= tally.loadTo)
    .sort((x, y) => x[0] - y[0])
}

/**
 * Drive the nodes with weights (requests per 10 ms tick, at most MAX_INFLIGHT
 * unanswered per node) until `done(tally)` or `ms` have passed; count allowed per window.
 */
async function hammer (c: TestCluster, weights: Record<string, number>, ms: number, tally: Tally, done: (t: Tally) => boolean = () => false, alive: () => string[] = () => Object.keys(weights)): Promise<void> {
  const clients = new Map<string, QuotadClient>()
  const inflight = new Map<string, number>()
  for (const n of Object.keys(weights)) {
    clients.set(n, await QuotadClient.connect({ socketPath: c.sockets[n], timeoutMs: 10_000, reconnect: false }))
    inflight.set(n, 0)
  }
  const end = Date.now() + ms
  const all: Array<Promise<void>> = []
  tally.loadFrom = Date.now()
  while (Date.now() < end && !done(tally)) {
    for (const n of alive()) {
      const client = clients.get(n)
      if (client === undefined) continue
      for (let i = 0; i < weights[n] && (inflight.get(n) ?? 0) < MAX_INFLIGHT; i++) {
        inflight.set(n, (inflight.get(n) ?? 0) + 1)
        const sentAt = Date.now()
        all.push(client.acquire('api').then(d => {
          if (!d.allowed) return
          const w = windowOf(d, sentAt, Date.now())
          if (w === undefined) tally.unplaced++
          else tally.perWindow.set(w, (tally.perWindow.get(w) ?? 0) + 1)
        }, () => { tally.ambiguous++ }).finally(() => { inflight.set(n, (inflight.get(n) ?? 0) - 1) }))
      }
    }
    tally.loadTo = Date.now()
    await new Promise(resolve => setTimeout(resolve, 10))
  }
  await Promise.all(all)
  for (const client of clients.values()) await client.close().catch(() => {})
}

test.serial('3 nodes, hard fixed window, skewed load through all sockets: each window admits at most the limit, and close to it', async t => {
  t.timeout(SLOW)
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const tally = newTally()
  // Until two full windows have come close to the limit (on an idle machine, the first two).
  const close = (x: Tally): boolean => fullWindows(x).filter(([, n]) => n >= LIMIT * 0.9).length >= 2
  await hammer(c, { a: 6, b: 2, c: 1 }, 60_000, tally, close)
  const windows = [...tally.perWindow.entries()].sort((x, y) => x[0] - y[0])
  t.log('allowed per window', windows, 'unplaced', tally.unplaced, 'ambiguous', tally.ambiguous)
  for (const [w, n] of windows) t.true(n <= LIMIT, `window ${w} admitted ${n} > ${LIMIT}`)
  t.true(close(tally), `no two full windows came within 90% of the limit: ${JSON.stringify(fullWindows(tally))}`)
  // The grants that answered wants are acked to their givers by request, over the real transport (cluster-protocol.md, "The ledger").
  const acks: Record<string, number> = {}
  await eventually('a giver to take ack requests', async () => {
    for (const n of c.names) acks[n] = (await nodeStatus(c.sockets[n])).cluster.counters.acksIn
    return Object.values(acks).some(n => n > 0)
  }, undefined, () => acks)
})

test.serial('a node killed mid-window: no overshoot, and its tokens show as stranded', async t => {
  t.timeout(SLOW)
  // A long reclaimMs: what a held shows as stranded until its heir inherits it (heir.ts), after reclaimMs.
  const c = await makeCluster(['a', 'b', 'c'], RULES, { cluster: { reclaimMs: 120_000 } })
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const tally = newTally()
  let killed = false
  const killer = setTimeout(() => { c.procs.a.child.kill('SIGKILL'); killed = true }, 3000)
  await hammer(c, { a: 4, b: 4, c: 1 }, 7000, tally, () => false, () => killed ? ['b', 'c'] : ['a', 'b', 'c'])
  clearTimeout(killer)
  t.true(killed)
  t.log('allowed per window', [...tally.perWindow.entries()], 'unplaced', tally.unplaced, 'ambiguous', tally.ambiguous)
  for (const [w, n] of tally.perWindow) t.true(n <= LIMIT, `window ${w} admitted ${n}`)
  // b notices that a is gone (after its alive timeout), and reports what a held or had spent as stranded.
  let last: unknown
  const s = await eventually('b to see a dead and its tokens stranded', async () => {
    const s = await nodeStatus(c.sockets.b)
    last = { peers: s.peers, api: keyBooks(s, 'api') }
    const aAlive = s.peers.find(p => p.name === 'a')?.alive
    return aAlive === false && keyBooks(s, 'api').stranded > 0 && s
  }, undefined, () => last)
  t.false(s.peers.find(p => p.name === 'a')?.alive)
  t.true(keyBooks(s, 'api').stranded > 0, 'what a held or had spent is reported as stranded')
})

/** What a stopped node's log says about its handoff: tokens handed off, and tokens in grants never acknowledged. */
function handoffLog (stderr: string): { handedOff?: number, unacked: number, lines: string[] } {
  const lines = stderr.split('\n').filter(l => /hand(ed)? ?off|"stopped"|peer (dis)?connected/.test(l))
  let handedOff: number | undefined
  let unacked = 0
  for (const l of lines) {
    let j: { msg?: string, tokens?: number }
    try { j = JSON.parse(l) } catch { continue }
    if (j.msg === undefined) continue
    if (j.msg === 'handed off tokens') handedOff = j.tokens
    if (j.msg.startsWith('handoff not acknowledged')) unacked += j.tokens ?? 0
  }
  return { handedOff, unacked, lines }
}

test.serial('SIGTERM: a stopping node hands its tokens to its peers', async t => {
  t.timeout(600_000)
  const refusals = async (names: string[]): Promise<number> => {
    let n = 0
    for (const name of names) n += (await nodeStatus(c.sockets[name])).cluster.counters.grantsRefused ?? 0
    return n
  }
  // A window far longer than the test: no boundary inside it hands spent tokens back.
  const rules = [{ name: 'day', match: 'day', limit: 90, per: '366d', algorithm: 'fixed-window' }]
  const c = await makeCluster(['a', 'b', 'c'], rules)
  t.teardown(async () => await c.stopAll())
  await Promise.all(c.names.map(async n => await c.start(n)))
  await waitForPeers(c, c.names, 2)
  const sockets = (names: string[]): Record<string, string> => Object.fromEntries(names.map(n => [n, c.sockets[n]]))
  t.is((await settledHeld(sockets(['a', 'b', 'c']), 'day')).total, 90)
  // A stopping node hands over what it holds to the peers it sees alive, and waits for their acks
  // for at most its handoff timeout (3 s). A machine so busy that a hears no one for its alive
  // timeout, or gets no ack in time, makes a keep (in its state file) or strand those tokens:
  // never create any. Then a starts again and the stop is tried again, at most three times; one
  // stop that a's log says handed over everything must show every token at b and c.
  const attempts: unknown[] = []
  for (let attempt = 1; attempt <= 3; attempt++) {
    if (attempt > 1) {
      await c.start('a')
      await waitForPeers(c, c.names, 2)
    }
    const before = await settledHeld(sockets(['a', 'b', 'c']), 'day')
    t.true(before.total <= 90, `a token was created: ${JSON.stringify(before.held)}`)
    const refusedBefore = await refusals(['b', 'c'])
    await stop(c.procs.a)
    t.is(c.procs.a.child.exitCode, 0)
    const log = handoffLog(c.procs.a.stderr())
    // A receiver may refuse a push it can't check against a's last word (its gossip came late on a busy
    // machine): a takes those tokens back and keeps them in its state file, so that stop is not complete.
    const refusedNow = await refusals(['b', 'c']) - refusedBefore
    const why = ['b', 'c'].flatMap(n => c.procs[n].stderr().split('\n').filter(l => l.includes('refused a grant')).slice(-2))
    attempts.push({ attempt, before: before.held, refused: refusedNow, why, ...log })
    const complete = log.handedOff === before.held.a && log.unacked === 0 && refusedNow === 0
    // b and c now hold everything a held: a's tokens moved, none were created.
    const seen: number[] = []
    const target = complete ? before.total : before.held.b + before.held.c
    // On failure: what b and c did with grants they got (a refused grant goes back to a, which keeps it).
    const refused: Record<string, unknown> = {}
    await eventually(`b and c to hold ${target} (attempt ${attempt}: ${JSON.stringify(log)})`, async () => {
      const { total } = await settledHeld(sockets(['b', 'c']), 'day')
      seen.push(total)
      if (total >= target) return true
      for (const n of ['b', 'c']) {
        const k = (await nodeStatus(c.sockets[n])).cluster.counters
        refused[n] = { grantsApplied: k.grantsApplied, grantsRefused: k.grantsRefused, tokensRefused: k.tokensRefused }
      }
      return false
    }, undefined, () => ({ seen: seen.slice(-5), refused }))
    t.true(seen.every(n => n <= before.total), `a token was created: ${JSON.stringify(seen)} > ${before.total}`)
    if (complete) {
      t.is(seen[seen.length - 1], before.total)
      t.log('attempts', attempts)
      return
    }
  }
  t.fail(`no stop handed over everything a held: ${JSON.stringify(attempts)}`)
})
