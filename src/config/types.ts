/**
 * The cluster file's shape. One file is shared by every node; each node picks
 * its own entry by name. Field names here are the public contract: the docs,
 * the JSON Schema (`cluster.schema.json`) and users rely on them.
 */

export type Algorithm = 'fixed-window' | 'sliding-log' | 'sliding-window' | 'token-bucket'
export const ALGORITHMS: readonly Algorithm[] = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket']

export type Mode = 'hard' | 'soft'
export const MODES: readonly Mode[] = ['hard', 'soft']

/** What a `soft` rule does on a node cut off from every peer. */
export type FailurePolicy = 'fail-closed' | 'fail-open' | 'local-share'
export const FAILURE_POLICIES: readonly FailurePolicy[] = ['fail-closed', 'fail-open', 'local-share']

/** A rule after validation: durations in ms, defaults filled in. */
export interface RuleConfig {
  /** Unique rule name; shown in replies as `rule`. */
  name: string
  /** An exact key, or a glob where `*` matches any run of characters. */
  match: string
  /** Tokens per `per`, cluster-wide. Positive integer. */
  limit: number
  /** Window or refill period in milliseconds. */
  perMs: number
  /** The original `per` text, kept for display. */
  per: string
  algorithm: Algorithm
  /** Token-bucket capacity. @default limit */
  burst: number
  /** @default 'hard' */
  mode: Mode
  /** Soft mode only. @default 'local-share' */
  onPartition: FailurePolicy
  /** Soft mode only (`local-share`): most tokens a cut-off node may owe at once; repaid after healing. @default limit */
  maxDebt: number
  /**
   * Glob rules only: most keys of this rule in the key table at once, so one
   * rule's keys can't crowd out another's. @default limits.maxKeys / the number of glob rules
   */
  maxKeys?: number
  /**
   * Calendar-window rules: near exhaustion (the cluster's remaining below 20%),
   * spread each node's last tokens over the rest of the window instead of
   * admitting while tokens remain. @default false (an exact limiter: allowed
   * while quota remains)
   */
  pace?: boolean
  /**
   * Where a member's requests of this rule are decided. 'local' (absent):
   * at the node that gets them, from tokens it holds (microseconds). 'seeds':
   * a member (a node not in the seed list) sends each acquire to a seed,
   * which decides it as its own and answers (one round trip on the LAN), so
   * a fleet of members holding a token or two each is not what limits the
   * cluster. Seeds decide their own requests locally either way.
   */
  decide?: 'seeds'
  /**
   * fixed-window rules with `decide: 'seeds'`: a member may ask a seed for
   * credit of about half its own demand over this many ms (forward-credit.ts)
   * and admit from it at once until the seed's window ends. Absent: none.
   * The file says it as a duration (`credit: "250ms"`).
   */
  creditMs?: number
}

export interface NodeConfig {
  name: string
  /** libp2p multiaddr to listen on, e.g. `/ip4/127.0.0.1/tcp/7401`. */
  listen: string
  /** Absolute path of the Unix socket (resolved against the cluster file's folder). */
  socket: string
  /** Absolute path of the node's data directory. */
  dataDir: string
  /** Permission bits of the socket file. @default 0o660 */
  socketMode: number
  /**
   * Whether the node is a seed: seeds split each global key's stock when the
   * cluster forms. A node with `seed: false` joins later and gets tokens by
   * transfer only. @default true
   */
  seed: boolean
  /**
   * The node's libp2p peer id (`quotad peer-id`): pins its name to its key.
   * Absent: the name is bound to the first peer id that speaks for it.
   */
  peerId?: string
  /**
   * HOST:PORT for the metrics and health listener (/metrics, /healthz,
   * /readyz), e.g. 127.0.0.1:9464. Absent: no listener.
   */
  http?: string
  /**
   * Where the node serves Envoy's Rate Limit Service over gRPC (src/envoy/):
   * `unix:/abs/path` or a loopback `HOST:PORT`. Absent: no gRPC server.
   */
  grpc?: string
}

/** Input bounds. Every untrusted input is capped by one of these. */
export interface LimitsConfig {
  /** Most key states held at once. @default 1_000_000 */
  maxKeys: number
  /** Longest key in UTF-8 bytes. @default 256 */
  maxKeyBytes: number
  /** Largest request frame body in bytes. @default 1 MiB */
  maxFrameBytes: number
  /** Most items in one batch request. @default 1000 */
  maxBatchItems: number
  /** Longest `waitMs` a client may ask for. @default 60_000 */
  maxWaitMs: number
  /** Most waiting acquires per key. @default 1000 */
  maxWaitersPerKey: number
  /** Most waiting acquires on the node. @default 100_000 */
  maxWaiters: number
  /** Most concurrent client connections. @default 1024 */
  maxConnections: number
  /** Most requests in flight (read but not yet answered) per connection. @default 4096 */
  maxInflightPerConnection: number
  /** Most members not in the cluster file a seed admits (at most 300). @default 256 */
  maxMembers: number
  /** Most of those a seed admits from one address, the connection's remote IP (cluster/membership.ts). @default 32 */
  maxMembersPerHost: number
}

export interface ClusterSection {
  name: string
  /** Absolute path of the pnet swarm key. */
  secretFile: string
  /** Gossip interval in ms. @default 250 */
  gossipIntervalMs: number
  /** Longest wait of a request without waitMs for a key new at this node (node-local; not hashed). @default 100 */
  firstUseWaitMs: number
  /**
   * The nice value of the thread that runs libp2p (node-local; not hashed).
   * Above 0, the socket loop gets a shared core first and gossip waits
   * (thread-nice.ts). 0 leaves the thread at the process's priority. @default 0
   */
  transportNice: number
  /** T_lease (lease-options.ts). @default 3000, or 12 x gossipIntervalMs if more */
  leaseMs: number
  /** T_reclaim. @default 5000, or leaseMs + maxClockSkewMs + 1500 if more */
  reclaimMs: number
  /** δ: drift, pause and calendar offset bound. @default 500 */
  maxClockSkewMs: number
  /** Leases and fencing on. @default true */
  leases: boolean
  /** How many seeds vote: the first this many in name order (quorum.ts). @default 15 */
  voters: number
  /** A seed with a share that stays silent for reclaimMs is inherited by its heir (heir.ts). @default false */
  inheritSeeds: boolean
}

export interface ClusterConfig {
  /** Absolute path of the file this came from (undefined when built in memory). */
  source?: string
  cluster: ClusterSection
  nodes: NodeConfig[]
  /**
   * Every rule: the rules the `envoy` section's descriptors made (first, so no
   * glob of the file's takes their keys), then the file's `rules` in order.
   */
  rules: RuleConfig[]
  limits: LimitsConfig
  /** The `envoy` section, compiled (envoy-config.ts). Absent: the file has none. */
  envoy?: EnvoyConfig
}

/** envoyproxy/ratelimit's units that have a fixed length. */
export type EnvoyUnit = 'second' | 'minute' | 'hour' | 'day' | 'week'

/** What a descriptor that ends a request applies. */
export interface EnvoyLimit {
  /**
   * The quotad rule that counts this descriptor's keys (one made for it,
   * `envoy:<indexes>`), or null: `requests_per_unit` 0, every request over
   * the limit, nothing counted.
   */
  rule: string | null
  /** Reported as current_limit: requests_per_unit and unit (undefined: the rule's `per` is no whole unit). */
  requestsPerUnit: number
  unit?: EnvoyUnit
  /** Reported as current_limit.name. */
  name?: string
  /** Decide and count, but answer OK. */
  shadowMode: boolean
}

export interface EnvoyDescriptor {
  key: string
  /** undefined: any value, each its own bucket. */
  value?: string
  /** A value with `*`: its parts around the stars (each value its own bucket). */
  wildcard?: string[]
  /** Applies when a request's entries end at this descriptor. `unlimited`: OK, nothing counted. */
  limit?: EnvoyLimit | 'unlimited'
  descriptors: EnvoyDescriptor[]
}

export interface EnvoyConfig {
  /** Add the RateLimit-* response headers. @default false */
  responseHeaders: boolean
  domains: Array<{ domain: string, descriptors: EnvoyDescriptor[] }>
  /** The rules the descriptors made, in `rules` order, with the JSON path of the descriptor that made each. */
  rules: Array<{ name: string, path: string }>
}

export const DEFAULT_LIMITS: LimitsConfig = {
  maxKeys: 1_000_000,
  maxKeyBytes: 256,
  maxFrameBytes: 1024 * 1024,
  maxBatchItems: 1000,
  maxWaitMs: 60_000,
  maxWaitersPerKey: 1000,
  maxWaiters: 100_000,
  maxConnections: 1024,
  maxInflightPerConnection: 4096,
  maxMembers: 256,
  maxMembersPerHost: 32
}

export const DEFAULT_SOCKET_MODE = 0o660
export const DEFAULT_GOSSIP_INTERVAL_MS = 250
/** A request without waitMs waits this long at most for a key new at its node. */
export const DEFAULT_FIRST_USE_WAIT_MS = 100
export const DEFAULT_TRANSPORT_NICE = 0
