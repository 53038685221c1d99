/**
 * The cluster file's `envoy` section and nodes' `grpc` field: what
 * validation refuses (each problem at its JSON path), and what it makes of
 * envoyproxy/ratelimit's own example configs (test/fixtures/envoy-ratelimit,
 * copied unchanged from github.com/envoyproxy/ratelimit, Apache-2.0): one
 * quotad rule per descriptor with a limit, before the file's rules.
 */
import test, { type ExecutionContext } from 'ava'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { validateClusterFile } from '../src/config/validate.js'
import { ConfigError } from '../src/errors.js'
import { DescriptorIndex } from '../src/envoy/descriptors.js'
import { descriptorKey } from '../src/envoy/keys.js'
import type { ClusterConfig, EnvoyLimit } from '../src/config/types.js'
import { ratelimitDomains, supportedExample } from './helpers/envoy.js'
import { QUOTAD, run, tempDir } from './helpers/proc.js'

type Json = Record<string, unknown>

function file (envoy: unknown, rules: unknown[] = [], grpc?: string): Json {
  return { nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'data', ...(grpc === undefined ? {} : { grpc }) }], rules, envoy }
}

function issues (t: ExecutionContext, raw: Json): Record<string, string> {
  const err = t.throws(() => validateClusterFile(raw, '/x'), { instanceOf: ConfigError })
  return Object.fromEntries((err?.issues ?? []).map(i => [i.path, i.message]))
}

const limitOf = (cfg: ClusterConfig, domain: string, entries: Array<[string, string]>): EnvoyLimit | 'unlimited' | undefined =>
  new DescriptorIndex(cfg.envoy).lookup(domain, entries.map(([key, value]) => ({ key, value })))

test('envoyproxy/ratelimit\'s examples translate as they are: one fixed-window hard rule per limited descriptor, before the file\'s rules', t => {
  const domains = [...ratelimitDomains('config.yaml'), ...ratelimitDomains('basic.yaml'), ...ratelimitDomains('another.yaml')]
  const cfg = validateClusterFile(file({ domains }, [{ name: 'mine', match: '*', limit: 5, per: '1s', algorithm: 'token-bucket' }]), '/x')
  t.deepEqual(cfg.rules.map(r => r.name), ['envoy:0.0', 'envoy:0.1', 'envoy:1.0', 'envoy:1.1', 'envoy:1.2', 'envoy:2.0', 'envoy:2.1', 'envoy:2.2', 'envoy:2.3', 'envoy:2.4', 'envoy:2.5', 'mine'])
  const users = cfg.rules[0]
  t.like(users, { match: 'envoy:0.0|mongo_cps|database=users', limit: 500, perMs: 1000, algorithm: 'fixed-window', mode: 'hard' })
  t.like(cfg.rules[6], { match: 'envoy:2.1|another|key3=*', limit: 10, per: '1h' })
  t.deepEqual(cfg.envoy?.rules[6], { name: 'envoy:2.1', path: 'envoy.domains[2].descriptors[1]' })
  t.like(limitOf(cfg, 'mongo_cps', [['database', 'users']]), { rule: 'envoy:0.0', requestsPerUnit: 500, unit: 'second' })
  t.is(limitOf(cfg, 'mongo_cps', [['database', 'other']]), undefined)
  t.like(limitOf(cfg, 'another', [['key4', 'anything']]), { rule: 'envoy:2.4', unit: 'day' })
})

test('the descriptor lookup is envoyproxy/ratelimit\'s: exact value, then wildcard, then no value; limits only where the request ends', t => {
  const example = ratelimitDomains('example.yaml')
  // quotad refuses what it does not implement, at the field: replaces, quota_mode, metadata.
  const refused = issues(t, file({ domains: example }))
  t.true(Object.keys(refused).includes('envoy.domains[0].descriptors[0].rate_limit.replaces'))
  t.true(Object.keys(refused).includes('envoy.domains[0].descriptors[5].quota_mode'))
  t.true(Object.keys(refused).includes('envoy.domains[0].descriptors[5].metadata'))
  const cfg = validateClusterFile(file({ domains: supportedExample() }), '/x')
  t.like(limitOf(cfg, 'rl', [['source_cluster', 'proxy'], ['destination_cluster', 'mock']]), { requestsPerUnit: 1, unit: 'minute' })
  t.is(limitOf(cfg, 'rl', [['source_cluster', 'proxy']]), undefined, 'no limit on source_cluster alone')
  t.is(limitOf(cfg, 'rl', [['source_cluster', 'proxy'], ['destination_cluster', 'nope']]), undefined)
  t.like(limitOf(cfg, 'rl', [['foo', 'x']]), { requestsPerUnit: 2 })
  t.like(limitOf(cfg, 'rl', [['foo', 'x'], ['bar', 'bkthomps']]), { requestsPerUnit: 1, name: 'bkthomps' })
  t.like(limitOf(cfg, 'rl', [['foo', 'x'], ['bar', 'other']]), { requestsPerUnit: 3 })
  t.like(limitOf(cfg, 'rl', [['foo', 'x'], ['bar', 'banned']]), { rule: null, requestsPerUnit: 0 })
  t.like(limitOf(cfg, 'rl', [['foo', 'x'], ['baz', 'shady']]), { requestsPerUnit: 3, shadowMode: true })
  t.like(limitOf(cfg, 'rl', [['foo', 'x'], ['baz', 'other']]), { requestsPerUnit: 1, unit: 'second' })
  t.is(limitOf(cfg, 'rl', [['foo', 'x'], ['bay', 'y']]), 'unlimited')
  t.is(limitOf(cfg, 'rl', [['foo', 'x'], ['bar', 'y'], ['baz', 'z']]), undefined, 'deeper than the config: no limit')
  t.is(limitOf(cfg, 'other', [['foo', 'x']]), undefined, 'an unknown domain')
})

test('wildcard values match values of their shape, and an exact value wins over them', t => {
  const cfg = validateClusterFile(file({
    domains: [{
      domain: 'd',
      descriptors: [
        { key: 'path', value: '/api/*', rate_limit: { unit: 'second', requests_per_unit: 10 } },
        { key: 'path', value: '/api/health', rate_limit: { unlimited: true } },
        { key: 'path', value: '/a*/b*/c', rate_limit: { unit: 'second', requests_per_unit: 7 } }
      ]
    }]
  }), '/x')
  t.like(limitOf(cfg, 'd', [['path', '/api/users']]), { requestsPerUnit: 10 })
  t.is(limitOf(cfg, 'd', [['path', '/api/health']]), 'unlimited')
  t.like(limitOf(cfg, 'd', [['path', '/ax/by/c']]), { requestsPerUnit: 7 })
  t.is(limitOf(cfg, 'd', [['path', '/other']]), undefined)
  t.is(cfg.rules[0].match, 'envoy:0.0|d|path=/api/*')
})

test('a rule reference copies the rule\'s algorithm and mode into a rule of the descriptor\'s own', t => {
  const cfg = validateClusterFile(file({ domains: [{ domain: 'd', descriptors: [{ key: 'user', rule: 'tb' }] }] }, [
    { name: 'tb', match: 'tb:*', limit: 20, per: '1m', algorithm: 'token-bucket', burst: 5, mode: 'soft', maxKeys: 100 }
  ]), '/x')
  t.like(cfg.rules[0], { name: 'envoy:0.0', match: 'envoy:0.0|d|user=*', limit: 20, perMs: 60_000, algorithm: 'token-bucket', burst: 5, mode: 'soft', maxKeys: 100 })
  t.like(cfg.rules[1], { name: 'tb', match: 'tb:*' })
  t.like(limitOf(cfg, 'd', [['user', 'u1']]), { rule: 'envoy:0.0', requestsPerUnit: 20, unit: 'minute' })
})

test('keys escape what could end an entry or act as a wildcard, so no value reaches another descriptor\'s bucket', t => {
  t.is(descriptorKey('envoy:0.1', 'd|x', [{ key: 'k=', value: 'a|b=c*%' }]), 'envoy:0.1|d%7Cx|k%3D=a%7Cb%3Dc%2A%25')
  t.not(descriptorKey('r', 'd', [{ key: 'a', value: 'x|b=y' }]), descriptorKey('r', 'd', [{ key: 'a', value: 'x' }, { key: 'b', value: 'y' }]))
})

test('each problem of the envoy section and of grpc is reported at its JSON path', t => {
  const got = issues(t, {
    nodes: [
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/1', socket: 'a.sock', dataDir: 'a', grpc: '10.0.0.1:8081' },
      { name: 'b', listen: '/ip4/127.0.0.1/tcp/2', socket: 'b.sock', dataDir: 'b', grpc: 'nope' }
    ],
    cluster: { name: 'c', secretFile: 'k' },
    rules: [{ name: 'r', match: 'r', limit: 1, per: '1s', algorithm: 'fixed-window' }],
    envoy: {
      domains: [
        {
          domain: 'd',
          descriptors: [
            { key: 'a', rate_limit: { unit: 'month', requests_per_unit: 1 } },
            { key: 'b', rate_limit: { unit: 'second' } },
            { key: 'c', rate_limit: { unlimited: true, unit: 'second' } },
            { key: 'e', rule: 'missing' },
            { key: 'f', rule: 'r', rate_limit: { unit: 'second', requests_per_unit: 1 } },
            { key: 'g', value: 'v', descriptors: [{ key: 'h', rate_limit: { unit: 'second', requests_per_unit: 1 } }, { key: 'h', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] },
            { key: 'i', shadow_mod: true }
          ]
        },
        { domain: 'd' },
        { domain: '', descriptors: [] }
      ]
    }
  })
  t.deepEqual(Object.keys(got).sort(), [
    'envoy.domains[0].descriptors[0].rate_limit.unit',
    'envoy.domains[0].descriptors[1].rate_limit.requests_per_unit',
    'envoy.domains[0].descriptors[2].rate_limit.unit',
    'envoy.domains[0].descriptors[3].rule',
    'envoy.domains[0].descriptors[4].rule',
    'envoy.domains[0].descriptors[5].descriptors[1]',
    'envoy.domains[0].descriptors[6].shadow_mod',
    'envoy.domains[1].domain',
    'envoy.domains[2].domain',
    'nodes[0].grpc',
    'nodes[1].grpc'
  ].sort())
  t.regex(got['envoy.domains[0].descriptors[6].shadow_mod'], /did you mean "shadow_mode"/)
  t.regex(got['nodes[0].grpc'], /loopback/)
})

test('an envoy section with limits needs no rules of its own; without either, rules is required', t => {
  const cfg = validateClusterFile({ nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'd', grpc: 'unix:rls.sock' }], envoy: { domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: 1 } }] }] } }, '/x')
  t.is(cfg.nodes[0].grpc, 'unix:/x/rls.sock')
  t.is(cfg.rules.length, 1)
  t.deepEqual(Object.keys(issues(t, { nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'd' }], envoy: { domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unlimited: true } }] }] } })), ['rules'])
})

test('quotad check-config reports an envoy section\'s problems with their JSON paths and exits 2', async t => {
  const dir = tempDir()
  const path = join(dir, 'cluster.json')
  writeFileSync(path, JSON.stringify(file({ domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'fortnight', requests_per_unit: 1 } }] }] }, [], 'unix:rls.sock')))
  const r = await run(QUOTAD, ['check-config', path])
  t.is(r.code, 2)
  t.regex(r.stderr, /envoy\.domains\[0\]\.descriptors\[0\]\.rate_limit\.unit: must be one of "second"/)
})
