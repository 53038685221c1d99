/**
 * Kept denials (forward-kept.ts): a node that forwards keeps a seed's window
 * denial of a glob key decided at its two seeds for at most a gossip
 * interval, never past the window's end, and answers with the seed's
 * `resetMs` as it runs down; other rules' denials are never kept.
 */
import test from 'ava'
import { KeptDenials, keeps } from '../src/cluster/forward-kept.js'
import { compileRule } from '../src/core/rules.js'
import type { RuleConfig } from '../src/config/types.js'

const GLOB: RuleConfig = { name: 'api', match: 'k:*', limit: 100, perMs: 1000, per: '1s', algorithm: 'fixed-window', mode: 'hard', onPartition: 'local-share', burst: 100, maxDebt: 10, decide: 'seeds' }

test('kept for a glob key of a fixed-window rule decided at the seeds only', t => {
  t.true(keeps(compileRule(GLOB)))
  t.false(keeps(compileRule({ ...GLOB, match: 'k' })), 'an exact key: its stock is split over every seed, each asks the others')
  t.false(keeps(compileRule({ ...GLOB, decide: undefined })), 'decided at the members')
  t.false(keeps(compileRule({ ...GLOB, algorithm: 'token-bucket' })), 'tokens come back within a window')
})

test('a denial is kept at most keepMs and never past its window\'s end, with the seed\'s retry as it runs down', t => {
  const rule = compileRule(GLOB)
  const k = new KeptDenials()
  t.is(k.kept('k:1', rule, 0), null, 'nothing kept')
  // The window ends 600 ms on; kept for 250.
  k.keep('k:1', 600, 250, 1000)
  t.deepEqual(k.kept('k:1', rule, 1100), { allowed: false, remaining: 0, limit: 100, resetMs: 500, retryAfterMs: 500, rule: 'api' })
  t.is(k.kept('k:2', rule, 1100), null, 'another key')
  t.not(k.kept('k:1', rule, 1249), null)
  t.is(k.kept('k:1', rule, 1250), null, 'asked again after keepMs')
  t.is(k.kept('k:1', rule, 1100), null, 'and forgotten')
  // A window that ends sooner than keepMs: kept until it ends.
  k.keep('k:1', 80, 250, 2000)
  t.like(k.kept('k:1', rule, 2079), { resetMs: 1, retryAfterMs: 1 })
  t.is(k.kept('k:1', rule, 2080), null, 'the next window is asked for')
})
