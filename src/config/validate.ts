/**
 * Validation of the cluster file: untyped JSON in, a fully typed
 * ClusterConfig with every default filled out.
 *
 * Two passes, one source of truth for the shape. First the JSON Schema
 * (`cluster.schema.json`, via ajv in schema.ts): types, ranges, patterns,
 * required and unknown fields. Then what a schema can't say: durations,
 * multiaddr hosts and ports, the socket path limit after resolution,
 * uniqueness, a seed at all, and fields that apply only to some algorithms
 * or modes. Every problem of both passes is reported at once, one per JSON
 * path, in one ConfigError, so a user fixes the whole file in one go.
 *
 * Relative paths resolve against `baseDir` (the cluster file's own folder), so
 * the file means the same thing whatever the working directory of the daemon.
 * Nothing here touches the file system.
 */

import { isIPv4, isIPv6 } from 'node:net'
import { resolve } from 'node:path'
import { ConfigError, ErrorCodes, QuotadError, type ConfigIssue } from '../errors.js'
import {
  DEFAULT_FIRST_USE_WAIT_MS, DEFAULT_GOSSIP_INTERVAL_MS, DEFAULT_TRANSPORT_NICE, DEFAULT_LIMITS, DEFAULT_SOCKET_MODE,
  type ClusterConfig, type ClusterSection, type FailurePolicy, type LimitsConfig, type Mode, type NodeConfig, type RuleConfig
} from './types.js'
import { tryParseDuration } from './duration.js'
import { describe, ruleSchemaIssues, schemaIssues } from './schema.js'
import { leaseIssues, leaseSettings } from './lease-options.js'
import { envoySection, grpcAddress } from './envoy-config.js'

export { FIELDS } from './schema.js'

export const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/
export const NAME_TEXT = '1-64 characters from A-Z a-z 0-9 . _ -'
/** HOST:PORT for the metrics listener (IPv6 hosts in brackets). */
export const HTTP_RE = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/
export const HTTP_TEXT = 'HOST:PORT, such as "127.0.0.1:9464"'
/** Linux sun_path is 108 bytes including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107
const MAX_SLIDING_LOG_LIMIT = 1_000_000
const MAX_PER_MS = 366 * 86_400_000
const LISTEN_RE = /^\/(ip4|ip6|dns4|dns6|dns)\/([^/]+)\/tcp\/([0-9]{1,5})$/
const HOST_RE = /^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/
/** A one-node file needs no cluster section, swarm key or listen address: it runs without the cluster layer. */
const LONE_CLUSTER: ClusterSection = { name: 'local', secretFile: '', gossipIntervalMs: DEFAULT_GOSSIP_INTERVAL_MS, firstUseWaitMs: DEFAULT_FIRST_USE_WAIT_MS, transportNice: DEFAULT_TRANSPORT_NICE, inheritSeeds: true, ...leaseSettings(DEFAULT_GOSSIP_INTERVAL_MS) }
const LONE_LISTEN = '/ip4/127.0.0.1/tcp/0'

type Obj = Record<string, unknown>

/** Why a listen multiaddr is unusable, or undefined. */
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

/** socketMode: an octal string ("0660", "660", "0o660") or a JSON integer taken as its numeric value. */
function socketMode (v: unknown): number {
  if (typeof v === 'number') return v
  if (typeof v === 'string') return parseInt(v.replace(/^0o/, ''), 8)
  return DEFAULT_SOCKET_MODE
}

class Issues {
  readonly list: ConfigIssue[]
  private readonly seen: Set<string>
  constructor (first: ConfigIssue[]) {
    this.list = [...first]
    this.seen = new Set(first.map(i => i.path))
  }

  /** Whether the schema pass already found a problem at `path` (then there is nothing more to say of it). */
  has (path: string): boolean { return this.seen.has(path) }

  add (path: string, message: string): void {
    if (this.seen.has(path)) return
    this.seen.add(path)
    this.list.push({ path, message })
  }
}

function node (o: Obj, i: number, baseDir: string, issues: Issues): NodeConfig {
  const path = `nodes[${i}]`
  const listen = typeof o.listen === 'string' ? o.listen : LONE_LISTEN
  if (typeof o.listen === 'string' && !issues.has(`${path}.listen`)) {
    const why = listenIssue(o.listen)
    if (why !== undefined) issues.add(`${path}.listen`, why)
  }
  const socket = resolve(baseDir, String(o.socket))
  if (typeof o.socket === 'string' && Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES) {
    issues.add(`${path}.socket`, `resolves to ${JSON.stringify(socket)}, which is ${Buffer.byteLength(socket)} bytes; ` +
      `Unix socket paths are limited to ${MAX_SOCKET_PATH_BYTES} bytes (Linux sun_path), so use a shorter path`)
  }
  for (const key of ['socket', 'dataDir'] as const) {
    if (typeof o[key] === 'string' && (o[key] as string).includes('\0')) issues.add(`${path}.${key}`, 'must not contain a NUL character')
  }
  let grpc: string | undefined
  if (typeof o.grpc === 'string' && !issues.has(`${path}.grpc`)) {
    const g = grpcAddress(o.grpc, baseDir)
    if ('issue' in g) issues.add(`${path}.grpc`, g.issue)
    else grpc = g.address
  }
  return {
    name: String(o.name),
    listen,
    socket,
    dataDir: resolve(baseDir, String(o.dataDir)),
    socketMode: socketMode(o.socketMode),
    seed: o.seed !== false,
    ...(typeof o.peerId === 'string' ? { peerId: o.peerId } : {}),
    ...(typeof o.http === 'string' ? { http: o.http } : {}),
    ...(grpc === undefined ? {} : { grpc })
  }
}

function rule (o: Obj, i: number, issues: Issues): RuleConfig {
  const path = `rules[${i}]`
  const algorithm = o.algorithm as RuleConfig['algorithm']
  const limit = o.limit as number
  const mode = (o.mode ?? 'hard') as Mode
  let perMs = NaN
  if (typeof o.per === 'string' && !issues.has(`${path}.per`)) {
    const ms = tryParseDuration(o.per)
    if (ms === undefined || ms < 1 || ms > MAX_PER_MS) issues.add(`${path}.per`, `must be between 1ms and 366d, got ${describe(o.per)}`)
    else perMs = ms
  }
  if (algorithm === 'sliding-log' && typeof limit === 'number' && limit > MAX_SLIDING_LOG_LIMIT) {
    issues.add(`${path}.limit`, `must be at most ${MAX_SLIDING_LOG_LIMIT} for sliding-log, which stores one entry per ` +
      `spent token for a whole window; use sliding-window for larger limits, got ${limit}`)
  }
  if (o.burst !== undefined && typeof algorithm === 'string' && algorithm !== 'token-bucket') {
    issues.add(`${path}.burst`, `only applies to algorithm "token-bucket", and this rule uses ${JSON.stringify(algorithm)}`)
  }
  for (const key of ['onPartition', 'maxDebt']) {
    if (o[key] !== undefined && mode === 'hard') issues.add(`${path}.${key}`, 'only applies to mode "soft", and this rule is "hard"')
  }
  if (o.pace === true && typeof algorithm === 'string' && algorithm !== 'fixed-window' && algorithm !== 'sliding-window') {
    issues.add(`${path}.pace`, `only applies to fixed-window and sliding-window rules, and this rule uses ${JSON.stringify(algorithm)}`)
  }
  if (o.decide !== undefined && o.decide !== 'local' && o.decide !== 'seeds') {
    issues.add(`${path}.decide`, `must be "local" or "seeds", got ${describe(o.decide)}`)
  }
  let creditMs: number | undefined
  if (typeof o.credit === 'string' && !issues.has(`${path}.credit`)) {
    const ms = tryParseDuration(o.credit)
    if (o.decide !== 'seeds' || algorithm !== 'fixed-window') {
      issues.add(`${path}.credit`, `only applies to fixed-window rules with "decide": "seeds", and this rule is ${JSON.stringify(algorithm)}${o.decide === 'seeds' ? '' : ' decided locally'}`)
    } else if (ms === undefined || ms < 1 || (Number.isFinite(perMs) && ms > perMs)) {
      issues.add(`${path}.credit`, `must be between 1ms and the rule's per (${String(o.per)}), got ${describe(o.credit)}`)
    } else creditMs = ms
  }
  if (o.maxKeys !== undefined && typeof o.match === 'string' && !o.match.includes('*')) {
    issues.add(`${path}.maxKeys`, 'only applies to a glob rule (a match with *): an exact rule has one key')
  }
  return {
    name: String(o.name),
    match: String(o.match),
    limit,
    perMs,
    per: String(o.per),
    algorithm,
    burst: (o.burst ?? limit) as number,
    mode,
    onPartition: (o.onPartition ?? 'local-share') as FailurePolicy,
    maxDebt: (o.maxDebt ?? limit) as number,
    ...(typeof o.maxKeys === 'number' ? { maxKeys: o.maxKeys } : {}),
    ...(o.pace === true ? { pace: true } : {}),
    ...(o.decide === 'seeds' ? { decide: 'seeds' as const } : {}),
    ...(creditMs === undefined ? {} : { creditMs })
  }
}

/**
 * A validated rule back in the cluster file's shape: what the state file and
 * the journal save, so that they are read by the same definition (the schema,
 * then `rule()`) as the cluster file. `ruleFromFile(ruleToFile(r))` equals
 * `r` field for field, so a restart keeps every rule's hash (a second,
 * hand-written parser once dropped `pace`, and a restart threw the saved keys
 * of every paced rule away: 38 admitted on 30 an hour). A field that does
 * not apply to the rule (burst but for a token bucket, onPartition and
 * maxDebt in hard mode) is not written: it comes back as its default, which
 * is also what the rule's hash counts it as (core/rules.ts).
 */
export function ruleToFile (r: RuleConfig): Obj {
  return {
    name: r.name,
    match: r.match,
    limit: r.limit,
    // The text, unless a rule built in memory says another period than its text.
    per: tryParseDuration(r.per) === r.perMs ? r.per : `${r.perMs}ms`,
    algorithm: r.algorithm,
    ...(r.algorithm === 'token-bucket' ? { burst: r.burst } : {}),
    mode: r.mode,
    ...(r.mode === 'soft' ? { onPartition: r.onPartition, maxDebt: r.maxDebt } : {}),
    ...(r.maxKeys === undefined ? {} : { maxKeys: r.maxKeys }),
    ...(r.pace === true ? { pace: true } : {}),
    ...(r.decide === 'seeds' ? { decide: 'seeds' } : {}),
    ...(r.creditMs === undefined ? {} : { credit: `${r.creditMs}ms` })
  }
}

/**
 * Saved rules (the state file's `rules`, a journal checkpoint's), checked by
 * the cluster file's own definition. Also reads the shape quotad 0.2 saved
 * (the validated RuleConfig: `perMs`, `creditMs`, every default spelt out).
 * @throws ConfigError listing every problem, paths as `rules[i].field`.
 */
export function parseSavedRules (raw: unknown): RuleConfig[] {
  if (Array.isArray(raw) && raw.length === 0) return []
  const list = Array.isArray(raw) ? raw.map(fromLegacy) : raw
  const issues = new Issues(ruleSchemaIssues({ rules: list }))
  if (issues.list.length > 0) throw new ConfigError(sorted(issues.list))
  const rules = objects(list).map((o, i) => rule(o, i, issues))
  noDuplicates(issues, 'rules', rules, 'name', 'rule name')
  if (issues.list.length > 0) throw new ConfigError(sorted(issues.list))
  return rules
}

/** A rule saved as a RuleConfig (quotad 0.2) in the file's shape; any other value as it is. */
function fromLegacy (v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || !('perMs' in v)) return v
  const { perMs: _perMs, creditMs, ...o } = v as Obj
  if (o.algorithm !== 'token-bucket' && o.burst === o.limit) delete o.burst
  if (o.mode === 'hard' && o.onPartition === 'local-share' && o.maxDebt === o.limit) { delete o.onPartition; delete o.maxDebt }
  return { ...o, ...(typeof creditMs === 'number' ? { credit: `${creditMs}ms` } : {}) }
}

/** Reports each later entry whose `field` repeats an earlier entry's. */
function noDuplicates<T extends object> (issues: Issues, list: string, items: T[], field: keyof T & string, what: string): void {
  const seen = new Map<unknown, number>()
  items.forEach((item, i) => {
    const v = item[field]
    if (v === undefined) return
    const first = seen.get(v)
    if (first === undefined) seen.set(v, i)
    else issues.add(`${list}[${i}].${field}`, `duplicate ${what} ${JSON.stringify(v)}, already used by ${list}[${first}]`)
  })
}

/** Issues in file order: by path, indexes compared as numbers. */
function sorted (list: ConfigIssue[]): ConfigIssue[] {
  return [...list].sort((a, b) => a.path.localeCompare(b.path, 'en', { numeric: true }))
}

const objects = (v: unknown): Obj[] => Array.isArray(v) ? v.filter((x): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x)) : []

/**
 * Validate a parsed cluster file. Relative paths resolve against `baseDir`.
 * `source` (the file's absolute path) is copied to the result and named in
 * the error.
 * @throws ConfigError (code E_CONFIG_INVALID) listing every issue found.
 */
export function validateClusterFile (raw: unknown, baseDir: string, source?: string): ClusterConfig {
  const issues = new Issues(schemaIssues(raw))
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(sorted(issues.list), source)
  const r = raw as Obj
  const rawNodes = objects(r.nodes)
  const nodes = rawNodes.map((o, i) => node(o, i, baseDir, issues))
  noDuplicates(issues, 'nodes', nodes, 'name', 'node name')
  noDuplicates(issues, 'nodes', nodes, 'socket', 'socket path')
  noDuplicates(issues, 'nodes', nodes, 'dataDir', 'data directory')
  noDuplicates(issues, 'nodes', nodes, 'peerId', 'peer id')
  if (rawNodes.length > 0 && rawNodes.every(n => n.seed === false)) {
    issues.add('nodes', 'needs at least one seed node (a node without "seed": false): seeds hold the stock when the cluster forms')
  }
  const rules = objects(r.rules).map((o, i) => rule(o, i, issues))
  noDuplicates(issues, 'rules', rules, 'name', 'rule name')
  noDuplicates(issues, 'rules', rules, 'match', 'match pattern')
  const rawLimits = (r.limits ?? {}) as Partial<LimitsConfig>
  const envoy = typeof r.envoy === 'object' && r.envoy !== null && !Array.isArray(r.envoy)
    ? envoySection(r.envoy as Obj, rules, typeof rawLimits.maxKeyBytes === 'number' ? rawLimits.maxKeyBytes : DEFAULT_LIMITS.maxKeyBytes, issues)
    : undefined
  const c = (r.cluster ?? {}) as Obj
  const gossipIntervalMs = typeof c.gossipIntervalMs === 'number' ? c.gossipIntervalMs : DEFAULT_GOSSIP_INTERVAL_MS
  const lease = leaseSettings(gossipIntervalMs, {
    ...(typeof c.leaseMs === 'number' ? { leaseMs: c.leaseMs } : {}),
    ...(typeof c.reclaimMs === 'number' ? { reclaimMs: c.reclaimMs } : {}),
    ...(typeof c.maxClockSkewMs === 'number' ? { maxClockSkewMs: c.maxClockSkewMs } : {}),
    ...(typeof c.leases === 'boolean' ? { leases: c.leases } : {}),
    ...(typeof c.voters === 'number' ? { voters: c.voters } : {})
  })
  if (rules.length + (envoy?.rules.length ?? 0) === 0 && !issues.has('rules')) {
    issues.add('rules', r.envoy === undefined ? 'is required, with at least 1 rule' : 'is required, with at least 1 rule, unless the envoy section has a descriptor with a limit')
  }
  // Judged on the values in force (defaults included), so a file can't be unsafe by what it leaves out.
  if (!['gossipIntervalMs', 'leaseMs', 'reclaimMs', 'maxClockSkewMs'].some(f => issues.has(`cluster.${f}`))) {
    for (const i of leaseIssues(lease, gossipIntervalMs)) issues.add(i.path, i.message)
  }
  if (issues.list.length > 0) throw new ConfigError(sorted(issues.list), source)
  const cluster: ClusterSection = {
    name: typeof c.name === 'string' ? c.name : LONE_CLUSTER.name,
    secretFile: typeof c.secretFile === 'string' ? resolve(baseDir, c.secretFile) : '',
    gossipIntervalMs,
    firstUseWaitMs: typeof c.firstUseWaitMs === 'number' ? c.firstUseWaitMs : DEFAULT_FIRST_USE_WAIT_MS,
    transportNice: typeof c.transportNice === 'number' ? c.transportNice : DEFAULT_TRANSPORT_NICE,
    inheritSeeds: c.inheritSeeds !== false,
    ...lease
  }
  const limits: LimitsConfig = { ...DEFAULT_LIMITS, ...rawLimits }
  // The descriptors' rules go first: no glob rule of the file can then take an Envoy key (envoy/keys.ts).
  return {
    ...(source === undefined ? {} : { source }),
    cluster,
    nodes,
    rules: envoy === undefined ? rules : [...envoy.rules, ...rules],
    limits,
    ...(envoy === undefined ? {} : { envoy: envoy.envoy })
  }
}

/**
 * The entry for the node called `name`.
 * @throws QuotadError (code E_CONFIG_INVALID) naming the available nodes.
 */
export function findNode (config: ClusterConfig, name: string): NodeConfig {
  const found = config.nodes.find(n => n.name === name)
  if (found !== undefined) return found
  const available = config.nodes.map(n => n.name)
  throw new QuotadError(ErrorCodes.CONFIG_INVALID,
    `no node named ${JSON.stringify(name)} in ${config.source ?? 'the cluster file'}; available: ${available.join(', ')}`,
    { name, available })
}
