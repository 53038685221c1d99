/**
 * The socket bench's rows and the operations that drive them: which keys each
 * row uses, and how one operation looks on quotad (acquire or batch through
 * QuotadClient) and on the peer (RateLimiterRedis.consume). Both sides walk
 * the same 1,000 keys in the same order, so they do the same work.
 */
import type { BatchResult, QuotadClient } from '@quotad/client'
import type { Operation } from './load.js'
import type { Peer } from './redis-peer.js'

export const KEYS = 1000
export const CONCURRENCIES = [1, 16, 64, 256]
export const BATCH_CONCURRENCIES = [1, 8]
export const DENY_CONCURRENCIES = [16, 256]

export interface WorkloadOptions {
  batchSize: number
  noDeny: boolean
  /** Row ids to keep (null: all). */
  only: Set<string> | null
}

export interface Workload {
  id: string
  label: string
  kind: 'single' | 'batch'
  concurrency: number
  /** 'allow': every key under the huge limit; 'deny50': every other key spent. */
  mix: 'allow' | 'deny50'
}

export function workloads (opts: WorkloadOptions): Workload[] {
  const all: Workload[] = [
    ...CONCURRENCIES.map(c => ({ id: `c${c}`, label: `c=${c}`, kind: 'single' as const, concurrency: c, mix: 'allow' as const })),
    ...BATCH_CONCURRENCIES.map(c => ({
      id: `batch-c${c}`, label: `batch${opts.batchSize} c=${c}`, kind: 'batch' as const, concurrency: c, mix: 'allow' as const
    })),
    ...(opts.noDeny
      ? []
      : DENY_CONCURRENCIES.map(c => ({ id: `deny-c${c}`, label: `deny50% c=${c}`, kind: 'single' as const, concurrency: c, mix: 'deny50' as const })))
  ]
  return opts.only === null ? all : all.filter(w => opts.only?.has(w.id))
}

/** The 1,000 keys of a mix, with the peer rule each belongs to. */
export interface KeySet { keys: string[], peerRule: number[] }

export function keySet (mix: Workload['mix']): KeySet {
  const keys: string[] = []
  const peerRule: number[] = []
  for (let i = 0; i < KEYS; i++) {
    const deny = mix === 'deny50' && i % 2 === 1
    keys.push(deny ? `benchdeny:${i}` : `bench:${i}`)
    peerRule.push(deny ? 1 : 0)
  }
  return { keys, peerRule }
}

/** A shared cursor over the key set: consecutive requests, whoever sends them, take consecutive keys. */
function cursor (n: number): () => number {
  let i = 0
  return () => {
    const k = i
    i = i + 1 === n ? 0 : i + 1
    return k
  }
}

function countBatch (results: BatchResult[]): number {
  let denied = 0
  for (const r of results) {
    if ('error' in r) throw new Error(`batch item failed: ${r.error.code}: ${r.error.message}`)
    if (!r.allowed) denied++
  }
  return denied
}

export function quotadOp (w: Workload, clients: QuotadClient[], batchSize: number): Operation {
  const { keys } = keySet(w.mix)
  const n = clients.length
  if (w.kind === 'single') {
    const next = cursor(keys.length)
    return worker => clients[worker % n].acquire(keys[next()]).then(d => d.allowed ? 0 : 1)
  }
  const batches = batchesOf(keys, batchSize).map(b => b.map(key => ({ key })))
  const next = cursor(batches.length)
  return worker => clients[worker % n].batch(batches[next()]).then(countBatch)
}

export function peerOp (w: Workload, peer: Peer, batchSize: number): Operation {
  const { keys, peerRule } = keySet(w.mix)
  if (w.kind === 'single') {
    const next = cursor(keys.length)
    return worker => {
      const k = next()
      return peer.consume(peerRule[k], keys[k], worker)
    }
  }
  // No batch op: fire the batch's consumes together (pipelined when autopipelining is on) and await all.
  const batches = batchesOf(keys.map((_, i) => i), batchSize)
  const next = cursor(batches.length)
  return worker => {
    const b = batches[next()]
    const ps: Promise<number>[] = new Array(b.length)
    for (let i = 0; i < b.length; i++) ps[i] = peer.consume(peerRule[b[i]], keys[b[i]], worker)
    return Promise.all(ps).then(sum)
  }
}

function batchesOf<T> (xs: T[], size: number): T[][] {
  // Batches wrap around the key set so every batch has exactly `size` items.
  const count = Math.max(1, Math.ceil(xs.length / size))
  const out: T[][] = []
  for (let b = 0; b < count; b++) {
    const batch: T[] = []
    for (let i = 0; i < size; i++) batch.push(xs[(b * size + i) % xs.length])
    out.push(batch)
  }
  return out
}

function sum (xs: number[]): number {
  let s = 0
  for (const x of xs) s += x
  return s
}
