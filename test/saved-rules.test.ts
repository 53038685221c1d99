/**
 * The rules a node saves (state file, journal checkpoint) are read back by
 * the cluster file's own definition, so no field can be dropped on the way:
 * a second, hand-written parser once dropped `pace`, `decide`, `credit` and
 * `maxKeys`, every restart saw "changed" rules, and threw away the saved keys
 * of paced rules (38 admitted on 30 an hour after one restart).
 *
 * A property test over random valid rules, every field of the schema: saved
 * and restored, the same RuleConfig and the same hash.
 */
import test from 'ava'
import { validateClusterFile, parseSavedRules, ruleToFile } from '../src/config/validate.js'
import { FIELDS } from '../src/config/schema.js'
import type { RuleConfig } from '../src/config/types.js'
import { ruleHash } from '../src/core/rules.js'
import { encodeState, type SavedState } from '../src/cluster/durable-state.js'
import { parseState } from '../src/cluster/state-schema.js'
import { encodeCheckpoint, replayJournal, JOURNAL_VERSION } from '../src/cluster/journal.js'
import { Rng } from '../src/sim/rng.js'

const UNITS = ['ms', 's', 'm', 'h', 'd'] as const

/** A random rule as a user writes it, over every field the schema allows (and only valid combinations). */
function randomFileRule (rng: Rng, i: number): Record<string, unknown> {
  const algorithm = (['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket'] as const)[rng.int(0, 3)]
  const unit = UNITS[rng.int(1, 4)]
  const per = `${rng.int(1, 30)}${unit}`
  const limit = algorithm === 'sliding-log' ? rng.int(1, 1000) : rng.int(1, 1_000_000)
  const glob = rng.chance(0.5)
  const soft = rng.chance(0.4)
  const r: Record<string, unknown> = { name: `r${i}:x-${rng.int(0, 99)}`, match: glob ? `k${i}:*` : `k${i}`, limit, per, algorithm }
  if (algorithm === 'token-bucket' && rng.chance(0.7)) r.burst = rng.int(1, 2_000_000)
  if (soft) {
    r.mode = 'soft'
    if (rng.chance(0.7)) r.onPartition = (['fail-closed', 'fail-open', 'local-share'] as const)[rng.int(0, 2)]
    if (rng.chance(0.7)) r.maxDebt = rng.int(0, limit)
  } else if (rng.chance(0.5)) r.mode = 'hard'
  if (glob && rng.chance(0.5)) r.maxKeys = rng.int(1, 100_000)
  if ((algorithm === 'fixed-window' || algorithm === 'sliding-window') && rng.chance(0.5)) r.pace = true
  if (rng.chance(0.4)) {
    r.decide = rng.chance(0.8) ? 'seeds' : 'local'
    if (r.decide === 'seeds' && algorithm === 'fixed-window' && rng.chance(0.6)) r.credit = '1ms'
  }
  return r
}

/** The generator covers every field of the schema's rule: a field added to the schema must be added here too. */
const GENERATED = ['name', 'match', 'limit', 'per', 'algorithm', 'burst', 'mode', 'onPartition', 'maxDebt', 'maxKeys', 'pace', 'decide', 'credit']

test('the generator covers every rule field of the schema', t => {
  t.deepEqual([...FIELDS.rule].sort(), [...GENERATED].sort())
})

function validRules (seed: number): RuleConfig[] {
  const rng = new Rng(seed)
  const rules = Array.from({ length: rng.int(1, 6) }, (_, i) => randomFileRule(rng, i))
  return validateClusterFile({ nodes: [{ name: 'a', socket: '/tmp/q.sock', dataDir: '/tmp/q' }], rules }, '/').rules
}

test('saved rules come back field for field, with the same hash (500 random rule sets)', t => {
  let paced = 0
  for (let seed = 1; seed <= 500; seed++) {
    const rules = validRules(seed)
    const back = parseSavedRules(JSON.parse(JSON.stringify(rules.map(ruleToFile))))
    t.deepEqual(back, rules, `seed ${seed}`)
    t.deepEqual(back.map(ruleHash), rules.map(ruleHash), `seed ${seed}`)
    paced += rules.filter(r => r.pace === true || r.decide === 'seeds' || r.creditMs !== undefined || r.maxKeys !== undefined).length
  }
  t.true(paced > 200, 'the runs exercised the optional fields')
})

test('a state file and a journal checkpoint keep every rule through their own bytes', t => {
  for (let seed = 1; seed <= 100; seed++) {
    const rules = validRules(seed)
    const s: SavedState = { version: 2, node: 'a', cluster: 'c', status: 'stopped', allocate: true, incarnation: 3, epoch: 'a.3', carries: ['a.3'], rules, keys: [] }
    t.deepEqual(parseState(encodeState(s), 'state').rules, rules, `state, seed ${seed}`)
    const line = encodeCheckpoint({ v: JOURNAL_VERSION, node: 'a', cluster: 'c', inc: 3, epoch: 'a.3', carries: [], allocate: true, rules, keys: [] })
    t.deepEqual(replayJournal(line + '\n', 'a', 'a', 'c').checkpoint.rules, rules, `journal, seed ${seed}`)
  }
})

test('rules saved in quotad 0.2\'s shape (a RuleConfig) are read with the same hash, pace included', t => {
  const rules = validateClusterFile({
    nodes: [{ name: 'a', socket: '/tmp/q.sock', dataDir: '/tmp/q' }],
    rules: [
      { name: 'paced', match: 'p', limit: 30, per: '1h', algorithm: 'fixed-window', pace: true },
      { name: 'credit', match: 'c:*', limit: 30, per: '1m', algorithm: 'fixed-window', decide: 'seeds', credit: '250ms', maxKeys: 10 },
      { name: 'soft', match: 's', limit: 9, per: '1s', algorithm: 'token-bucket', burst: 4, mode: 'soft', onPartition: 'fail-open', maxDebt: 2 }
    ]
  }, '/').rules
  const back = parseSavedRules(JSON.parse(JSON.stringify(rules)))
  t.deepEqual(back, rules)
  t.deepEqual(back.map(ruleHash), rules.map(ruleHash))
})

test('a saved rule that the cluster file would refuse is refused, naming its path', t => {
  const e = t.throws(() => parseSavedRules([{ name: 'x', match: 'x', limit: -1, per: '1s', algorithm: 'fixed-window' }]))
  t.is((e as { code?: string }).code, 'E_CONFIG_INVALID')
  t.regex(e?.message ?? '', /rules\[0\]\.limit/)
  const s = JSON.stringify({ version: 2, node: 'a', cluster: 'c', status: 'stopped', allocate: true, incarnation: 1, epoch: 'e', carries: [], rules: [{ name: 'x', match: 'x', limit: 5, per: '1s', algorithm: 'fixed-window', pace: 'yes' }], keys: [] })
  const f = t.throws(() => parseState(s, 'state'))
  t.is((f as { code?: string }).code, 'E_STATE_INVALID')
  t.regex(f?.message ?? '', /rules\[0\]\.pace/)
})
