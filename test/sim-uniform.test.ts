/**
 * Even load at scale: at 200 nodes a share is 5 of 1000 tokens and each node
 * sees about 6 requests per second, so its fast demand average is mostly
 * noise. Read raw, that noise made nodes ask for up to three times their
 * rate, keep as much as donors, and give all they held after 150 ms without
 * a request; the cluster admitted 87% of an exact limiter against a static
 * split's 91%. Here: the rates a node asks and keeps by (key-ext.ts), a
 * donor's last token and a `none` that expires with the window
 * (ClusterView.chooseDonors, transfers.ts), and the 200-node run itself.
 */
import test from 'ava'
import { KeyExt, keepRate, needRate, updateRate } from '../src/cluster/key-ext.js'
import { Rng } from '../src/sim/rng.js'
import { runSim } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { RuleConfig } from '../src/config/types.js'

const TICK = 50

/** Drive a key's rates with Poisson demand at `perSec(t)` for `ms`, calling `each` after every tick. */
function drive (x: KeyExt, rng: Rng, from: number, ms: number, perSec: (t: number) => number, each: (t: number) => void): void {
  let next = from + rng.exp(1000 / perSec(from))
  for (let t = from + TICK; t <= from + ms; t += TICK) {
    // A new rate from this tick: the next arrival is drawn at it (not at the old one's gap).
    if (perSec(t) !== perSec(t - TICK)) next = t - TICK + rng.exp(1000 / perSec(t))
    while (next <= t) {
      x.demand++
      x.lastDemandAt = next
      next += rng.exp(1000 / perSec(next))
    }
    updateRate(x, TICK, 500, 2 * TICK)
    each(t)
  }
}

test('at a steady 6 requests per second a node asks and keeps about its rate, not its noise', t => {
  const x = new KeyExt()
  const rng = new Rng(7)
  let over = 0
  let under = 0
  let ticks = 0
  // 5 s to settle, then 20 s measured.
  drive(x, rng, 0, 25_000, () => 6, now => {
    if (now < 5000) return
    ticks++
    if (needRate(x) > 1.5 * x.rate) over++
    if (keepRate(x, now) < x.rate / 2) under++
  })
  t.log(`ticks asking over 1.5x the slow rate: ${over} of ${ticks}; keeping under half of it: ${under}`)
  // Raw (max of the two averages), about a third of the ticks asked over 1.5x, and 42% kept the fast average.
  t.true(over < ticks * 0.05, `asks for its noise: ${over} of ${ticks}`)
  t.true(under < ticks * 0.05, `gives what it will need: ${under} of ${ticks}`)
})

test('a hot spot is still asked for at once, and given up at once when it moves on', t => {
  const x = new KeyExt()
  const rng = new Rng(3)
  // 1.2/s, then 960/s from 5 s to 7 s, then 1.2/s again.
  const rate = (ms: number): number => ms >= 5000 && ms < 7000 ? 960 : 1.2
  const need: number[] = []
  const keep: number[] = []
  drive(x, rng, 0, 10_000, rate, now => { need[now] = needRate(x); keep[now] = keepRate(x, now) })
  t.log(`need 100 ms into the surge ${need[5100].toFixed(0)}/s; keep 250 ms after it ${keep[7250].toFixed(1)}/s, 1.5 s after ${keep[8500].toFixed(1)}/s`)
  // Raw, the fast average reads about 480/s here; less twice its noise, about a third less.
  t.true(need[5100] > 240, `the surge is asked for within two ticks: ${need[5100]}`)
  // Under half its slow average by more than the noise: one tick after the raw test (fast under half) said so.
  t.true(keep[7250] < 300, `the old hot spot gives within five ticks: keeps ${keep[7250]}/s`)
  // Its slow average is still ~120/s here: the quiet test, not the noise test, catches the tail.
  t.true(keep[8500] < 10, `and in its slow average's tail: keeps ${keep[8500]}/s`)
})

const RULE: RuleConfig = { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1s', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 }

test('uniform load at 200 nodes admits 90% of an exact limiter, about what a static split does', t => {
  const r = runSim({ scenario: scenario('uniform'), nodes: 200, seed: 1, mode: 'hard', rule: RULE, durationMs: 4000, gossipIntervalMs: 250 })
  t.log(`utilization ${r.cluster.utilization.toFixed(4)}, static split ${r.static.utilization.toFixed(4)}`)
  t.deepEqual(r.failures, [], r.replay)
  // Before: 87.1% against 90.6% (6 s); now 90.5% against 90.6%. At par with the split, not above it yet.
  t.true(r.cluster.utilization >= 0.9, r.replay)
  t.true(r.cluster.utilization >= r.static.utilization - 0.01, r.replay)
})
