/**
 * `quotad simulate` as a user runs it: a real process, its table, its exit
 * status, a trace replay, a property-case replay, and bad flags.
 */
import test from 'ava'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { QUOTAD, run, tempDir } from './helpers/proc.js'
import { fileURLToPath } from 'node:url'

const EXAMPLE = fileURLToPath(new URL('../../cluster.example.json', import.meta.url))

test('simulate prints a row per scenario with both baselines and exits 0', async t => {
  const r = await run(QUOTAD, ['simulate', '--scenario', 'zipf', '--nodes', '4', '--seconds', '3', '--seeds', '2'])
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /rule api: fixed-window 1000\/1000ms, 4 nodes, 3 s per run, gossip 250 ms, seeds 1\.\.2/)
  const line = r.stdout.split('\n').find(l => l.startsWith('| zipf'))
  t.truthy(line, r.stdout)
  const cells = (line as string).split('|').map(c => c.trim())
  t.is(cells[2], '4')
  t.is(cells[4], '2') // runs
  t.is(cells[5], '0') // overshoot
  t.regex(cells[7], /%$/) // static split utilization
  t.is(cells[8], '100.0%') // central is the bound
  t.is(cells[14], 'ok')
})

test('simulate --seed-nodes runs a member-heavy cluster and says so', async t => {
  const r = await run(QUOTAD, ['simulate', '--scenario', 'moving-hot', '--nodes', '6', '--seed-nodes', '2', '--seconds', '3'])
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /6 nodes \(2 seeds, 4 members\), 3 s per run/)
  const cells = (r.stdout.split('\n').find(l => l.startsWith('| moving-hot')) ?? '').split('|').map(c => c.trim())
  t.is(cells[2], '6 (2 seeds)', r.stdout)
  t.is(cells[5], '0') // overshoot
  t.is(cells[14], 'ok')
  const bad = await run(QUOTAD, ['simulate', '--scenario', 'zipf', '--nodes', '6', '--seed-nodes', '7'])
  t.regex(bad.stderr, /E_USAGE.*--seed-nodes must be at most --nodes \(6\)/)
})

test('simulate --decide seeds: a cluster file\'s rule decided at the seeds, and the replay line says so; a bad value is E_USAGE', async t => {
  const r = await run(QUOTAD, ['simulate', '--config', EXAMPLE, '--rule', 'payments', '--scenario', 'uniform', '--nodes', '12', '--seed-nodes', '3', '--decide', 'seeds', '--seconds', '3', '--json'])
  t.is(r.code, 0, r.stderr)
  const res = JSON.parse(r.stdout.split('\n')[0]) as { ok: boolean, overshoot: number, replay: string, traffic: Record<string, unknown> }
  t.true(res.ok, r.stdout)
  t.is(res.overshoot, 0)
  t.regex(res.replay, /--decide seeds/)
  t.truthy(res.traffic.fwd, 'members forwarded their acquires')
  const bad = await run(QUOTAD, ['simulate', '--scenario', 'uniform', '--decide', 'maybe'])
  t.regex(bad.stderr, /E_USAGE.*--decide must be local or seeds/)
})

test('simulate --voters: the first K seeds vote, and the replay line says so', async t => {
  const r = await run(QUOTAD, ['simulate', '--scenario', 'partition-minority', '--nodes', '5', '--voters', '3', '--seconds', '3', '--json'])
  t.is(r.code, 0, r.stderr)
  const res = JSON.parse(r.stdout.split('\n')[0]) as { ok: boolean, overshoot: number, replay: string }
  t.true(res.ok, r.stdout)
  t.is(res.overshoot, 0)
  t.regex(res.replay, / --voters 3/)
  const bad = await run(QUOTAD, ['simulate', '--scenario', 'zipf', '--nodes', '6', '--voters', '0'])
  t.regex(bad.stderr, /E_USAGE.*--voters/)
})

test('simulate replays a trace file and a property-test case', async t => {
  const dir = tempDir()
  const trace = join(dir, 'trace.csv')
  const lines = ['timestamp,node,key,count']
  for (let i = 0; i < 400; i++) lines.push(`${1000 + i * 5},n${1 + (i % 3)},api,1`)
  writeFileSync(trace, lines.join('\n') + '\n')
  const r = await run(QUOTAD, ['simulate', '--trace', trace, '--nodes', '3', '--seconds', '3', '--limit', '100'])
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /\| trace .*trace\.csv \| 3 /)

  const p = await run(QUOTAD, ['simulate', '--property', '--scenario', 'churn', '--mode', 'hard', '--seed', '5'])
  t.is(p.code, 0, p.stderr)
  t.regex(p.stdout, /\| churn .* ok /)
})

test('simulate rejects bad flags and bad traces with E_USAGE', async t => {
  const a = await run(QUOTAD, ['simulate', '--scenario', 'nope'])
  t.not(a.code, 0)
  t.regex(a.stderr, /E_USAGE.*unknown scenario "nope"/)
  const b = await run(QUOTAD, ['simulate', '--nodes', '1'])
  t.regex(b.stderr, /E_USAGE.*--nodes must be a whole number >= 2/)
  const dir = tempDir()
  const trace = join(dir, 'bad.csv')
  writeFileSync(trace, '100,n1,api,1\n200,n1,api,zero\n')
  const c = await run(QUOTAD, ['simulate', '--trace', trace])
  t.regex(c.stderr, /E_USAGE.*bad\.csv:2:/)
  // Nodes named as in a cluster file, not as simulated: refused rather than replayed as nothing.
  const named = join(dir, 'named.csv')
  writeFileSync(named, '100,a,api,1\n200,b,api,1\n')
  const d = await run(QUOTAD, ['simulate', '--trace', named, '--nodes', '3', '--limit', '100'])
  t.is(d.code, 2)
  t.regex(d.stderr, /E_USAGE.*node\(s\) "a", "b" are not simulated; the 3 simulated nodes are named n1, n2, n3/)
})
