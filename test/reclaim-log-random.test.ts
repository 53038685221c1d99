/**
 * The reclaim log under a hostile network, seeded (test/helpers/paxos-net.ts):
 * loss, duplication, reordering and voter crashes (restarting from their
 * votes file), 3 and 5 voters, 2–3 racing proposers, three slots each run.
 * In every schedule: never two values chosen for one slot (judged on the
 * acceptors' records, not on the learners), every node applies the same
 * entries in slot order, and once the network is quiet every slot gets
 * chosen and learned everywhere. The sabotage (voters that forget their
 * votes on a restart) must make the same checker find a disagreement: it is
 * not blind.
 */
import test from 'ava'
import { runWorld, type WorldOptions } from './helpers/paxos-net.js'

const HOSTILE = { loss: 0.2, dup: 0.2, maxDelayMs: 60, crash: 0.01, faultsUntilMs: 1500, endMs: 3500, slots: 3 }
/** Schedules per ava test (several tests per voter count keep each one short on a loaded machine). */
const RUNS = 400

interface Sweep { bad: string[], messages: number, contested: number, runs: number }

function sweep (base: Omit<WorldOptions, 'seed' | 'proposers'>, runs: number, seed0: number, stopAtFirstBad = false): Sweep {
  const out: Sweep = { bad: [], messages: 0, contested: 0, runs: 0 }
  for (let i = 0; i < runs; i++) {
    const seed = seed0 + i
    const r = runWorld({ ...base, seed, proposers: 2 + (i % 2) })
    out.runs++
    out.messages += r.messages
    out.contested += r.contested
    for (const d of r.disagreements) out.bad.push(`seed ${seed}: ${d}`)
    if (stopAtFirstBad && out.bad.length > 0) break
    if (base.durable === false) continue
    // liveness once quiet: every slot chosen, known everywhere, applied once each and in order
    if (r.chosen.size !== base.slots) out.bad.push(`seed ${seed}: ${r.chosen.size} slots chosen`)
    for (const [node, taken] of Object.entries(r.taken)) {
      if (r.through[node] !== base.slots || taken.join(',') !== Array.from({ length: base.slots }, (_, j) => j + 1).join(',')) {
        out.bad.push(`seed ${seed}: ${node} knows through ${r.through[node]}, applied [${taken.join(',')}]`)
      }
    }
  }
  return out
}

for (const voters of [3, 5]) {
  for (const part of [0, 1, 2]) {
    test(`${voters} voters, 2–3 proposers, loss/dup/reorder/crashes (seeds ${part * RUNS}+${RUNS}): one value per slot; all chosen and applied in order once quiet`, t => {
      const s = sweep({ voters, ...HOSTILE }, RUNS, voters * 1_000_000 + part * RUNS)
      t.deepEqual(s.bad.slice(0, 10), [])
      t.is(s.runs, RUNS)
      // the schedules were hostile enough to matter: proposers raced (two values accepted in a slot) often
      t.true(s.contested > RUNS / 10, `only ${s.contested} contested slots`)
      t.true(s.messages > RUNS * 50, `only ${s.messages} messages`)
    })
  }
}

test('a single proposer on a quiet network gets its value chosen and learned by every voter', t => {
  for (const voters of [1, 2, 3, 4, 5]) {
    for (let seed = 0; seed < 50; seed++) {
      const r = runWorld({ voters, proposers: 1, slots: 2, seed, loss: 0, dup: 0, maxDelayMs: 5, crash: 0, faultsUntilMs: 0, endMs: 1000 })
      t.deepEqual(r.disagreements, [])
      t.is(r.chosen.size, 2, `${voters} voters, seed ${seed}`)
      for (const [node, through] of Object.entries(r.through)) t.is(through, 2, `${voters} voters, seed ${seed}: ${node}`)
    }
  }
})

test('sabotage: voters that forget their votes on a restart make the checker find two values chosen for a slot', t => {
  const s = sweep({ voters: 3, ...HOSTILE, durable: false }, 1000, 7_000_000, true)
  t.true(s.bad.some(b => /quorums accepted .* and /.test(b)), `no disagreement in ${s.runs} sabotaged runs`)
})
