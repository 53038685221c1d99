/**
 * The want -> grant round trip between two real quotad processes, for the
 * crash-recovery bench: what the books journal adds to serving a want.
 *
 * Two seeds `a` and `b` on loopback, one glob rule. Every measured key is
 * fresh and homed at `b` (core/share.ts `homeNode`), so `a` holds none of
 * it: `a`'s first acquire of it waits (first-use.ts) while `a` sends a want
 * to `b` and `b` answers with a grant. With the journal, `b`'s grant leaves
 * only once its give is appended and fdatasync'ed (cluster-node.ts
 * `onRequest`), so each such acquire carries exactly one fdatasync on `b`;
 * a build without the journal carries none. Measured as the client sees the
 * acquire at `a`, one at a time (c=1): the round trip plus the client hop.
 */
import { mkdirSync } from 'node:fs'
import { QuotadClient } from '@quotad/client'
import { homeNode } from '../../src/core/share.js'
import { startNode, waitForPeers, writeClusterFile, type NodeProc } from './cluster-harness.js'

const NAMES = ['a', 'b']

/**
 * `rtt`: a day-long limit, so a key's tokens never refill during the bench and every key's first acquire needs a
 * transfer. `local`: one exact key that never runs out at `a`, for the same acquire with no transfer (the floor).
 */
const RULES = [
  { name: 'rtt', match: 'k:*', algorithm: 'fixed-window', limit: 1000, per: '1d', mode: 'hard' },
  { name: 'local', match: 'local', algorithm: 'fixed-window', limit: 1_000_000_000, per: '1s', mode: 'hard' }
]

export interface RttPair {
  label: string
  procs: NodeProc[]
  /** Connected to `a`. */
  client: QuotadClient
  /** Keys used so far (each is used once). */
  next: number
}

/** Start `a` and `b` from the build whose quotad.js is `cli`, in `dir`, and wait until they agree. */
export async function startPair (dir: string, label: string, cli: string, logLevel = 'warn'): Promise<RttPair> {
  mkdirSync(dir, { recursive: true })
  const file = await writeClusterFile(dir, `rtt-${label}`, NAMES, RULES, 250)
  const procs: NodeProc[] = []
  try {
    for (const n of NAMES) procs.push(await startNode(file, n, logLevel, 30_000, cli))
    const clients = await Promise.all(procs.map(async p => await QuotadClient.connect({ socketPath: p.socketPath, timeoutMs: 5000, reconnect: false })))
    await waitForPeers(clients, 1)
    await clients[1].close()
    return { label, procs, client: clients[0], next: 0 }
  } catch (err) {
    await Promise.all(procs.map(async p => await p.stop()))
    throw err
  }
}

export async function stopPair (p: RttPair): Promise<void> {
  await p.client.close()
  await Promise.all(p.procs.map(async x => await x.stop()))
}

/** The next fresh key homed at `b`. */
function freshKey (p: RttPair): string {
  for (;;) {
    const key = `k:${p.label}-${p.next++}`
    if (homeNode(key, NAMES) === 'b') return key
  }
}

export interface RttTrial {
  /** Latency (ms) of the acquires that were allowed: each waited for one want -> grant. */
  samples: number[]
  /** Denied acquires (the wait found no grant in time): not in `log`; should be 0. */
  denied: number
}

/** `count` acquires at `a`, one at a time, each on a fresh key homed at `b` (`local`: all on the key `a` never runs out of). */
export async function rttTrial (p: RttPair, count: number, local = false): Promise<RttTrial> {
  const samples: number[] = []
  let denied = 0
  for (let i = 0; i < count; i++) {
    const key = local ? 'local' : freshKey(p)
    const t0 = performance.now()
    const d = await p.client.acquire(key)
    const ms = performance.now() - t0
    if (d.allowed) samples.push(ms)
    else denied++
  }
  for (const x of p.procs) {
    if (x.exited() !== null) throw new Error(`node ${x.name} of ${p.label} died: ${x.exited() ?? ''}\n${x.output()}`)
  }
  return { samples, denied }
}
