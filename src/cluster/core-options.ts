/**
 * What a ClusterCore is built from, and what it asks its driver to send
 * (cluster-core.ts). Types only.
 */
import type { LimitsConfig, RuleConfig } from '../config/types.js'
import type { Ack, Gossip, Grant, Hb, Want } from './messages.js'
import type { Jget, Jrep } from './replica-messages.js'
import type { ClusterTuning } from './tuning.js'

export interface ClusterCoreOptions {
  node: string
  /** This incarnation's id: new at every process start. */
  epoch: string
  /** Starts of this node so far, this one included (from the state file): orders its epochs. @default 1 */
  incarnation?: number
  /** Earlier epochs whose books this one restored (a clean restart). @default [] */
  carries?: string[]
  /**
   * How many of `carries`, from the first, a quorum might still attest: the
   * others' books were settled by an earlier incarnation (dropped, or its
   * for good: carrier.ts). @default carries.length
   */
  carriedAtRisk?: number
  cluster?: string
  /** The cluster hash (cluster-hash.ts): tokens move only between nodes with the same. @default '' */
  clusterHash?: string
  seeds: readonly string[]
  /** The cluster file's nodes and their pinned peer ids (membership.ts). @default the seeds, none pinned */
  listed?: ReadonlyMap<string, string | undefined>
  /** Most members not in the file a seed admits. @default 256 */
  maxMembers?: number
  /** Most admitted members from one address (membership.ts). @default limits.maxMembersPerHost's */
  maxMembersPerHost?: number
  rules: RuleConfig[]
  limits: LimitsConfig
  /** May this node materialize pre-allocated shares? False after an unclean restart with nothing to recover. */
  allocate: boolean
  /** This start recovers a crashed predecessor's books (journal.ts): shares and restored tokens wait for the horizon (recovery.ts). */
  recovered?: boolean
  tuning?: Partial<ClusterTuning>
  /** The dead seeds this account inherited (heir.ts), from its state file or journal: [node, inc, calMs]. @default none */
  inherited?: ReadonlyArray<readonly [string, number, number]>
  /** Others' inheritances this account had heard (heir.ts `known`): [node, home, inc]. @default none */
  estates?: ReadonlyArray<readonly [string, string, number]>
  /** A seed's copies of the other seeds' journals, from its disk, by writer (replica-store.ts). @default none */
  replicas?: ReadonlyMap<string, string>
  /** The copies of writers' previous incarnations kept aside (replica-store.ts `superseded`), by writer. @default none */
  superseded?: ReadonlyMap<string, string>
  /** Wall and monotonic time at construction: where the calendar starts. */
  wallMs: number
  monoMs: number
  /** The wall clock's resolution (clock.ts `resolutionMs`). @default 0 */
  wallResolutionMs?: number
}

export type Outbound =
  /** `members`: what the members hear of it (a seed with members alive; member-gossip.ts), often `msg` itself. */
  | { kind: 'gossip', msg: Gossip | Hb, members?: Gossip | Hb }
  | { kind: 'request', to: string, msg: Want | Grant | Ack }
  /** `z`: null, send the text as it is; else deflate it against `z`, the text the replica holds before it (replica-messages.ts encodeJrep). */
  | { kind: 'replicate', to: string, msg: Jrep, z: string | null }
  | { kind: 'jget', to: string, msg: Jget }
