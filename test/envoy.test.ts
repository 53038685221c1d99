/**
 * Envoy's Rate Limit Service against a real daemon (Daemon, in this process,
 * on a loopback port) with a real gRPC client on Envoy's own protos. The
 * clock is a manual one, so minute windows never turn over mid-test; the
 * expected answers are envoyproxy/ratelimit's, for its example.yaml
 * (integration-test/scripts/trigger-ratelimit.sh, trigger-shadow-mode-key.sh)
 * and its service (src/service/ratelimit.go).
 */
import test from 'ava'
import { status } from '@grpc/grpc-js'
import { ManualClock } from '../src/clock.js'
import { overridesFrom, withNodeOverrides } from '../src/config/node-overrides.js'
import { validateClusterFile } from '../src/config/validate.js'
import { desc, startRlsNode, supportedExample } from './helpers/envoy.js'

/** The start of a minute (UTC), plus a second: the fixed windows of minute limits are whole minutes. */
const T0 = 28_333_334 * 60_000 + 1000

test('example.yaml: nested descriptors, a value-less key per value, shadow mode, a banned value, unlimited, as envoyproxy/ratelimit answers', async t => {
  const clock = new ManualClock(T0)
  const n = await startRlsNode({ domains: supportedExample() }, [], clock)
  t.teardown(n.close)
  const ask = async (...d: Array<ReturnType<typeof desc>>) => await n.client.shouldRateLimit({ domain: 'rl', descriptors: d })

  // trigger-ratelimit.sh: foo + baz=not-so-shady, 3 per minute: three pass, the fourth is over.
  for (const left of [2, 1, 0]) {
    const r = await ask(desc(['foo', 'pelle'], ['baz', 'not-so-shady']))
    t.is(r.overall_code, 'OK')
    t.like(r.statuses[0], { code: 'OK', current_limit: { requests_per_unit: 3, unit: 'MINUTE' }, limit_remaining: left })
  }
  const over = await ask(desc(['foo', 'pelle'], ['baz', 'not-so-shady']))
  t.is(over.overall_code, 'OVER_LIMIT')
  t.like(over.statuses[0], { code: 'OVER_LIMIT', limit_remaining: 0 })
  t.true((over.statuses[0].duration_until_reset?.seconds ?? 0) <= 60)

  // trigger-shadow-mode-key.sh: baz=shady is 3 per minute in shadow mode: never over, remaining falls to 0.
  for (let i = 0; i < 5; i++) t.is((await ask(desc(['foo', 'pelle'], ['baz', 'shady']))).overall_code, 'OK')
  t.like((await ask(desc(['foo', 'pelle'], ['baz', 'shady']))).statuses[0], { code: 'OK', limit_remaining: 0 })

  // A nested descriptor: source_cluster=proxy, destination_cluster=mock, 1 per minute.
  t.is((await ask(desc(['source_cluster', 'proxy'], ['destination_cluster', 'mock']))).overall_code, 'OK')
  t.is((await ask(desc(['source_cluster', 'proxy'], ['destination_cluster', 'mock']))).overall_code, 'OVER_LIMIT')
  // bar without a value is one bucket per value (3 per minute each); bar=bkthomps has its own 1.
  t.like((await ask(desc(['foo', 'x'], ['bar', 'v1']))).statuses[0], { limit_remaining: 2 })
  t.like((await ask(desc(['foo', 'x'], ['bar', 'v2']))).statuses[0], { limit_remaining: 2 })
  t.like((await ask(desc(['foo', 'x'], ['bar', 'bkthomps']))).statuses[0], { code: 'OK', current_limit: { requests_per_unit: 1, name: 'bkthomps' }, limit_remaining: 0 })
  // requests_per_unit 0 is always over; unlimited is OK with 2^32-1 left; each descriptor gets its status.
  const mixed = await ask(desc(['foo', 'x'], ['bar', 'banned']), desc(['foo', 'x'], ['bay', 'y']), desc(['qux', 'q']))
  t.is(mixed.overall_code, 'OVER_LIMIT')
  t.like(mixed.statuses[0], { code: 'OVER_LIMIT', current_limit: { requests_per_unit: 0, unit: 'MINUTE' } })
  t.like(mixed.statuses[1], { code: 'OK', current_limit: null, limit_remaining: 4_294_967_295 })
  t.like(mixed.statuses[2], { code: 'OK', current_limit: null, limit_remaining: 4_294_967_295 })

  // The next minute: the window's tokens are back.
  clock.advance(60_000)
  t.like((await ask(desc(['foo', 'pelle'], ['baz', 'not-so-shady']))).statuses[0], { code: 'OK', limit_remaining: 2 })
})

test('unknown domains and descriptors are OK with no limit, as envoyproxy/ratelimit answers them', async t => {
  const n = await startRlsNode({ domains: supportedExample() }, [], new ManualClock(T0))
  t.teardown(n.close)
  const unknownDomain = await n.client.shouldRateLimit({ domain: 'nope', descriptors: [desc(['foo', 'x'])] })
  t.is(unknownDomain.overall_code, 'OK')
  t.like(unknownDomain.statuses[0], { code: 'OK', current_limit: null, limit_remaining: 0 })
  const unknown = await n.client.shouldRateLimit({ domain: 'rl', descriptors: [desc(['nope', 'x']), desc(['source_cluster', 'proxy']), desc(['foo', 'x'], ['bar', 'y'], ['baz', 'z'])] })
  t.is(unknown.overall_code, 'OK')
  t.deepEqual(unknown.statuses.map(s => [s.code, s.current_limit]), [['OK', null], ['OK', null], ['OK', null]])
})

test('hits_addend: the request\'s counts for every descriptor, a descriptor\'s own wins, 0 there checks without counting, more than the limit is over', async t => {
  const n = await startRlsNode({ domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: 10 } }] }] }, [], new ManualClock(T0))
  t.teardown(n.close)
  const left = async (call: Parameters<typeof n.client.shouldRateLimit>[0]): Promise<Array<[string, number]>> =>
    (await n.client.shouldRateLimit(call)).statuses.map(s => [s.code, s.limit_remaining])
  t.deepEqual(await left({ domain: 'd', descriptors: [desc(['k', 'a'])], hits_addend: 4 }), [['OK', 6]])
  t.deepEqual(await left({ domain: 'd', descriptors: [{ ...desc(['k', 'a']), hits_addend: { value: 1 } }, desc(['k', 'b'])], hits_addend: 3 }), [['OK', 5], ['OK', 7]])
  t.deepEqual(await left({ domain: 'd', descriptors: [{ ...desc(['k', 'a']), hits_addend: { value: 0 } }] }), [['OK', 5]], 'a check spends nothing')
  t.deepEqual(await left({ domain: 'd', descriptors: [desc(['k', 'a'])], hits_addend: 6 }), [['OVER_LIMIT', 0]], '6 of the 5 left: over, and nothing spent')
  t.deepEqual(await left({ domain: 'd', descriptors: [desc(['k', 'a'])], hits_addend: 5 }), [['OK', 0]])
  t.deepEqual(await left({ domain: 'd', descriptors: [{ ...desc(['k', 'a']), hits_addend: { value: 0 } }] }), [['OVER_LIMIT', 0]], 'a check of a spent key is over')
  t.deepEqual(await left({ domain: 'd', descriptors: [desc(['k', 'c'])], hits_addend: 11 }), [['OVER_LIMIT', 0]], 'more than the limit can ever admit')
})

test('bad requests get INVALID_ARGUMENT with a stable code, and the server goes on answering', async t => {
  const n = await startRlsNode({ domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: 10 } }] }] }, [], new ManualClock(T0))
  t.teardown(n.close)
  const bad = [
    { domain: '', descriptors: [desc(['k', 'a'])] },
    { domain: 'd', descriptors: [] },
    { domain: 'd', descriptors: [{ entries: [] }] },
    { domain: 'd', descriptors: [desc(['', 'a'])] },
    { domain: 'd', descriptors: [desc(['k', 'x'.repeat(300)])] },
    { domain: 'd', descriptors: Array.from({ length: 1001 }, () => desc(['k', 'a'])) }
  ]
  for (const call of bad) {
    const err = await t.throwsAsync(n.client.shouldRateLimit(call)) as (Error & { code?: number, details?: string }) | undefined
    t.is(err?.code, status.INVALID_ARGUMENT)
    t.regex(err?.details ?? '', /^E_(BAD_ARGUMENT|KEY_TOO_LONG|BATCH_TOO_LARGE): /)
  }
  // Larger than limits.maxFrameBytes (1 MiB): refused by grpc-js before it is decoded.
  const huge = await t.throwsAsync(n.client.shouldRateLimit({ domain: 'd', descriptors: [desc(['k', 'x'.repeat(1_100_000)])] })) as (Error & { code?: number }) | undefined
  t.is(huge?.code, status.RESOURCE_EXHAUSTED)
  t.like((await n.client.shouldRateLimit({ domain: 'd', descriptors: [desc(['k', 'a'])] })).statuses[0], { code: 'OK', limit_remaining: 9 }, 'the failed calls spent nothing')
  t.is(n.daemon.rls?.counters.errors, bad.length)
})

test('responseHeaders adds RateLimit-Limit, -Remaining and -Reset of the descriptor nearest its limit', async t => {
  const n = await startRlsNode({
    responseHeaders: true,
    domains: [{ domain: 'd', descriptors: [{ key: 'a', rate_limit: { unit: 'minute', requests_per_unit: 10 } }, { key: 'b', rate_limit: { unit: 'hour', requests_per_unit: 3 } }] }]
  }, [], new ManualClock(T0))
  t.teardown(n.close)
  const r = await n.client.shouldRateLimit({ domain: 'd', descriptors: [desc(['a', '1']), desc(['b', '1'])] })
  t.deepEqual(r.response_headers_to_add.map(h => [h.key, h.value]).slice(0, 2), [['RateLimit-Limit', '3'], ['RateLimit-Remaining', '2']])
  t.is(r.response_headers_to_add[2].key, 'RateLimit-Reset')
  t.true(Number(r.response_headers_to_add[2].value) > 0)
})

test('a descriptor that references a rule gets that rule\'s algorithm: a token bucket refills', async t => {
  const clock = new ManualClock(T0)
  const n = await startRlsNode({ domains: [{ domain: 'd', descriptors: [{ key: 'user', rule: 'tb' }] }] },
    [{ name: 'tb', match: 'tb', limit: 2, per: '1s', algorithm: 'token-bucket' }], clock)
  t.teardown(n.close)
  const code = async (): Promise<string> => (await n.client.shouldRateLimit({ domain: 'd', descriptors: [desc(['user', 'u'])] })).overall_code
  t.deepEqual([await code(), await code(), await code()], ['OK', 'OK', 'OVER_LIMIT'])
  clock.advance(500)
  t.is(await code(), 'OK', 'half a second refills one token')
})

test('a reload replaces the descriptors with the rules they make: a raised limit, a new domain', async t => {
  const clock = new ManualClock(T0)
  const envoy = (limit: number, extra: unknown[] = []): unknown => ({ domains: [{ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: limit } }] }, ...extra] })
  const n = await startRlsNode(envoy(2) as Record<string, unknown>, [], clock)
  t.teardown(n.close)
  const ask = async (domain: string): Promise<[string, number | undefined]> => {
    const s = (await n.client.shouldRateLimit({ domain, descriptors: [desc(['k', 'a'])] })).statuses[0]
    return [s.code, s.current_limit?.requests_per_unit]
  }
  t.deepEqual(await ask('d'), ['OK', 2])
  t.deepEqual(await ask('e'), ['OK', undefined])
  const raw = { nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'data', grpc: '127.0.0.1:0' }], envoy: envoy(5, [{ domain: 'e', descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] }]) }
  n.daemon.reload(validateClusterFile(raw, '/unused'))
  t.deepEqual(await ask('d'), ['OK', 5], 'the raised limit')
  t.deepEqual(await ask('e'), ['OK', 1], 'the new domain')
  t.deepEqual(await ask('e'), ['OVER_LIMIT', 1])
})

test('the gRPC address: --grpc and QUOTAD_GRPC override the file, and only a Unix socket or loopback is taken', t => {
  const cfg = validateClusterFile({ nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'd' }], rules: [{ name: 'r', match: 'r', limit: 1, per: '1s', algorithm: 'fixed-window' }] }, '/x')
  t.is(withNodeOverrides(cfg, 'a', overridesFrom({}, { QUOTAD_GRPC: 'unix:rls.sock' }), '/run').nodes[0].grpc, 'unix:/run/rls.sock')
  t.is(withNodeOverrides(cfg, 'a', overridesFrom({ grpc: '[::1]:8081' }, { QUOTAD_GRPC: 'unix:x' }), '/run').nodes[0].grpc, '[::1]:8081')
  t.throws(() => withNodeOverrides(cfg, 'a', overridesFrom({ grpc: '0.0.0.0:8081' }, {}), '/run'), { code: 'E_USAGE', message: /loopback/ })
})
