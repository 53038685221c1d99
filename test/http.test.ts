/**
 * The metrics and health listener, with a real HTTP client, on real nodes:
 * /healthz, /readyz (and why not), /metrics in Prometheus text with the
 * documented metric names and bounded labels.
 */
import test from 'ava'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { httpAddr, makeCluster, waitForPeers } from './helpers/cluster-procs.js'

async function get (addr: string, path: string): Promise<{ status: number, body: string, type: string }> {
  const r = await fetch(`http://${addr}${path}`)
  return { status: r.status, body: await r.text(), type: r.headers.get('content-type') ?? '' }
}


async function eventually (what: string, f: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

test.serial('healthz, readyz and metrics on real nodes; readyz says why a node is not ready', async t => {
  const c = await makeCluster(['a', 'b'], [{ name: 'day', match: 'day', limit: 100, per: '1d', algorithm: 'fixed-window' }, { name: 'sig', match: 'sig:*', limit: 5, per: '1d', algorithm: 'fixed-window' }, { name: 'idle', match: 'idle', limit: 10, per: '1d', algorithm: 'fixed-window' }])
  t.teardown(async () => await c.stopAll())
  await c.start('a', { args: ['--http', '127.0.0.1:0'] })
  await c.start('b')
  const addr = await httpAddr(c.procs.a)
  t.regex(addr, /^127\.0\.0\.1:\d+$/)
  await waitForPeers(c, ['a', 'b'], 1)
  t.is((await get(addr, '/healthz')).status, 200)
  await eventually('a to be ready', async () => (await get(addr, '/readyz')).status === 200)
  const q = await QuotadClient.connect({ socketPath: c.sockets.a })
  t.teardown(async () => await q.close())
  const timed = (body: string): number => Number(/^quotad_decision_duration_seconds_count (\d+)/m.exec(body)?.[1])
  // Every decision is counted, though only some are timed: 2 decisions, count 2 (it read 0 when the count was sampled).
  for (let i = 0; i < 2; i++) await q.acquire('day')
  t.is(timed((await get(addr, '/metrics')).body), 2)
  for (let i = 2; i < 40; i++) await q.acquire('day')
  for (let i = 0; i < 20; i++) await q.acquire(`sig:${i % 4}`)
  const m = await get(addr, '/metrics')
  t.is(m.status, 200)
  t.regex(m.type, /text\/plain/)
  for (const name of ['quotad_decisions_total', 'quotad_decision_duration_seconds_bucket', 'quotad_tokens_held', 'quotad_tokens_stranded', 'quotad_tokens_shortfall',
    'quotad_transfers_total', 'quotad_forwards_total', 'quotad_gossip_bytes_total', 'quotad_peers', 'quotad_rule_agreement', 'quotad_waiters', 'quotad_keys',
    // prom-client's standard process and Node.js metrics, under the names stock dashboards query.
    'process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
    t.regex(m.body, new RegExp(`^${name}`, 'm'), `${name} is exposed`)
  }
  const allowed = /^quotad_decisions_total\{rule="day",result="allowed"\} (\d+)/m.exec(m.body)
  t.is(Number(allowed?.[1]), 40)
  t.false(/^quotad_(process|nodejs)_/m.test(m.body), 'no quotad_ prefix on the default metrics')
  // 60 acquires: count 60, and the +Inf bucket too; a second scrape counts none again.
  t.is(timed(m.body), 60)
  t.regex(m.body, /^quotad_decision_duration_seconds_bucket\{le="\+Inf"\} 60$/m)
  t.true(Number(/^quotad_decision_duration_seconds_sum (\S+)/m.exec(m.body)?.[1]) > 0)
  t.is(timed((await get(addr, '/metrics')).body), 60)
  // A rule never used here: what this seed could spend (its share of 10 of two seeds), not 0.
  t.regex(m.body, /^quotad_tokens_held\{rule="idle"\} 5$/m)
  t.regex(m.body, /^quotad_peers\{state="alive"\} 1$/m)
  t.regex(m.body, /^quotad_rule_agreement\{rule="day"\} 1$/m)
  // Labels are by rule, never by key: four sig:* keys, one series.
  t.is(m.body.split('\n').filter(l => l.startsWith('quotad_decisions_total{rule="sig"')).length, 2)
  t.false(m.body.includes('sig:0'))
  t.is((await get(addr, '/nope')).status, 404)

  // b reloads a different `day`: a is no longer ready, and says which rule.
  const other = join(c.dir, 'cluster-b.json')
  writeFileSync(other, readFileSync(c.file, 'utf8').replace('"limit": 100', '"limit": 99'))
  c.procs.b.child.kill('SIGTERM')
  await c.procs.b.exited
  await c.start('b', { config: other })
  await eventually('a to see the disagreement', async () => {
    const r = await get(addr, '/readyz')
    return r.status === 503 && r.body.includes('day')
  })
  t.regex((await get(addr, '/metrics')).body, /^quotad_rule_agreement\{rule="day"\} 0$/m)
})
