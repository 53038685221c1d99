/**
 * The state file is input too: a node refuses, with a stable code naming the
 * field, a file that is malformed, belongs to another node or cluster, or
 * can't be written; it never starts on a guess, and never says E_INTERNAL.
 */
import test from 'ava'
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeCluster, type TestCluster } from './helpers/cluster-procs.js'
import { startQuotad } from './helpers/proc.js'

const RULES = [{ name: 'day', match: 'day', limit: 90, per: '1d', algorithm: 'fixed-window' }]

async function startFails (c: TestCluster): Promise<{ code: number | null, stderr: string }> {
  const p = startQuotad(['--config', c.file, '--node', 'a', '--listen', '/ip4/127.0.0.1/tcp/0'])
  const { code } = await p.exited
  return { code, stderr: p.stderr() }
}

function stateFile (c: TestCluster): string {
  return join(c.dir, 'data/a/quotad-state.json')
}

/** A clean stop's file, as a node writes it, with `edit` applied. */
function writeStopped (c: TestCluster, edit: (s: Record<string, unknown>) => void): void {
  const s: Record<string, unknown> = {
    version: 2, node: 'a', cluster: 'test', status: 'stopped', allocate: true, incarnation: 1, epoch: 'e1', carries: ['e1'], stoppedAt: 0,
    rules: [{ name: 'day', match: 'day', limit: 90, perMs: 86_400_000, per: '1d', algorithm: 'fixed-window', burst: 90, mode: 'hard', onPartition: 'local-share', maxDebt: 90 }],
    keys: [{ key: 'day', rule: 'day', ruleHash: 'x', initial: 45, held: 0, tokens: 0, at: 0, burn: 0 }]
  }
  edit(s)
  mkdirSync(join(c.dir, 'data/a'), { recursive: true })
  writeFileSync(stateFile(c), JSON.stringify(s))
}

const bad: Array<[string, (s: Record<string, unknown>) => void, RegExp]> = [
  ['held as a string', s => { (s.keys as Array<Record<string, unknown>>)[0].held = '1e3' }, /keys\[0\]\.held/],
  ['a null key entry', s => { s.keys = [null] }, /keys\[0\]: must be an object/],
  ['a negative count', s => { (s.keys as Array<Record<string, unknown>>)[0].tokens = -5 }, /keys\[0\]\.tokens/],
  ['another node\'s file', s => { s.node = 'b' }, /belongs to node "b"/],
  ['another cluster\'s file', s => { s.cluster = 'other' }, /belongs to cluster "other"/],
  ['an unknown version', s => { s.version = 9 }, /version/],
  ['a clean stop\'s marks without their seq', s => { s.marks = [['b', 'b.1']] }, /marks\[0\]: must be \[giver, giverEpoch, seq\]/]
]

for (const [what, edit, path] of bad) {
  test(`a state file with ${what} is refused with E_STATE_INVALID naming it`, async t => {
    const c = await makeCluster(['a', 'b'], RULES)
    writeStopped(c, edit)
    const before = readFileSync(stateFile(c), 'utf8')
    const r = await startFails(c)
    t.is(r.code, 2)
    t.regex(r.stderr, /E_STATE_INVALID/)
    t.regex(r.stderr, path)
    t.notRegex(r.stderr, /E_INTERNAL/)
    t.is(readFileSync(stateFile(c), 'utf8'), before, 'the file is left as it was')
  })
}

test('a state file that can\'t be written (a full disk, a path that is not a file) is E_STATE_UNWRITABLE, not E_INTERNAL', async t => {
  const c = await makeCluster(['a', 'b'], RULES)
  mkdirSync(join(c.dir, 'data/a'), { recursive: true })
  symlinkSync('/dev/full', stateFile(c) + '.tmp')
  const full = await startFails(c)
  t.is(full.code, 2)
  t.regex(full.stderr, /E_STATE_UNWRITABLE/)
  t.regex(full.stderr, /disk is full/)
  const d = await makeCluster(['a', 'b'], RULES)
  mkdirSync(stateFile(d) + '.tmp', { recursive: true })
  const dir = await startFails(d)
  t.is(dir.code, 2)
  t.regex(dir.stderr, /E_STATE_UNWRITABLE/)
  t.notRegex(dir.stderr, /E_INTERNAL/)
})
