/**
 * The simulator scenarios for the three ways hard mode once overshot, each
 * run twice: on today's code (it must pass every seed) and with the old
 * behaviour put back by a sabotage (it must fail some seed). So each
 * scenario is shown to catch its bug, and the fix is shown to hold.
 * Today's code runs 60 seeds (200 for `stops`) in `npm run test:long`, 12
 * (40) in `npm test` (test/helpers/long.ts); a sabotaged run stops at the
 * first seed that fails the way its bug did, which is all its test asks.
 *
 * 1. restart-changed: a clean restart with a changed rule dropped the saved
 *    keys and materialized fresh pre-allocated shares (123 in a day on 93).
 * 2. reload-lower / restart-lowered: a lowered limit's burn was lost, or not
 *    guarded: nodes spent tokens that a node short of them still owed.
 * 3. stops: a stopping node served wants after its snapshot, so the tokens it
 *    granted were in its saved state too.
 */
import test from 'ava'
import type { ClusterCore } from '../src/cluster/cluster-core.js'
import type { Grant, None, Want } from '../src/cluster/messages.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim, type SimSpec } from '../src/sim/run.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'
import { sweep } from './helpers/long.js'

const SEEDS = sweep(12, 60)
const STOPS_SEEDS = sweep(40, 200)

/**
 * Seeds 1..`seeds` of `scenario`; with `caught`, only until a failed run's first failure satisfies it (a sabotaged
 * run: its test asks only that some seed fails that way, so the seeds after that one would show nothing more).
 */
function runs (scenario: string, sabotage?: SimSpec['sabotage'], seeds = SEEDS, caught?: (failure: string) => boolean): { failed: number[], failures: string[] } {
  const failed: number[] = []
  const failures: string[] = []
  for (let seed = 1; seed <= seeds; seed++) {
    const r = runSim({ ...propertySpec({ scenario, mode: 'hard', seed }), ...(sabotage === undefined ? {} : { sabotage }) })
    if (!r.ok) { failed.push(seed); failures.push(`${seed}: ${r.failures[0]}`) }
    if (caught !== undefined && !r.ok && caught(`${r.failures[0]}`)) break
  }
  return { failed, failures }
}

/** A sabotaged run's bound: as many seeds as `npm run test:long` runs today's code on (the old code failed within them). */
const ALL = 60
const ALL_STOPS = 200

/** Wrap `vc.start` so every start first alters the node's disk (the state file) the old way. */
function onStart (vc: VirtualCluster, alter: (name: string) => void): void {
  const start = vc.start.bind(vc)
  vc.start = (name, rules) => { alter(name); start(name, rules) }
}

test('restart with a changed rule: today no overshoot; dropping the saved keys and re-allocating (the old restore) overshoots', t => {
  t.deepEqual(runs('restart-changed').failures, [])
  const old = runs('restart-changed', vc => onStart(vc, name => {
    const n = vc.nodes.get(name)
    // The old restore: a saved key whose rule changed was dropped; init() then allocated a fresh share.
    if (n?.disk?.status === 'stopped') n.disk = { ...n.disk, keys: [], rules: undefined, transitions: undefined }
  }), ALL, f => f.includes('overshoot') || f.includes('created'))
  t.true(old.failed.length > 0, 'the scenario catches the old restore')
  t.true(old.failures.some(f => f.includes('overshoot') || f.includes('created')), old.failures.join('\n'))
})

test('a lowered limit: today no overshoot; without caution it overshoots; with the burn forgotten at a restart it overshoots', t => {
  t.deepEqual(runs('reload-lower').failures, [])
  t.deepEqual(runs('restart-lowered').failures, [])
  t.deepEqual(runs('reload-lower-restart').failures, [])
  // No caution: every node spends all it holds while burns owed elsewhere are unpaid.
  const blind = runs('reload-lower', vc => {
    const patch = (core: ClusterCore): void => {
      const c = core as unknown as { caution: { peers: unknown, transitions: unknown } }
      c.caution.peers = { owingEntries: 0 }
      c.caution.transitions = { active: false }
    }
    for (const core of vc.cores.values()) patch(core)
  }, ALL, () => true)
  t.true(blind.failed.length > 0, 'the scenario catches spending into unpaid burns')
  // The old state file had no burns: a clean restart before they were paid forgot them.
  const forgot = runs('reload-lower-restart', vc => onStart(vc, name => {
    const n = vc.nodes.get(name)
    if (n?.disk?.status === 'stopped') n.disk = { ...n.disk, keys: n.disk.keys.map(k => ({ ...k, burn: 0 })), transitions: undefined }
  }), ALL, f => f.includes('lost') || f.includes('overshoot') || f.includes('created'))
  t.true(forgot.failed.length > 0, 'the scenario catches a burn lost at a restart')
  t.true(forgot.failures.some(f => f.includes('lost') || f.includes('overshoot') || f.includes('created')), forgot.failures.join('\n'))
})

test('a stopping node: today it refuses wants once its snapshot is taken; answering them (the old stop) creates tokens', t => {
  // The race is narrow (a want must arrive between the snapshot and the transport closing, with tokens back
  // by then), so this takes more seeds; the scenario mutes the stopping node's gossip so peers keep asking.
  t.deepEqual(runs('stops', undefined, STOPS_SEEDS).failures, [])
  const old = runs('stops', vc => {
    // The old stop: onWant had no phase check, so a node answered wants after saving its state.
    const patch = (core: ClusterCore): void => {
      const c = core as unknown as { stopper: { phase: string }, transfers: { onWant: (w: Want, now: number) => Grant | None } }
      core.onWant = (w, _from, now) => {
        const phase = c.stopper.phase
        c.stopper.phase = 'running'
        try { return c.transfers.onWant(w, now) } finally { c.stopper.phase = phase }
      }
    }
    const start = vc.start.bind(vc)
    vc.start = (name, rules) => { start(name, rules); const core = vc.cores.get(name); if (core !== undefined) patch(core) }
    for (const core of vc.cores.values()) patch(core)
  }, ALL_STOPS, f => f.includes('created') || f.includes('overshoot'))
  t.true(old.failed.length > 0, 'the scenario catches a stopped node serving wants')
  t.true(old.failures.some(f => f.includes('created') || f.includes('overshoot')), old.failures.join('\n'))
})
