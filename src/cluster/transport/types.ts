/**
 * The cluster transport's contract: what the rest of the cluster (a pure state
 * machine) sees of the network. Nothing here names libp2p, so the module that
 * implements it (`libp2p-transport.ts`) is the one place a libp2p upgrade
 * touches. Peer ids travel as strings.
 */

/** The direct request/response protocol: one length-prefixed request, one response, close. */
export const TRANSFER_PROTOCOL = '/quotad/transfer/1.0.0'

/** Calls on a long-lived session per peer: many length-prefixed frames each way, each with a call id (calls.ts). */
export const CALL_PROTOCOL = '/quotad/forward/5.0.0'

export const TRANSPORT_DEFAULTS = {
  maxMessageBytes: 64 * 1024,
  maxRequestBytes: 64 * 1024,
  dialTimeoutMs: 3000,
  minBackoffMs: 250,
  maxBackoffMs: 10_000,
  seedMaxBackoffMs: 1500,
  inboundTimeoutMs: 10_000,
  maxGossipPerSec: 16
} as const

export interface TransportOptions {
  /** libp2p multiaddr to listen on, e.g. `/ip4/127.0.0.1/tcp/0`. */
  listen: string
  /**
   * The seed nodes' listen multiaddrs to dial, without `/p2p/` ids (ids are
   * not in the config file). Our own listen address may be included; it is
   * skipped.
   */
  seeds: string[]
  /**
   * The 32-byte pnet pre-shared key, as returned by `parseSwarmKey`. The
   * transport re-encodes it in the swarm.key text form that `@libp2p/pnet`
   * wants.
   *
   * `null` runs WITHOUT a connection protector: such a node cannot talk to any
   * keyed node. It exists only so tests can prove that; never configure it.
   */
  psk: Uint8Array | null
  /** The node's data dir: the peer identity is kept in `<dataDir>/peer-key` (mode 0600). */
  dataDir: string
  /** Gossip topic, e.g. `quotad/<cluster name>/gossip/1`: subscribed to, and published on unless `publishTopic` says otherwise. */
  topic: string
  /**
   * Where `publish` sends, when not `topic`: a member publishes on the
   * members' topic, which only seeds subscribe to (member-sums.ts). @default topic
   */
  publishTopic?: string
  /** More topics to hear (a seed: the members' topic). @default [] */
  alsoSubscribe?: string[]
  /**
   * More topics `publish` may send on when named; this node relays them for
   * its peers but never delivers them to `onGossip` (a seed: the gossip
   * topic, where the members' copies go, member-gossip.ts). @default []
   */
  alsoPublish?: string[]
  /**
   * thread-transport.ts only: the nice value of the thread libp2p runs in
   * (thread-nice.ts); the in-loop transport ignores it. @default 0 (the process's)
   */
  threadNice?: number
  /** Max bytes of one gossip message accepted or published. @default 65536 */
  maxMessageBytes?: number
  /**
   * Gossip messages one origin peer id may publish per second on average
   * (2x what an honest node does: two per gossip interval, ClusterNode sets
   * it), with 2 s of it at once; above that its messages are dropped, and a
   * peer flooding with its own key is hung up on and graylisted for 10 s
   * (flood-guard.ts). @default 16 (gossipIntervalMs 250)
   */
  maxGossipPerSec?: number
  /** Max bytes of one request or response on the transfer protocol. @default 65536 */
  maxRequestBytes?: number
  /** Per-dial timeout. @default 3000 */
  dialTimeoutMs?: number
  /** Redial backoff: starts here, doubles per failure, with jitter. @default 250 */
  minBackoffMs?: number
  /** Redial backoff cap. @default 10000 */
  maxBackoffMs?: number
  /**
   * Redial backoff cap for seeds (the quorum), applied under `maxBackoffMs`:
   * a seed cut off is redialled at least this often, so a healed network is
   * noticed within about this long (docs/design/2026-11-reclaim.md, finding 4). A peer
   * that connects to us also resets the backoff and redials waiting seeds.
   * @default 1500
   */
  seedMaxBackoffMs?: number
  /**
   * Deadline for serving one inbound request: reading it, running
   * `onRequest` and writing the response. @default 10000
   */
  inboundTimeoutMs?: number
  /**
   * Observer for transport events (also published on diagnostics_channel
   * `quotad:transport:<name>`). Must not throw; exceptions are swallowed.
   */
  onEvent?: (name: string, fields: Record<string, unknown>) => void
}

export interface Transport {
  /** Our peer id, string form. */
  readonly peerId: string
  /** Actual listen addresses after start (tcp/0 resolved), each ending in `/p2p/<id>`. */
  readonly listenAddrs: string[]
  start(): Promise<void>
  /** Stops dialling, closes every connection and the listener. Idempotent. */
  stop(): Promise<void>
  /**
   * Broadcast on `topic` (default `publishTopic`; else one of `alsoPublish`).
   * Resolves with how many peers it reached (0 before subscriptions are
   * exchanged). Rejects with E_FRAME_TOO_LARGE above `maxMessageBytes`.
   */
  publish(data: Uint8Array, topic?: string): Promise<number>
  /**
   * Direct request/response to one peer over `/quotad/transfer/1.0.0` (4-byte
   * big-endian length prefix, one request, one response, then close). Rejects
   * with a QuotadError: E_TIMEOUT after `timeoutMs`, E_FRAME_TOO_LARGE for an
   * oversized request or response, E_CONNECTION for anything else (including
   * a responder whose handler threw: it resets the stream).
   */
  request(peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array>
  /**
   * One call to a peer over `/quotad/forward/5.0.0`: on this node's session
   * with the peer (one long-lived stream, opened at the first call and again
   * after it ends), framed with a call id, answered in any order (calls.ts).
   * Rejects with E_TIMEOUT after `timeoutMs` (the session stays),
   * E_FRAME_TOO_LARGE above the call frame bound, E_CONNECTION when the
   * session ends first.
   */
  call(peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array>
  /**
   * Handlers; set before start(). Gossip from ourselves is never delivered.
   * Oversized messages are dropped and counted (never delivered). A handler
   * that throws is counted and the transport carries on.
   */
  onGossip: (from: string, data: Uint8Array) => void
  onRequest: (from: string, data: Uint8Array) => Promise<Uint8Array> | Uint8Array
  /** An inbound call's answer. A throw resets the caller's session (no error answer: see calls.ts). */
  onCall: (from: string, data: Uint8Array) => Promise<Uint8Array> | Uint8Array
  onPeer: (peerId: string, connected: boolean) => void
  /** Currently connected peer ids. */
  connectedPeers(): string[]
  /**
   * The remote address (IP, no port) of an open connection to `peerId`, or
   * undefined when none is open: a seed admits members only from peers it
   * is connected to, a bounded number per address (cluster/membership.ts).
   */
  hostOf(peerId: string): string | undefined
  /**
   * Counters: published, received, droppedOversize, requestsIn, requestsOut,
   * requestErrors, requestsInFailed, requestsOversize, dials, dialFailures,
   * handlerErrors, gossipResets, gossipOverBudget, floodPenalties,
   * floodRefusals; and the
   * gauges peers and floodPenalised (flood-guard.ts).
   */
  stats(): Record<string, number>
  /** Dial a multiaddr now (used to join via a seed). Rejects with E_CONNECTION or E_TIMEOUT. */
  dial(addr: string): Promise<void>
}
