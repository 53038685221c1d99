/**
 * Replays every run in test/fixtures/sim-regressions.json: runs in which the
 * simulator once found a bug in the cluster logic. Each must now pass the
 * checker, and meet the figure its entry names.
 */
import test from 'ava'
import { readFileSync } from 'node:fs'
import type { Algorithm, Mode } from '../src/config/types.js'
import { runCase } from '../src/sim/property.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'

interface Regression {
  why: string
  found: string
  scenario: string
  seed: number
  mode: Mode
  /** A property-test case (the rest below is then unused). */
  property?: boolean
  nodes?: number
  /** Only the first this many nodes are seeds (SimSpec.seedNodes); the rest are members. */
  seedNodes?: number
  seconds?: number
  gossipMs?: number
  rule?: { match: string, algorithm: Algorithm, limit: number, perMs: number }
  minUtilization?: number
  maxMessagesPerNodeSec?: number
}

const list = JSON.parse(readFileSync(new URL('../../test/fixtures/sim-regressions.json', import.meta.url), 'utf8')) as Regression[]

for (const [i, reg] of list.entries()) {
  test(`regression ${i + 1}: ${reg.scenario} seed ${reg.seed} (${reg.why.slice(0, 60)}...)`, t => {
    const r = reg.property === true
      ? runCase({ scenario: reg.scenario, mode: reg.mode, seed: reg.seed })
      : runSim({
        scenario: scenario(reg.scenario),
        nodes: reg.nodes ?? 3,
        ...(reg.seedNodes === undefined ? {} : { seedNodes: reg.seedNodes }),
        seed: reg.seed,
        mode: reg.mode,
        durationMs: (reg.seconds ?? 10) * 1000,
        gossipIntervalMs: reg.gossipMs ?? 250,
        rule: { name: 'api', per: `${reg.rule?.perMs ?? 1000}ms`, burst: reg.rule?.limit ?? 100, mode: reg.mode, onPartition: 'local-share', maxDebt: 10,
          match: 'api', algorithm: 'fixed-window', limit: 100, perMs: 1000, ...reg.rule }
      })
    t.deepEqual(r.failures, [], r.replay)
    if (reg.minUtilization !== undefined) t.true(r.cluster.utilization >= reg.minUtilization, `utilization ${r.cluster.utilization}; ${r.replay}`)
    if (reg.maxMessagesPerNodeSec !== undefined) t.true(r.messagesPerNodeSec <= reg.maxMessagesPerNodeSec, `${r.messagesPerNodeSec} msg/s; ${r.replay}`)
  })
}
