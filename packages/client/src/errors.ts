/**
 * Every failure quotad reports has one stable `code`. The same code travels on
 * the wire (protocol error replies), decides the CLI's exit status, and is what
 * tests and apps branch on. Messages are for humans and may change; codes may
 * not. The table lists the daemon's own codes too (config, state file), so
 * both sides share one list; a client sees only the protocol's and its own
 * (E_TIMEOUT, E_CONNECTION).
 */
export const ErrorCodes = {
  /** The cluster file failed validation; `details` lists every issue. */
  CONFIG_INVALID: 'E_CONFIG_INVALID',
  /** The cluster file could not be read or is not JSON. */
  CONFIG_READ: 'E_CONFIG_READ',
  /** A key file (swarm key, peer key) may be used by others, written by its group, or read by a group not the daemon's; `chmod 600` it. */
  KEY_PERMISSIONS: 'E_KEY_PERMISSIONS',
  /** A frame was not a msgpack map with a valid request shape. */
  BAD_FRAME: 'E_BAD_FRAME',
  /** A request holds a msgpack extension type, which the protocol does not allow. */
  UNSUPPORTED_TYPE: 'E_UNSUPPORTED_TYPE',
  /** A frame's declared length is above `limits.maxFrameBytes`. */
  FRAME_TOO_LARGE: 'E_FRAME_TOO_LARGE',
  /** The `op` field names no known operation. */
  UNKNOWN_OP: 'E_UNKNOWN_OP',
  /** An argument has the wrong type or is out of range. */
  BAD_ARGUMENT: 'E_BAD_ARGUMENT',
  /** The key is longer than `limits.maxKeyBytes` (UTF-8 bytes). */
  KEY_TOO_LONG: 'E_KEY_TOO_LONG',
  /** The key's bytes are not valid UTF-8. */
  BAD_KEY: 'E_BAD_KEY',
  /** No rule matches the key. */
  NO_RULE: 'E_NO_RULE',
  /** The key table is at `limits.maxKeys` and nothing can be evicted safely. */
  KEY_TABLE_FULL: 'E_KEY_TABLE_FULL',
  /** More items in a batch than `limits.maxBatchItems`. */
  BATCH_TOO_LARGE: 'E_BATCH_TOO_LARGE',
  /** `count` is larger than the rule's stock: it can never be admitted. */
  COUNT_TOO_LARGE: 'E_COUNT_TOO_LARGE',
  /** The wait queue for the key (or the node) is full. */
  QUEUE_FULL: 'E_QUEUE_FULL',
  /** Too many requests in flight on one connection, or too many connections. */
  OVERLOADED: 'E_OVERLOADED',
  /** The daemon is stopping and takes no new work. */
  SHUTTING_DOWN: 'E_SHUTTING_DOWN',
  /** Client side: no reply within the timeout. */
  TIMEOUT: 'E_TIMEOUT',
  /** Client side: could not connect, or the connection closed with requests in flight. */
  CONNECTION: 'E_CONNECTION',
  /** Another live daemon already serves the socket path. */
  SOCKET_IN_USE: 'E_SOCKET_IN_USE',
  /** The socket path cannot be used: a part of it is not a directory, or its folder cannot be created or entered (permissions, /proc, a read-only filesystem). */
  SOCKET_PATH: 'E_SOCKET_PATH',
  /** The metrics listener's port (`nodes[].http`, `--http`) is taken by another process. */
  HTTP_IN_USE: 'E_HTTP_IN_USE',
  /** The node's state file is malformed, or belongs to another node or cluster; `details` names the field. */
  STATE_INVALID: 'E_STATE_INVALID',
  /** The node's state file exists but cannot be read (permissions, I/O). */
  STATE_UNREADABLE: 'E_STATE_UNREADABLE',
  /** The node's state file cannot be written (read-only or full disk, permissions). */
  STATE_UNWRITABLE: 'E_STATE_UNWRITABLE',
  /** A voter's votes file (`quotad-votes.json`) is malformed or belongs to another node or cluster; `details` names the field. */
  VOTES_INVALID: 'E_VOTES_INVALID',
  /** A voter's votes file exists but cannot be read (permissions, I/O). */
  VOTES_UNREADABLE: 'E_VOTES_UNREADABLE',
  /** A voter's votes file cannot be written (read-only or full disk, permissions). */
  VOTES_UNWRITABLE: 'E_VOTES_UNWRITABLE',
  /** A voter's votes file is missing while its state file exists: it may have voted and forgotten, so it must not vote. */
  VOTES_MISSING: 'E_VOTES_MISSING',
  /** The books journal (`quotad-journal.jsonl`) is corrupt before its last line, or belongs to another node or cluster: nothing is recovered from it. */
  JOURNAL_INVALID: 'E_JOURNAL_INVALID',
  /** The books journal cannot be written: the node stops giving tokens until it can (a give must be durable before it leaves). */
  JOURNAL_UNWRITABLE: 'E_JOURNAL_UNWRITABLE',
  /** A quorum of seeds attests this incarnation dead: what it held is credited to its peers; quotad exits (status 3) to start again as a new incarnation. */
  RECLAIMED: 'E_RECLAIMED',
  /** A seed's attestations file (`quotad-attest.json`) is missing while its state file says it was kept: it may have attested members it must never echo again, so the seed does not start. */
  ATTEST_MISSING: 'E_ATTEST_MISSING',
  /** A seed's attestations file (`quotad-attest.json`) cannot be written: gossip waits until it can. */
  ATTEST_UNWRITABLE: 'E_ATTEST_UNWRITABLE',
  /** Another quotad process runs with this data directory. */
  DATA_DIR_LOCKED: 'E_DATA_DIR_LOCKED',
  /** A command-line usage error. */
  USAGE: 'E_USAGE',
  /** A bug: something that should not happen. */
  INTERNAL: 'E_INTERNAL'
} as const

export type ErrorCode = typeof ErrorCodes[keyof typeof ErrorCodes]

export class QuotadError extends Error {
  readonly code: ErrorCode
  readonly details?: unknown

  constructor (code: ErrorCode, message: string, details?: unknown) {
    super(message)
    this.name = 'QuotadError'
    this.code = code
    if (details !== undefined) this.details = details
  }
}

export function isQuotadError (err: unknown): err is QuotadError {
  return err instanceof QuotadError
}
