/**
 * A seed's attestations file on real processes: a first start creates it
 * before the state file, and a start that finds it lost is refused
 * (E_ATTEST_MISSING) instead of forgetting whom it attested dead.
 */
import test from 'ava'
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ANY_PORT, makeCluster } from './helpers/cluster-procs.js'
import { startQuotad, stop } from './helpers/proc.js'

const RULES = [{ name: 'day', match: 'day', limit: 90, per: '366d', algorithm: 'fixed-window' }]

test('a seed whose quotad-attest.json was lost refuses to start (E_ATTEST_MISSING) until the file is restored', async t => {
  // Three seeds, only `a` runs: starting is all this test looks at.
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  const data = join(c.dir, 'data/a')
  const attest = join(data, 'quotad-attest.json')
  const state = join(data, 'quotad-state.json')
  await c.start('a')
  // A first start creates the file (empty) before its state file, which says it is kept.
  t.true(existsSync(attest))
  t.is(JSON.parse(readFileSync(state, 'utf8')).attestKept, true)
  await stop(c.procs.a)
  t.is(c.procs.a.child.exitCode, 0)
  const kept = readFileSync(attest, 'utf8')
  unlinkSync(attest)
  const refused = startQuotad(['--config', c.file, '--node', 'a', '--listen', ANY_PORT])
  t.teardown(async () => await stop(refused))
  t.is((await refused.exited).code, 2)
  t.regex(refused.stderr(), /E_ATTEST_MISSING/)
  t.regex(refused.stderr(), /quotad-attest\.json is missing/)
  t.false(existsSync(attest), 'nothing was created in its place')
  t.is(JSON.parse(readFileSync(state, 'utf8')).status, 'stopped', 'the stopped state file was left as it was')
  // Restored, it starts and serves again.
  writeFileSync(attest, kept, { mode: 0o600 })
  await c.start('a')
  t.is(c.procs.a.child.exitCode, null)
})

test('a state file from before attestKept (no mark, no file): the seed starts and creates the file', async t => {
  const c = await makeCluster(['a', 'b', 'c'], RULES)
  t.teardown(async () => await c.stopAll())
  const data = join(c.dir, 'data/a')
  const attest = join(data, 'quotad-attest.json')
  const state = join(data, 'quotad-state.json')
  await c.start('a')
  await stop(c.procs.a)
  // As an older version left it: the state file has no mark, and there is no attestations file.
  const old = JSON.parse(readFileSync(state, 'utf8')) as Record<string, unknown>
  delete old.attestKept
  writeFileSync(state, JSON.stringify(old), { mode: 0o600 })
  unlinkSync(attest)
  await c.start('a')
  t.true(existsSync(attest))
  t.is(JSON.parse(readFileSync(state, 'utf8')).attestKept, true)
})
