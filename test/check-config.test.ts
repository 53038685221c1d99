/** check-config catches what would fail at start: the swarm key, duplicate listens; and warns of shadowed globs. */
import test from 'ava'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { shadows } from '../src/config/deploy-check.js'
import { writeSwarmKey } from '../src/config/swarm-key.js'
import { QUOTAD, run, tempDir } from './helpers/proc.js'

function file (dir: string, over: Record<string, unknown> = {}): string {
  const f = join(dir, 'cluster.json')
  writeFileSync(f, JSON.stringify({
    cluster: { name: 'c', secretFile: 'swarm.key' },
    nodes: [
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/7401', socket: 'a.sock', dataDir: 'a' },
      { name: 'b', listen: '/ip4/127.0.0.1/tcp/7402', socket: 'b.sock', dataDir: 'b' }
    ],
    rules: [{ name: 'api', match: 'api', limit: 2, per: '1h', algorithm: 'fixed-window' }],
    ...over
  }))
  return f
}

test('a missing, malformed or world-readable swarm key is an error naming the file, never E_INTERNAL', async t => {
  const dir = tempDir()
  const f = file(dir)
  const missing = await run(QUOTAD, ['check-config', f])
  t.is(missing.code, 2)
  t.regex(missing.stderr, /E_CONFIG_INVALID/)
  t.regex(missing.stderr, /cluster\.secretFile: .*swarm\.key.*quotad keygen/)
  writeFileSync(join(dir, 'swarm.key'), 'not a key', { mode: 0o600 })
  const malformed = await run(QUOTAD, ['check-config', f])
  t.regex(malformed.stderr, /not a swarm key/)
  await writeSwarmKey(join(dir, 'swarm.key'), true)
  chmodSync(join(dir, 'swarm.key'), 0o644)
  const open = await run(QUOTAD, ['check-config', f])
  t.regex(open.stderr, /chmod 600/)
  for (const r of [missing, malformed, open]) t.notRegex(r.stderr, /E_INTERNAL/)
  chmodSync(join(dir, 'swarm.key'), 0o600)
  const ok = await run(QUOTAD, ['check-config', f])
  t.is(ok.code, 0, ok.stderr)
  t.regex(ok.stdout, /warning: nodes\[0\]\.peerId: seed a has no pinned peer id/)
})

test('two nodes on one listen address are an error; a shadowed glob rule is a warning', async t => {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  const f = file(dir, {
    nodes: [
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/7401', socket: 'a.sock', dataDir: 'a' },
      { name: 'b', listen: '/ip4/127.0.0.1/tcp/7401', socket: 'b.sock', dataDir: 'b' }
    ]
  })
  const dup = await run(QUOTAD, ['check-config', f])
  t.is(dup.code, 2)
  t.regex(dup.stderr, /nodes\[1\]\.listen: \/ip4\/127\.0\.0\.1\/tcp\/7401 is also nodes\[0\]'s/)
  const g = file(dir, {
    rules: [
      { name: 'all', match: 'sig:*', limit: 2, per: '1h', algorithm: 'fixed-window' },
      { name: 'eu', match: 'sig:eu:*', limit: 2, per: '1h', algorithm: 'fixed-window' }
    ]
  })
  const shadowed = await run(QUOTAD, ['check-config', g])
  t.is(shadowed.code, 0, shadowed.stderr)
  t.regex(shadowed.stdout, /warning: rules\[1\]\.match: every key of "sig:eu:\*" also matches the earlier glob rules\[0\] \(all/)
})

test('two seeds, or four, are warnings naming the seed that breaks ties; leases off, none', async t => {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  const two = await run(QUOTAD, ['check-config', file(dir)])
  t.is(two.code, 0, two.stderr)
  t.regex(two.stdout, /warning: nodes: two seeds: with leases, a \(first in name order\) alone is a quorum/)
  const node = (n: string, port: number): Record<string, unknown> => ({ name: n, listen: `/ip4/127.0.0.1/tcp/${port}`, socket: `${n}.sock`, dataDir: n })
  const four = await run(QUOTAD, ['check-config', file(dir, { nodes: [node('d', 1), node('c', 2), node('b', 3), node('a', 4)] })])
  t.is(four.code, 0, four.stderr)
  t.regex(four.stdout, /warning: nodes: 4 seeds: an even number of voters; a \(first in name order\) weighs 1\.5/)
  const three = await run(QUOTAD, ['check-config', file(dir, { nodes: [node('a', 1), node('b', 2), node('c', 3)] })])
  t.notRegex(three.stdout, /warning: nodes:/)
  const off = await run(QUOTAD, ['check-config', file(dir, { cluster: { name: 'c', secretFile: 'swarm.key', leases: false } })])
  t.notRegex(off.stdout, /warning: nodes:/)
  // Five seeds of which the first four vote (cluster.voters): the warning is about the voters, and names the field.
  const five = [node('e', 1), node('d', 2), node('c', 3), node('b', 4), node('a', 5)]
  const fourOfFive = await run(QUOTAD, ['check-config', file(dir, { nodes: five, cluster: { name: 'c', secretFile: 'swarm.key', voters: 4 } })])
  t.is(fourOfFive.code, 0, fourOfFive.stderr)
  t.regex(fourOfFive.stdout, /warning: cluster\.voters: 4 voters \(of the seeds, the first 4 in name order: cluster\.voters\): an even number of voters; a \(first in name order\) weighs 1\.5/)
  const none = await run(QUOTAD, ['check-config', file(dir, { nodes: five, cluster: { name: 'c', secretFile: 'swarm.key', voters: 0 } })])
  t.is(none.code, 2, none.stdout)
  t.regex(none.stderr, /E_CONFIG_INVALID[\s\S]*cluster\.voters/)
})

test('check-config refuses unsafe lease settings with E_CONFIG_INVALID naming the field', async t => {
  const dir = tempDir()
  await writeSwarmKey(join(dir, 'swarm.key'))
  const r = await run(QUOTAD, ['check-config', file(dir, { cluster: { name: 'c', secretFile: 'swarm.key', leaseMs: 3000, reclaimMs: 3200 } })])
  t.is(r.code, 2)
  t.regex(r.stderr, /E_CONFIG_INVALID/)
  t.regex(r.stderr, /cluster\.reclaimMs: must be more than leaseMs \+ maxClockSkewMs/)
})

test('shadows: one-star patterns judged exactly', t => {
  t.true(shadows('sig:*', 'sig:eu:*'))
  t.true(shadows('*', 'anything:*'))
  t.true(shadows('*:x', 'a:*:x'))
  t.false(shadows('sig:eu:*', 'sig:*'))
  t.false(shadows('a:*', 'b:*'))
  t.false(shadows('*:x', 'a:*'))
})
