/**
 * Config layer: duration text, the validator (every issue with its path,
 * defaults, path resolution), the loaders, and the example file and JSON
 * Schema that users see. Assertions are on `code` and issue paths, not on
 * message wording, which may change.
 */

import test, { type ExecutionContext } from 'ava'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError, ErrorCodes, QuotadError } from '../src/errors.js'
import { DEFAULT_LIMITS, DEFAULT_SOCKET_MODE } from '../src/config/types.js'
import { formatDuration, parseDuration, tryParseDuration } from '../src/config/duration.js'
import { FIELDS, findNode, validateClusterFile } from '../src/config/validate.js'
import { ruleHash } from '../src/core/rules.js'
import { loadClusterFile, loadClusterFileSync } from '../src/config/load.js'

type Json = Record<string, unknown>

const exampleUrl = new URL('../../cluster.example.json', import.meta.url)
const schemaUrl = new URL('../../cluster.schema.json', import.meta.url)
const readJson = (url: URL): Json => JSON.parse(readFileSync(url, 'utf8')) as Json

function minimal (): Json {
  return {
    cluster: { name: 'test', secretFile: 'swarm.key' },
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data/a' }],
    rules: [{ name: 'r', match: 'k', limit: 10, per: '1s', algorithm: 'fixed-window' }]
  }
}

/** Runs the validator expecting failure; returns the issue paths. */
function issuePaths (t: ExecutionContext, raw: unknown): string[] {
  try {
    validateClusterFile(raw, '/etc/quotad')
  } catch (err) {
    t.true(err instanceof ConfigError)
    t.is((err as ConfigError).code, ErrorCodes.CONFIG_INVALID)
    return (err as ConfigError).issues.map(i => i.path).sort()
  }
  t.fail('expected a ConfigError')
  return []
}

test('parseDuration accepts whole numbers with one unit', t => {
  t.is(parseDuration('500ms'), 500)
  t.is(parseDuration('1s'), 1000)
  t.is(parseDuration('90s'), 90_000)
  t.is(parseDuration('1m'), 60_000)
  t.is(parseDuration('1h'), 3_600_000)
  t.is(parseDuration('2d'), 172_800_000)
  t.is(parseDuration('0s'), 0)
})

test('parseDuration rejects fractions, signs, spaces and unknown units', t => {
  for (const bad of ['', '1', '1.5s', '-1s', ' 1s', '1s ', '1 s', '1h30m', '1w', 's', '1S', '99999999999999999d']) {
    t.is(tryParseDuration(bad), undefined, bad)
    const err = t.throws(() => parseDuration(bad))
    t.is((err as QuotadError).code, ErrorCodes.BAD_ARGUMENT)
  }
})

test('formatDuration picks the largest exact unit and round-trips', t => {
  t.is(formatDuration(86_400_000), '1d')
  t.is(formatDuration(90_000), '90s')
  t.is(formatDuration(1500), '1500ms')
  t.is(formatDuration(0), '0ms')
  t.is(formatDuration(7_200_000), '2h')
  for (const text of ['500ms', '1s', '90s', '1m', '1h', '1d', '366d']) t.is(formatDuration(parseDuration(text)), text)
})

test('a minimal file gets every default, and relative paths resolve against baseDir', t => {
  const config = validateClusterFile(minimal(), '/etc/quotad')
  t.is(config.source, undefined)
  t.deepEqual(config.cluster, {
    name: 'test', secretFile: '/etc/quotad/swarm.key', gossipIntervalMs: 250, firstUseWaitMs: 100, transportNice: 0, inheritSeeds: true, leases: true, leaseMs: 3000, reclaimMs: 5000, maxClockSkewMs: 500, voters: 15
  })
  t.deepEqual(config.nodes[0], {
    name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: '/etc/quotad/a.sock', dataDir: '/etc/quotad/data/a', socketMode: DEFAULT_SOCKET_MODE, seed: true
  })
  t.deepEqual(config.rules[0], {
    name: 'r', match: 'k', limit: 10, per: '1s', perMs: 1000, algorithm: 'fixed-window', burst: 10, mode: 'hard', onPartition: 'local-share', maxDebt: 10
  })
  t.deepEqual(config.limits, DEFAULT_LIMITS)
  t.not(config.limits, DEFAULT_LIMITS, 'a copy, so callers cannot change the defaults')
})

test('absolute paths are kept as they are', t => {
  const raw = minimal()
  ;(raw.nodes as Json[])[0].socket = '/run/quotad/a.sock'
  t.is(validateClusterFile(raw, '/etc/quotad').nodes[0].socket, '/run/quotad/a.sock')
})

test('every issue is reported at once, each with its path', t => {
  const raw = {
    $schema: './cluster.schema.json',
    cluster: { name: 'bad name', gossipIntervalMs: 5, colour: 'blue' },
    nodes: [
      { name: 'a', listen: 'tcp://127.0.0.1:7401', socket: 'a.sock', dataDir: 'd' },
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/70000', socket: './a.sock', dataDir: 'e', socketMode: '0778' }
    ],
    rules: [
      { name: 'r1', match: 'k', limit: -1, per: 'x', algoritm: 'token-bucket' },
      { name: 'r1', match: 'k', limit: 5, per: '1s', algorithm: 'fixed-window', burst: 5, onPartition: 'fail-open' }
    ],
    limits: { maxKeyBytes: 0, maxFrameBytes: 32, maxBatchItems: 100_001, maxWaiters: 1.5 },
    foo: 1
  }
  t.deepEqual(issuePaths(t, raw), [
    'cluster.colour',
    'cluster.gossipIntervalMs',
    'cluster.name',
    'cluster.secretFile',
    'foo',
    'limits.maxBatchItems',
    'limits.maxFrameBytes',
    'limits.maxKeyBytes',
    'limits.maxWaiters',
    'nodes[0].listen',
    'nodes[1].listen',
    'nodes[1].name',
    'nodes[1].socket',
    'nodes[1].socketMode',
    'rules[0].algorithm',
    'rules[0].algoritm',
    'rules[0].limit',
    'rules[0].per',
    'rules[1].burst',
    'rules[1].match',
    'rules[1].name',
    'rules[1].onPartition'
  ])
})

test('the error lists every issue in its message and details', t => {
  const raw = minimal()
  ;(raw.rules as Json[])[0].limit = -1
  const err = t.throws(() => validateClusterFile(raw, '/x', '/x/cluster.json'), { instanceOf: ConfigError })
  t.is(err.code, ErrorCodes.CONFIG_INVALID)
  t.deepEqual(err.issues.map(i => i.path), ['rules[0].limit'])
  t.deepEqual(err.details, err.issues)
  t.true(err.message.includes('/x/cluster.json'))
})

test('the top level must be an object', t => {
  for (const raw of [null, [], 'x', 3, undefined]) t.deepEqual(issuePaths(t, raw), ['(root)'])
})

test('missing sections and empty lists are issues', t => {
  t.deepEqual(issuePaths(t, {}), ['cluster', 'nodes', 'rules'])
  t.deepEqual(issuePaths(t, { ...minimal(), nodes: [], rules: [] }), ['nodes', 'rules'])
  t.deepEqual(issuePaths(t, { ...minimal(), nodes: {}, limits: 3 }), ['limits', 'nodes'])
})

test('listen must be an ip4, ip6 or dns multiaddr with a tcp port', t => {
  const ok = ['/ip4/0.0.0.0/tcp/0', '/ip4/10.1.2.3/tcp/65535', '/ip6/::1/tcp/7401', '/dns4/node-a.example.com/tcp/7401', '/dns/localhost/tcp/1', '/dns6/a/tcp/2']
  for (const listen of ok) {
    const raw = minimal()
    ;(raw.nodes as Json[])[0].listen = listen
    t.is(validateClusterFile(raw, '/').nodes[0].listen, listen)
  }
  const bad = ['/ip4/256.0.0.1/tcp/1', '/ip6/zz::1/tcp/1', '/ip4/127.0.0.1/tcp/65536', '/ip4/127.0.0.1/udp/1',
    '/ip4/127.0.0.1', '/ip4/127.0.0.1/tcp/1/p2p/x', '127.0.0.1:7401', '/dns4/bad host/tcp/1', 7401, '']
  for (const listen of bad) {
    const raw = minimal()
    ;(raw.nodes as Json[])[0].listen = listen
    t.deepEqual(issuePaths(t, raw), ['nodes[0].listen'], String(listen))
  }
})

test('socketMode takes octal strings or integers within 0..0777', t => {
  const cases: Array<[unknown, number]> = [['0660', 0o660], ['660', 0o660], ['0o600', 0o600], ['0', 0], ['777', 0o777], [432, 0o660], [0, 0]]
  for (const [given, want] of cases) {
    const raw = minimal()
    ;(raw.nodes as Json[])[0].socketMode = given
    t.is(validateClusterFile(raw, '/').nodes[0].socketMode, want, String(given))
  }
  for (const bad of ['0778', '1777', 'rw-rw----', '', 660, -1, 1.5, null, true]) {
    const raw = minimal()
    ;(raw.nodes as Json[])[0].socketMode = bad
    t.deepEqual(issuePaths(t, raw), ['nodes[0].socketMode'], String(bad))
  }
})

test('a socket path longer than sun_path allows is an issue', t => {
  const raw = minimal()
  const node = (raw.nodes as Json[])[0]
  node.socket = 's'.repeat(107 - '/base/'.length) // exactly 107 bytes once resolved
  t.is(Buffer.byteLength(validateClusterFile(raw, '/base').nodes[0].socket), 107)
  node.socket = 's'.repeat(108 - '/base/'.length)
  t.deepEqual(issuePaths(t, raw), ['nodes[0].socket'])
})

test('names, sockets and data directories are unique across nodes after resolution', t => {
  const raw = minimal()
  raw.nodes = [
    { name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'run/a.sock', dataDir: 'data/a' },
    { name: 'b', listen: '/ip4/127.0.0.1/tcp/0', socket: './run/../run/a.sock', dataDir: 'data/a/' },
    { name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'run/c.sock', dataDir: 'data/c' }
  ]
  t.deepEqual(issuePaths(t, raw), ['nodes[1].dataDir', 'nodes[1].socket', 'nodes[2].name'])
})

test('rule constraints: limit, per bounds, algorithm, sliding-log cap', t => {
  const check = (rule: Json, want: string[]): void => {
    const raw = minimal()
    raw.rules = [{ name: 'r', match: 'k', limit: 10, per: '1s', algorithm: 'fixed-window', ...rule }]
    t.deepEqual(issuePaths(t, raw), want, JSON.stringify(rule))
  }
  check({ limit: 0 }, ['rules[0].limit'])
  check({ limit: 1.5 }, ['rules[0].limit'])
  check({ limit: '10' }, ['rules[0].limit'])
  check({ limit: 1e12 + 1 }, ['rules[0].limit'])
  check({ per: '0ms' }, ['rules[0].per'])
  check({ per: '367d' }, ['rules[0].per'])
  check({ per: 1000 }, ['rules[0].per'])
  check({ per: undefined }, ['rules[0].per'])
  check({ algorithm: 'leaky-bucket' }, ['rules[0].algorithm'])
  check({ algorithm: undefined }, ['rules[0].algorithm'])
  check({ algorithm: 'sliding-log', limit: 1_000_001 }, ['rules[0].limit'])
  check({ match: 'x'.repeat(257) }, ['rules[0].match'])
  check({ name: 'has space' }, ['rules[0].name'])
  check({ mode: 'medium' }, ['rules[0].mode'])
  check({ decide: 'anywhere' }, ['rules[0].decide'])
  check({ decide: true }, ['rules[0].decide'])
  check({ credit: '100ms' }, ['rules[0].credit'])
  check({ credit: '100ms', decide: 'seeds', algorithm: 'sliding-window' }, ['rules[0].credit'])
  check({ credit: '2s', decide: 'seeds' }, ['rules[0].credit'])
  check({ credit: '0ms', decide: 'seeds' }, ['rules[0].credit'])
  check({ credit: 100, decide: 'seeds' }, ['rules[0].credit'])
  const raw = minimal()
  raw.rules = [{ name: 'ip:signup', match: 'signup:*', limit: 1_000_000, per: '366d', algorithm: 'sliding-log' }]
  t.is(validateClusterFile(raw, '/').rules[0].perMs, 366 * 86_400_000)
})

test('burst is for token-bucket only; onPartition and maxDebt are for soft mode only', t => {
  const raw = minimal()
  raw.rules = [
    { name: 'tb', match: 'a', limit: 10, per: '1s', algorithm: 'token-bucket', burst: 30 },
    { name: 'tb-default', match: 'b', limit: 10, per: '1s', algorithm: 'token-bucket' },
    { name: 'soft', match: 'c', limit: 10, per: '1m', algorithm: 'fixed-window', mode: 'soft', onPartition: 'fail-open', maxDebt: 0 }
  ]
  const rules = validateClusterFile(raw, '/').rules
  t.is(rules[0].burst, 30)
  t.is(rules[1].burst, 10)
  t.like(rules[2], { mode: 'soft', onPartition: 'fail-open', maxDebt: 0 })

  raw.rules = [
    { name: 'fw', match: 'a', limit: 10, per: '1s', algorithm: 'fixed-window', burst: 10 },
    { name: 'hard', match: 'b', limit: 10, per: '1s', algorithm: 'fixed-window', mode: 'hard', maxDebt: 1 },
    { name: 'implicit-hard', match: 'c', limit: 10, per: '1s', algorithm: 'fixed-window', onPartition: 'fail-open' },
    { name: 'bad-values', match: 'd', limit: 10, per: '1s', algorithm: 'token-bucket', burst: 0, mode: 'soft', onPartition: 'x', maxDebt: -1 }
  ]
  t.deepEqual(issuePaths(t, raw), [
    'rules[0].burst', 'rules[1].maxDebt', 'rules[2].onPartition', 'rules[3].burst', 'rules[3].maxDebt', 'rules[3].onPartition'
  ])
})

test('limits: partial objects keep defaults for the rest, bounds apply', t => {
  const raw = { ...minimal(), limits: { maxKeys: 10, maxWaitMs: 2 ** 31 - 1 } }
  t.deepEqual(validateClusterFile(raw, '/').limits, { ...DEFAULT_LIMITS, maxKeys: 10, maxWaitMs: 2 ** 31 - 1 })
  t.deepEqual(issuePaths(t, { ...minimal(), limits: { maxWaitMs: 2 ** 31, maxConnections: 0, maxKey: 1 } }),
    ['limits.maxConnections', 'limits.maxKey', 'limits.maxWaitMs'])
})

test('findNode returns the entry or names the available nodes', t => {
  const config = validateClusterFile(readJson(exampleUrl), '/srv')
  t.is(findNode(config, 'b').listen, '/ip4/127.0.0.1/tcp/7402')
  const err = t.throws(() => findNode(config, 'z'), { instanceOf: QuotadError })
  t.is(err.code, ErrorCodes.CONFIG_INVALID)
  t.deepEqual((err.details as { available: string[] }).available, ['a', 'b', 'c'])
})

test('cluster.example.json is valid and as documented', t => {
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const config = validateClusterFile(readJson(exampleUrl), root)
  t.deepEqual(config.nodes.map(n => n.name), ['a', 'b', 'c'])
  t.is(config.nodes[0].socket, join(root, 'run/a.sock'))
  t.is(config.cluster.secretFile, join(root, 'swarm.key'))
  t.deepEqual(config.rules.map(r => r.name), ['payments', 'signups-per-ip', 'search-api', 'card-failures', 'reports', 'emails'])
  t.like(config.rules[5], { mode: 'soft', onPartition: 'local-share' })
})

test('loadClusterFile and loadClusterFileSync resolve paths against the file folder and set source', async t => {
  const dir = await mkdtemp(join(tmpdir(), 'quotad-config-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const file = join(dir, 'cluster.json')
  await writeFile(file, '\ufeff' + JSON.stringify(minimal()))
  for (const config of [await loadClusterFile(file), loadClusterFileSync(file)]) {
    t.is(config.source, file)
    t.is(config.nodes[0].socket, join(dir, 'a.sock'))
    t.is(config.cluster.secretFile, join(dir, 'swarm.key'))
  }
})

test('unreadable or non-JSON files are E_CONFIG_READ naming the file; bad content is E_CONFIG_INVALID', async t => {
  const dir = await mkdtemp(join(tmpdir(), 'quotad-config-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const missing = join(dir, 'missing.json')
  const notJson = join(dir, 'not-json.json')
  const invalid = join(dir, 'invalid.json')
  await writeFile(notJson, '{ "cluster": ')
  await writeFile(invalid, JSON.stringify({ ...minimal(), rules: [] }))
  for (const file of [missing, notJson, dir]) {
    const err = await t.throwsAsync(loadClusterFile(file), { instanceOf: QuotadError })
    t.is(err.code, ErrorCodes.CONFIG_READ)
    t.true(err.message.includes(file))
    const errSync = t.throws(() => loadClusterFileSync(file), { instanceOf: QuotadError })
    t.is(errSync.code, ErrorCodes.CONFIG_READ)
  }
  const err = await t.throwsAsync(loadClusterFile(invalid), { instanceOf: ConfigError })
  t.is(err.code, ErrorCodes.CONFIG_INVALID)
  t.deepEqual(err.issues.map(i => i.path), ['rules'])
  t.true(err.message.includes(invalid))
})

/** Follows a local `#/definitions/x` reference. */
function deref (schema: Json, node: Json): Json {
  const ref = node.$ref
  if (typeof ref !== 'string') return node
  return deref(schema, ref.slice(2).split('/').reduce<Json>((at, key) => at[key] as Json, schema))
}

test('every field of the example is described in the schema', t => {
  const schema = readJson(schemaUrl)
  const walk = (value: unknown, node: Json, path: string): void => {
    node = deref(schema, node)
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, node.items as Json, `${path}[${i}]`))
    } else if (typeof value === 'object' && value !== null) {
      const props = node.properties as Record<string, Json> | undefined
      for (const [key, child] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`
        const prop = props?.[key]
        if (prop === undefined) { t.fail(`${at} is not in the schema`); continue }
        t.is(typeof deref(schema, prop).description, 'string', `${at} has no description`)
        walk(child, prop, at)
      }
    }
  }
  walk(readJson(exampleUrl), schema, '')
})

test('the schema describes every property and allows exactly the fields the validator allows', t => {
  const schema = readJson(schemaUrl)
  const defs = schema.definitions as Record<string, Json>
  const sections: Array<[Json, readonly string[]]> = [
    [schema, FIELDS.top], [defs.cluster, FIELDS.cluster], [defs.node, FIELDS.node], [defs.rule, FIELDS.rule], [defs.limits, FIELDS.limits]
  ]
  for (const [section, fields] of sections) {
    t.is(section.additionalProperties, false)
    const props = section.properties as Record<string, Json>
    t.deepEqual(Object.keys(props).sort(), [...fields].sort())
    for (const [key, prop] of Object.entries(props)) {
      t.is(typeof deref(schema, prop).description, 'string', `${key} has no description`)
    }
  }
})

test('a cluster needs at least one seed; seed must be a boolean', t => {
  const raw = minimal() as { nodes: Array<Record<string, unknown>> }
  raw.nodes[0].seed = false
  const err = t.throws<ConfigError>(() => validateClusterFile(raw, '/etc/quotad'))
  t.is(err?.code, 'E_CONFIG_INVALID')
  t.true(err?.issues.some(i => i.path === 'nodes'))
  raw.nodes[0].seed = 'yes'
  t.true(t.throws<ConfigError>(() => validateClusterFile(raw, '/etc/quotad'))?.issues.some(i => i.path === 'nodes[0].seed'))
})

/** The paths of a file whose cluster section is `cluster` (undefined: it validates). */
function leasePaths (t: ExecutionContext, cluster: Json): string[] | undefined {
  const raw = { ...minimal(), cluster: { name: 'test', secretFile: 'swarm.key', ...cluster } }
  try {
    validateClusterFile(raw, '/etc/quotad')
    return undefined
  } catch (err) {
    t.is((err as ConfigError).code, ErrorCodes.CONFIG_INVALID)
    return (err as ConfigError).issues.map(i => i.path).sort()
  }
}

test('lease settings: unsafe combinations are refused on the field at fault', t => {
  // The table of cluster-protocol.md, "Configuration".
  t.deepEqual(leasePaths(t, { gossipIntervalMs: 250, leaseMs: 999 }), ['cluster.leaseMs'])
  t.is(leasePaths(t, { gossipIntervalMs: 250, leaseMs: 1000, reclaimMs: 2000, maxClockSkewMs: 50 }), undefined)
  t.deepEqual(leasePaths(t, { leaseMs: 3000, reclaimMs: 3500, maxClockSkewMs: 500 }), ['cluster.reclaimMs'])
  t.deepEqual(leasePaths(t, { leaseMs: 3000, reclaimMs: 3600, maxClockSkewMs: 500 }), undefined)
  // Shorter than any peer alive timeout (at least 1000): refused by the schema's bound.
  t.deepEqual(leasePaths(t, { gossipIntervalMs: 10, leaseMs: 100, reclaimMs: 900, maxClockSkewMs: 50 }), ['cluster.reclaimMs'])
  t.deepEqual(leasePaths(t, { maxClockSkewMs: 49 }), ['cluster.maxClockSkewMs'])
  // Drift alone over 100 s + 200 s is 300 ms.
  t.deepEqual(leasePaths(t, { leaseMs: 100_000, reclaimMs: 200_000, maxClockSkewMs: 299 }), ['cluster.maxClockSkewMs'])
  t.is(leasePaths(t, { leaseMs: 100_000, reclaimMs: 200_000, maxClockSkewMs: 300 }), undefined)
  // A default is judged too: an explicit short reclaim against the default lease.
  t.deepEqual(leasePaths(t, { reclaimMs: 3000 }), ['cluster.reclaimMs'])
  t.deepEqual(leasePaths(t, { leases: 'yes', leaseMs: 1.5 }), ['cluster.leaseMs', 'cluster.leases'])
})

test('lease defaults follow a long gossip interval, and are always accepted', t => {
  for (const g of [10, 100, 250, 750, 1000, 5000, 60_000]) {
    const c = validateClusterFile({ ...minimal(), cluster: { name: 'test', secretFile: 'swarm.key', gossipIntervalMs: g } }, '/etc/quotad').cluster
    t.true(c.leaseMs >= 4 * g && c.reclaimMs > c.leaseMs + c.maxClockSkewMs && c.leases, `gossip ${g}: ${JSON.stringify(c)}`)
  }
  const off = validateClusterFile({ ...minimal(), cluster: { name: 'test', secretFile: 'swarm.key', leases: false, leaseMs: 10_000 } }, '/etc/quotad').cluster
  t.like(off, { leases: false, leaseMs: 10_000, reclaimMs: 12_000 })
})

test('decide: "seeds" is kept, "local" is the default, and only "seeds" changes the rule hash', t => {
  const raw = minimal()
  raw.rules = [
    { name: 'a', match: 'a', limit: 10, per: '1s', algorithm: 'fixed-window', decide: 'seeds' },
    { name: 'b', match: 'b', limit: 10, per: '1s', algorithm: 'fixed-window', decide: 'local' },
    { name: 'c', match: 'c', limit: 10, per: '1s', algorithm: 'fixed-window' }
  ]
  const rules = validateClusterFile(raw, '/').rules
  t.is(rules[0].decide, 'seeds')
  t.is(rules[1].decide, undefined)
  t.is(rules[2].decide, undefined)
  // A rule without it keeps the hash it had before the field existed, so a cluster hash survives the upgrade.
  t.is(ruleHash({ ...rules[2] }), ruleHash({ ...rules[1], name: 'c', match: 'c' }))
  t.not(ruleHash(rules[0]), ruleHash({ ...rules[0], decide: undefined }))
})

test('a rule\'s credit is kept in ms, and changes the rule hash only when set', t => {
  const raw = minimal()
  raw.rules = [{ name: 'a', match: 'a:*', limit: 100, per: '1s', algorithm: 'fixed-window', decide: 'seeds', credit: '250ms' }]
  const rule = validateClusterFile(raw, '/').rules[0]
  t.is(rule.creditMs, 250)
  const { creditMs: _, ...without } = rule
  t.not(ruleHash(rule), ruleHash(without))
  t.is(ruleHash(without), ruleHash({ ...without }))
})
