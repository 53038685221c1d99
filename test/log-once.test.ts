import test from 'ava'
import { createLogger } from '../src/util/log.js'
import { LogOnce } from '../src/util/log-once.js'

test('a warning about the same peer and reason is logged once per interval, with the count of those held back', t => {
  const lines: Array<Record<string, unknown>> = []
  const log = createLogger({ write: l => { lines.push(JSON.parse(l) as Record<string, unknown>) } })
  let now = 0
  const once = new LogOnce(() => now, 60_000, 2)
  for (let i = 0; i < 1000; i++) once.log(log, 'warn', 'mallory', 'refused a grant', 'refused a grant', { i })
  t.is(lines.length, 1)
  t.is(lines[0].i, 0)
  // Another reason, another peer: their own lines.
  once.log(log, 'warn', 'mallory', 'rules differ', 'rule differs from peer')
  t.is(lines.length, 2)
  now = 60_000
  once.log(log, 'warn', 'mallory', 'refused a grant', 'refused a grant', { i: 1000 })
  t.is(lines.length, 3)
  t.is(lines[2].repeated, 999)
  // Bounded: a third pair evicts the oldest, whose next warning is logged at once.
  once.log(log, 'warn', 'eve', 'x', 'x')
  once.log(log, 'warn', 'mallory', 'rules differ', 'rule differs from peer')
  t.is(lines.length, 5)
})
