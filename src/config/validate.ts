/**
 * Validation of the cluster file: untyped JSON in, a fully typed ClusterConfig
 * with every default filled out.
 *
 * It never stops at the first problem. Every check records a ConfigIssue with
 * the JSON path and the constraint, and one ConfigError carries them all, so a
 * user fixes the whole file in one pass. The section checkers return partial
 * objects that hold only the fields that passed. Invariant: when no issue was
 * recorded, every required field was set, so the final casts are sound.
 *
 * Relative paths resolve against `baseDir` (the cluster file's own folder), so
 * the file means the same thing whatever the working directory of the daemon.
 * Nothing here touches the file system.
 */

import { isIPv4, isIPv6 } from 'node:net'
import { resolve } from 'node:path'
import { ConfigError, ErrorCodes, QuotadError, type ConfigIssue } from '../errors.js'
import {
  ALGORITHMS, DEFAULT_GOSSIP_INTERVAL_MS, DEFAULT_LIMITS, DEFAULT_SOCKET_MODE, FAILURE_POLICIES, MODES,
  type ClusterConfig, type ClusterSection, type LimitsConfig, type NodeConfig, type RuleConfig
} from './types.js'
import { DURATION_HINT, tryParseDuration } from './duration.js'

/** Allowed keys per object. The schema test checks cluster.schema.json against these. */
export const FIELDS = {
  top: ['$schema', 'cluster', 'nodes', 'rules', 'limits'],
  cluster: ['name', 'secretFile', 'gossipIntervalMs'],
  node: ['name', 'listen', 'socket', 'dataDir', 'socketMode', 'seed', 'peerId', 'http'],
  rule: ['name', 'match', 'limit', 'per', 'algorithm', 'burst', 'mode', 'onPartition', 'maxDebt', 'maxKeys'],
  limits: Object.keys(DEFAULT_LIMITS) as Array<keyof LimitsConfig>
} as const

/** HOST:PORT for the metrics listener (IPv6 hosts in brackets). */
export const HTTP_RE = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/
export const HTTP_TEXT = 'HOST:PORT, such as "127.0.0.1:9464"'
/** A libp2p peer id in its base58 string form (Ed25519 ids start 12D3KooW). */
const PEER_ID_RE = /^[1-9A-HJ-NP-Za-km-z]{46,60}$/
const PEER_ID_TEXT = 'a libp2p peer id as `quotad peer-id` prints it (base58, like 12D3KooW...)'
export const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/
export const NAME_TEXT = '1-64 characters from A-Z a-z 0-9 . _ -'
const RULE_NAME_RE = /^[A-Za-z0-9._:-]{1,64}$/
const RULE_NAME_TEXT = '1-64 characters from A-Z a-z 0-9 . _ : -'
const MAX_NODES = 1000
const MAX_RULES = 10_000
const MAX_MATCH_CHARS = 256
/** Token counts stay far below 2^53 so sums over many nodes remain exact. */
const MAX_TOKENS = 1e12
const MAX_SLIDING_LOG_LIMIT = 1_000_000
const MAX_PER_MS = 366 * 86_400_000
/** Linux sun_path is 108 bytes including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107
const LISTEN_RE = /^\/(ip4|ip6|dns4|dns6|dns)\/([^/]+)\/tcp\/([0-9]{1,5})$/
const HOST_RE = /^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/

/** [min, max] per limit; the others are any positive safe integer. */
const LIMIT_BOUNDS: Partial<Record<keyof LimitsConfig, readonly [number, number]>> = {
  maxKeyBytes: [1, 65_536],
  maxFrameBytes: [64, 67_108_864],
  maxBatchItems: [1, 100_000],
  // setTimeout fires at once for delays above 2^31-1 ms, so a longer wait could never be honoured.
  maxWaitMs: [1, 2 ** 31 - 1],
  // Every seed's gossip carries its member list: ~70 bytes each, within the message budget.
  maxMembers: [1, 300]
}

type Obj = Record<string, unknown>

function isObject (v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A short rendering of a bad value for messages: `-1`, `"abc"`, `an array`. */
function describe (v: unknown): string {
  if (v === undefined) return 'nothing'
  if (Array.isArray(v)) return 'an array'
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 77)}...` : v)
  return `an ${typeof v}`
}

function join (path: string, key: string): string {
  if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) return `${path}[${JSON.stringify(key)}]`
  return path === '' ? key : `${path}.${key}`
}

function quoted (values: readonly string[]): string {
  return values.map(v => JSON.stringify(v)).join(', ')
}

/** Edit distance, for "did you mean" on misspelt keys; inputs are short. */
function distance (a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[b.length]
}

/** Collects issues; its readers return undefined for a missing or bad value. */
class Checker {
  readonly issues: ConfigIssue[] = []
  constructor (readonly baseDir: string) {}

  add (path: string, message: string): void {
    this.issues.push({ path, message })
  }

  object (v: unknown, path: string): Obj | undefined {
    if (isObject(v)) return v
    this.add(path, v === undefined ? 'is required (an object)' : `must be an object, got ${describe(v)}`)
    return undefined
  }

  unknownKeys (o: Obj, allowed: readonly string[], path: string): void {
    for (const key of Object.keys(o)) {
      if (allowed.includes(key)) continue
      const near = allowed.find(k => k.toLowerCase() === key.toLowerCase() || distance(k, key) <= 2)
      this.add(join(path, key), near !== undefined
        ? `unknown field; did you mean ${JSON.stringify(near)}?`
        : `unknown field; allowed: ${allowed.join(', ')}`)
    }
  }

  /** o[key] when present; records "is required" when it is absent and required. */
  field (o: Obj, key: string, path: string, required: string | false): unknown {
    const v = o[key]
    if (v === undefined && required !== false) this.add(join(path, key), `is required (${required})`)
    return v
  }

  int (o: Obj, key: string, path: string, min: number, max: number, required: boolean): number | undefined {
    const kind = min === 0 ? 'a non-negative integer' : min === 1 ? 'a positive integer' : `an integer from ${min} to ${max}`
    const v = this.field(o, key, path, required && kind)
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
      this.add(join(path, key), `must be ${kind}, got ${describe(v)}`)
    } else if (v > max) {
      this.add(join(path, key), min > 1 ? `must be ${kind}, got ${v}` : `must be at most ${max}, got ${v}`)
    } else {
      return v
    }
    return undefined
  }

  string (o: Obj, key: string, path: string, re?: RegExp, reText?: string): string | undefined {
    const kind = reText ?? 'a non-empty string'
    const v = this.field(o, key, path, kind)
    if (v === undefined) return undefined
    if (typeof v !== 'string' || v === '' || (re !== undefined && !re.test(v))) {
      this.add(join(path, key), `must be ${kind}, got ${describe(v)}`)
      return undefined
    }
    return v
  }

  oneOf<T extends string> (o: Obj, key: string, path: string, values: readonly T[], required: boolean): T | undefined {
    const kind = `one of ${quoted(values)}`
    const v = this.field(o, key, path, required && kind)
    if (v === undefined) return undefined
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T
    this.add(join(path, key), `must be ${kind}, got ${describe(v)}`)
    return undefined
  }

  /** A path string resolved against baseDir. */
  path (o: Obj, key: string, path: string): string | undefined {
    const v = this.string(o, key, path)
    if (v === undefined) return undefined
    if (v.includes('\0')) {
      this.add(join(path, key), 'must not contain a NUL character')
      return undefined
    }
    return resolve(this.baseDir, v)
  }
}

/** A one-node file needs no cluster section, swarm key or listen address: it runs without the cluster layer. */
const LONE_CLUSTER: ClusterSection = { name: 'local', secretFile: '', gossipIntervalMs: DEFAULT_GOSSIP_INTERVAL_MS }
const LONE_LISTEN = '/ip4/127.0.0.1/tcp/0'

function checkCluster (c: Checker, v: unknown, lone: boolean): Partial<ClusterSection> {
  if (lone && v === undefined) return { ...LONE_CLUSTER }
  const o = c.object(v, 'cluster')
  if (o === undefined) return {}
  c.unknownKeys(o, FIELDS.cluster, 'cluster')
  return {
    name: lone && o.name === undefined ? LONE_CLUSTER.name : c.string(o, 'name', 'cluster', NAME_RE, NAME_TEXT),
    secretFile: lone && o.secretFile === undefined ? '' : c.path(o, 'secretFile', 'cluster'),
    gossipIntervalMs: o.gossipIntervalMs === undefined
      ? DEFAULT_GOSSIP_INTERVAL_MS
      : c.int(o, 'gossipIntervalMs', 'cluster', 10, 60_000, false)
  }
}

export function listenIssue (text: string): string | undefined {
  const m = LISTEN_RE.exec(text)
  if (m === null) {
    return 'must be a multiaddr like /ip4/127.0.0.1/tcp/7401 (/ip4, /ip6, /dns4, /dns6 or /dns, ' +
      `then /tcp/<port>), got ${describe(text)}`
  }
  const [, proto, host, port] = m
  if (proto === 'ip4' && !isIPv4(host)) return `has an invalid IPv4 address ${JSON.stringify(host)}`
  if (proto === 'ip6' && !isIPv6(host)) return `has an invalid IPv6 address ${JSON.stringify(host)}`
  if (proto.startsWith('dns') && !HOST_RE.test(host)) return `has an invalid host name ${JSON.stringify(host)}`
  if (Number(port) > 65_535) return `has TCP port ${port}; ports are 0 to 65535`
  return undefined
}

/**
 * socketMode: an octal string ("0660", "660", "0o660") or a JSON integer taken
 * as the numeric value (432 === 0o660). Only permission bits (0..0o777).
 */
function checkSocketMode (c: Checker, v: unknown, path: string): number | undefined {
  if (v === undefined) return DEFAULT_SOCKET_MODE
  let mode: number | undefined
  if (typeof v === 'string' && /^(0o)?[0-7]{1,12}$/.test(v)) mode = parseInt(v.replace(/^0o/, ''), 8)
  else if (typeof v === 'number' && Number.isInteger(v)) mode = v
  if (mode === undefined) {
    c.add(path, `must be an octal string like "0660" or an integer from 0 to 511, got ${describe(v)}`)
  } else if (mode < 0 || mode > 0o777) {
    const hint = typeof v === 'number' ? '; JSON numbers are decimal, so write octal modes as a string like "0660"' : ''
    c.add(path, `must be within 0 to 0777 (permission bits only)${hint}, got ${describe(v)}`)
  } else {
    return mode
  }
  return undefined
}

function checkNode (c: Checker, v: unknown, path: string, lone = false): Partial<NodeConfig> | undefined {
  const o = c.object(v, path)
  if (o === undefined) return undefined
  c.unknownKeys(o, FIELDS.node, path)
  let listen = lone && o.listen === undefined ? LONE_LISTEN : c.string(o, 'listen', path)
  const issue = listen === undefined ? undefined : listenIssue(listen)
  if (issue !== undefined) {
    c.add(`${path}.listen`, issue)
    listen = undefined
  }
  let socket = c.path(o, 'socket', path)
  if (socket !== undefined && Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES) {
    c.add(`${path}.socket`, `resolves to ${JSON.stringify(socket)}, which is ${Buffer.byteLength(socket)} bytes; ` +
      `Unix socket paths are limited to ${MAX_SOCKET_PATH_BYTES} bytes (Linux sun_path), so use a shorter path`)
    socket = undefined
  }
  return {
    name: c.string(o, 'name', path, NAME_RE, NAME_TEXT),
    listen,
    socket,
    dataDir: c.path(o, 'dataDir', path),
    socketMode: checkSocketMode(c, o.socketMode, `${path}.socketMode`),
    seed: checkSeed(c, o.seed, `${path}.seed`),
    ...(o.peerId === undefined ? {} : { peerId: c.string(o, 'peerId', path, PEER_ID_RE, PEER_ID_TEXT) }),
    ...(o.http === undefined ? {} : { http: c.string(o, 'http', path, HTTP_RE, HTTP_TEXT) })
  }
}

function checkSeed (c: Checker, v: unknown, path: string): boolean {
  if (v === undefined) return true
  if (typeof v !== 'boolean') c.add(path, `must be true or false, got ${JSON.stringify(v)}`)
  return v !== false
}

function checkRule (c: Checker, v: unknown, path: string): Partial<RuleConfig> | undefined {
  const o = c.object(v, path)
  if (o === undefined) return undefined
  c.unknownKeys(o, FIELDS.rule, path)
  const name = c.string(o, 'name', path, RULE_NAME_RE, RULE_NAME_TEXT)
  let match = c.string(o, 'match', path)
  if (match !== undefined && match.length > MAX_MATCH_CHARS) {
    c.add(`${path}.match`, `must be at most ${MAX_MATCH_CHARS} characters, got ${match.length}`)
    match = undefined
  }
  const algorithm = c.oneOf(o, 'algorithm', path, ALGORITHMS, true)
  let limit = c.int(o, 'limit', path, 1, MAX_TOKENS, true)
  if (limit !== undefined && algorithm === 'sliding-log' && limit > MAX_SLIDING_LOG_LIMIT) {
    c.add(`${path}.limit`, `must be at most ${MAX_SLIDING_LOG_LIMIT} for sliding-log, which stores one entry per ` +
      `spent token for a whole window; use sliding-window for larger limits, got ${limit}`)
    limit = undefined
  }
  let perMs: number | undefined
  const per = c.field(o, 'per', path, DURATION_HINT)
  if (per !== undefined) {
    const ms = typeof per === 'string' ? tryParseDuration(per) : undefined
    if (ms === undefined) c.add(`${path}.per`, `must be ${DURATION_HINT}, got ${describe(per)}`)
    else if (ms < 1 || ms > MAX_PER_MS) c.add(`${path}.per`, `must be between 1ms and 366d, got ${describe(per)}`)
    else perMs = ms
  }
  // Checks that depend on another field are skipped while that field is itself
  // broken: its own issue already explains the problem.
  if (o.burst !== undefined && algorithm !== undefined && algorithm !== 'token-bucket') {
    c.add(`${path}.burst`, `only applies to algorithm "token-bucket", and this rule uses ${JSON.stringify(algorithm)}`)
  }
  const burst = o.burst === undefined ? limit : c.int(o, 'burst', path, 1, MAX_TOKENS, false)
  const mode = o.mode === undefined ? 'hard' : c.oneOf(o, 'mode', path, MODES, false)
  for (const key of ['onPartition', 'maxDebt']) {
    if (o[key] !== undefined && mode === 'hard') c.add(`${path}.${key}`, 'only applies to mode "soft", and this rule is "hard"')
  }
  return {
    name,
    match,
    limit,
    perMs,
    per: perMs === undefined ? undefined : per as string,
    algorithm,
    burst,
    mode,
    onPartition: o.onPartition === undefined ? 'local-share' : c.oneOf(o, 'onPartition', path, FAILURE_POLICIES, false),
    maxDebt: o.maxDebt === undefined ? limit : c.int(o, 'maxDebt', path, 0, MAX_TOKENS, false),
    ...(o.maxKeys === undefined ? {} : { maxKeys: checkRuleMaxKeys(c, o, path, match) })
  }
}

function checkRuleMaxKeys (c: Checker, o: Obj, path: string, match: string | undefined): number | undefined {
  if (match !== undefined && !match.includes('*')) {
    c.add(`${path}.maxKeys`, 'only applies to a glob rule (a match with *): an exact rule has one key')
    return undefined
  }
  return c.int(o, 'maxKeys', path, 1, Number.MAX_SAFE_INTEGER, false)
}

/** A required, non-empty, bounded array, each entry checked by `each`. */
function checkList<T> (c: Checker, raw: Obj, key: string, max: number,
  each: (c: Checker, v: unknown, path: string) => T | undefined): Array<T | undefined> {
  const v = c.field(raw, key, '', 'a non-empty array')
  if (v === undefined) return []
  if (!Array.isArray(v) || v.length === 0) {
    c.add(key, `must be a non-empty array, got ${Array.isArray(v) ? 'an empty array' : describe(v)}`)
    return []
  }
  if (v.length > max) c.add(key, `must have at most ${max} entries, got ${v.length}`)
  return v.map((item, i) => each(c, item, `${key}[${i}]`))
}

/** Reports each later entry whose `field` repeats an earlier entry's. */
function noDuplicates<T extends object> (c: Checker, list: string, items: Array<T | undefined>, field: keyof T & string, what: string): void {
  const seen = new Map<unknown, number>()
  items.forEach((item, i) => {
    const v = item?.[field]
    if (v === undefined) return
    const first = seen.get(v)
    if (first === undefined) seen.set(v, i)
    else c.add(`${list}[${i}].${field}`, `duplicate ${what} ${describe(v)}, already used by ${list}[${first}]`)
  })
}

function checkLimits (c: Checker, v: unknown): LimitsConfig {
  const limits = { ...DEFAULT_LIMITS }
  if (v === undefined) return limits
  const o = c.object(v, 'limits')
  if (o === undefined) return limits
  c.unknownKeys(o, FIELDS.limits, 'limits')
  for (const key of FIELDS.limits) {
    if (o[key] === undefined) continue
    const [min, max] = LIMIT_BOUNDS[key] ?? [1, Number.MAX_SAFE_INTEGER]
    const n = c.int(o, key, 'limits', min, max, false)
    if (n !== undefined) limits[key] = n
  }
  return limits
}

/**
 * Validate a parsed cluster file. Relative paths resolve against `baseDir`.
 * `source` (the file's absolute path) is copied to the result and named in
 * the error.
 * @throws ConfigError (code E_CONFIG_INVALID) listing every issue found.
 */
export function validateClusterFile (raw: unknown, baseDir: string, source?: string): ClusterConfig {
  if (!isObject(raw)) {
    throw new ConfigError([{ path: '(root)', message: `must be a JSON object, got ${describe(raw)}` }], source)
  }
  const c = new Checker(baseDir)
  c.unknownKeys(raw, FIELDS.top, '')
  if (raw.$schema !== undefined && typeof raw.$schema !== 'string') {
    c.add('$schema', `must be a string, got ${describe(raw.$schema)}`)
  }
  const lone = Array.isArray(raw.nodes) && raw.nodes.length === 1
  const cluster = checkCluster(c, raw.cluster, lone)
  const nodes = checkList(c, raw, 'nodes', MAX_NODES, (c, v, path) => checkNode(c, v, path, lone))
  noDuplicates(c, 'nodes', nodes, 'name', 'node name')
  noDuplicates(c, 'nodes', nodes, 'socket', 'socket path')
  noDuplicates(c, 'nodes', nodes, 'dataDir', 'data directory')
  noDuplicates(c, 'nodes', nodes, 'peerId', 'peer id')
  if (nodes.length > 0 && nodes.every(n => n?.seed === false)) {
    c.add('nodes', 'needs at least one seed node (a node without "seed": false): seeds hold the stock when the cluster forms')
  }
  const rules = checkList(c, raw, 'rules', MAX_RULES, checkRule)
  noDuplicates(c, 'rules', rules, 'name', 'rule name')
  noDuplicates(c, 'rules', rules, 'match', 'match pattern')
  const limits = checkLimits(c, raw.limits)
  if (c.issues.length > 0) throw new ConfigError(c.issues, source)
  return {
    ...(source === undefined ? {} : { source }),
    cluster: cluster as ClusterSection,
    nodes: nodes as NodeConfig[],
    rules: rules as RuleConfig[],
    limits
  }
}

/**
 * The entry for the node called `name`.
 * @throws QuotadError (code E_CONFIG_INVALID) naming the available nodes.
 */
export function findNode (config: ClusterConfig, name: string): NodeConfig {
  const node = config.nodes.find(n => n.name === name)
  if (node !== undefined) return node
  const available = config.nodes.map(n => n.name)
  throw new QuotadError(ErrorCodes.CONFIG_INVALID,
    `no node named ${JSON.stringify(name)} in ${config.source ?? 'the cluster file'}; available: ${available.join(', ')}`,
    { name, available })
}
