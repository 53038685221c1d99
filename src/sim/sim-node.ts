/** A simulated node as the virtual cluster keeps it: its state, clocks, virtual disk and counters. */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { SavedState } from '../cluster/durable-state.js'
import type { Waiter } from '../core/limiter.js'
import type { NodeEffects } from '../cluster/node-effects.js'

export type NodeState = 'up' | 'stopping' | 'stopped' | 'crashed'

export interface SimNode {
  name: string
  state: NodeState
  core: ClusterCore | null
  /** The running core's effects interpreter (node-effects.ts, the daemon's), on this node's ports (sim-ports.ts). */
  effects: NodeEffects | null
  /** Wall clock minus true time (constant skew, moved by steps). */
  skewMs: number
  monoOffsetMs: number
  /** The state file: what the last incarnation wrote (running at start, its snapshot at a clean stop). */
  disk: SavedState | undefined
  /** The books journal file (journal.ts): what a restart after a crash recovers from. */
  journal: string
  /** A seed's copies of the other seeds' journals (replica-store.ts), by writer: files on its disk. */
  replicas: Map<string, string>
  /** The copies of writers' previous incarnations kept aside (replica-store.ts), by writer. */
  superseded: Map<string, string>
  /** A voter's attestations file (reclaim.ts): written before a gossip that carries a new one leaves. */
  attest: Map<string, number>
  /**
   * A core that has stopped (snapshot taken) but whose transport is still
   * open for a moment, as the daemon's is while it writes the state file:
   * requests still reach its interpreter, and its core must refuse them.
   */
  lingering: NodeEffects | null
  incarnations: number
  /**
   * SIGSTOP until this true time (0: running): the node neither ticks nor
   * reads a message nor answers a client; a gossip sent to it is lost, a
   * request or reply waits and is read after its first tick on resume (its
   * timers fire before its I/O).
   */
  pausedUntil: number
  /** First-use requests waiting at this node (acquire). */
  waiters: Map<unknown, Waiter>
  sentBytes: number
  sentMessages: number
  recvBytes: number
}

/** A node's peer id in the simulator: what its messages are authenticated as. */
export function idOf (node: string): string {
  return `id:${node}`
}

/** Peer id `k` of a rogue on host `host` (FaultSpec.flood): an insider with the swarm key, no name of its own (a node's name has no `:`). */
export function rogueId (host: string, k: number): string {
  return `id::${host}:${k}`
}

/**
 * The address a node sees peer id `id` connected from (membership.ts
 * `hostOf`): each simulated node is its own host; a rogue's ids are on its
 * host; a node that is down is not connected.
 */
export function hostOfId (id: string, nodes: ReadonlyMap<string, SimNode>): string | undefined {
  if (id.startsWith('id::')) return id.slice(4, id.lastIndexOf(':'))
  const n = nodes.get(id.slice(3))
  return n !== undefined && (n.state === 'up' || n.state === 'stopping') ? n.name : undefined
}

/** How long a stopped node's transport stays open after its snapshot (the daemon writes its state file meanwhile). */
export const LINGER_MS = 250

