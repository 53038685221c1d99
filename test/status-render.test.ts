/** quotactl status without --json: a summary with the node, cluster, peers, rules and busiest keys. */
import test from 'ava'
import { renderStatus } from '../src/cli/status-render.js'

test('keys are counted as what is in memory, beside the decisions: 0 keys after 11 acquires is not a miscount', t => {
  // A key whose window passed is dropped (it holds what a new key would): 11 acquires, then 0 keys in memory.
  const text = renderStatus({ node: 'a', uptimeMs: 9000, keys: 0, waiters: 0, rules: [{ name: 'x', limit: 100, per: '1m', algorithm: 'token-bucket', mode: 'hard', keys: 0, allowed: 11, denied: 0 }] })
  t.regex(text, /^node a: up 9 s, 0 keys in memory \(idle keys are dropped\), 11 decisions \(11 allowed, 0 denied\), 0 waiting$/m)
  t.regex(text, /^ {2}name\s+limit\s+mode\s+in mem\s+allowed/m)
})

test('the summary names what an operator looks for first', t => {
  const text = renderStatus({
    node: 'a', uptimeMs: 61_000, keys: 3, waiters: 1,
    cluster: { start: 'unclean-restart', incarnation: 4, isolated: false, allocate: false, phase: 'running', calendarSkewMs: 0,
      counters: { tokensIn: 12, tokensOut: 3, wantsSent: 5, wantsServed: 2, badMessages: 0, grantsRefused: 1 }, refused: { impostor: 2, unknown: 0 }, clusterDiffers: ['c'] },
    peers: [{ name: 'b', alive: true, lastHeardMs: 40, clockOffsetMs: -2 }, { name: 'c', alive: false, lastHeardMs: 9000, clockOffsetMs: 0 }],
    rules: [{ name: 'day', limit: 90, per: '1d', algorithm: 'fixed-window', mode: 'hard', keys: 1, allowed: 50, denied: 7 }],
    ruleAgreement: [{ name: 'day', shared: false, differ: ['c'] }],
    clusterKeys: [
      { key: 'day', held: 21.5, outstanding: 40, rate: 1.02, clusterRemaining: 50, stranded: 9, shortfall: 29.4, owed: 0, reserve: 3, tight: false, debt: 0 },
      { key: 'quiet', held: 1, outstanding: 0, rate: 0, clusterRemaining: 1 }
    ]
  })
  t.regex(text, /^node a: up 61 s, 3 keys in memory \(idle keys are dropped\), 57 decisions \(50 allowed, 7 denied\), 1 waiting$/m)
  t.regex(text, /cluster: unclean-restart, incarnation 4, connected, allocate=false/)
  t.regex(text, /ANOTHER CLUSTER CONFIGURATION at: c/)
  t.regex(text, /^ {2}c\s+DEAD\s+9000 ms ago/m)
  t.regex(text, /^ {2}day\s+90\/1d fixed-window\s+hard\s+1\s+50\s+7\s+NO \(c\)$/m)
  t.regex(text, /^ {2}key\s+held\s+out\s+rate\/s\s+remaining\s+short\s+notes$/m)
  t.regex(text, /^ {2}day\s+21\s+40\s+1\.0\s+50\s+29\s+stranded 9, reserve 3$/m)
  // A key line without the figure (an older daemon) shows '-', not 0.
  t.regex(text, /^ {2}quiet\s+1\s+0\s+0\.0\s+1\s+-$/m)
  t.true(text.indexOf('  day  ') < text.indexOf('  quiet'), 'busiest key first')
  t.false(text.includes('{'), 'no raw JSON')
})
