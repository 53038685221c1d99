/**
 * The heir of a seed that dies for good (heir.ts), in the simulator: three
 * seeds and seven members, one seed killed early; with `inheritSeeds` the
 * next live seed in name order reads its journal copies and credits its
 * books. Every check holds (oracle, token and position audits, replica
 * witness), and what stays lost is far less than without the heir.
 */
import test, { type ExecutionContext } from 'ava'
import { ClusterCore } from '../src/cluster/cluster-core.js'
import { Heir } from '../src/cluster/heir.js'
import type { Jrep } from '../src/cluster/replica-messages.js'
import { ReplicaStore, type ReplicaChange } from '../src/cluster/replica-store.js'
import { ext } from '../src/cluster/key-ext.js'
import { propertySpec } from '../src/sim/property.js'
import { runSim, type SimResult, type SimSpec } from '../src/sim/run.js'
import { scenario } from '../src/sim/scenario.js'
import type { VirtualCluster } from '../src/sim/virtual-cluster.js'

function spec (name: string, seed: number, extra: Partial<SimSpec> = {}): SimSpec {
  const sc = scenario(name)
  return {
    scenario: sc,
    nodes: 10,
    seedNodes: 3,
    seed,
    mode: 'hard',
    rule: { name: 'api', match: 'api', limit: 1000, perMs: 1000, per: '1000ms', algorithm: 'fixed-window', burst: 1000, mode: 'hard', onPartition: 'local-share', maxDebt: 100 },
    durationMs: 10_000,
    gossipIntervalMs: 250,
    ...extra
  }
}

/** The run, and its virtual cluster at the end. */
function run (s: SimSpec): { r: ReturnType<typeof runSim>, vc: VirtualCluster } {
  let vc: VirtualCluster | undefined
  const r = runSim({ ...s, sabotage: v => { vc = v; s.sabotage?.(v, 0) } })
  return { r, vc: vc as VirtualCluster }
}

test('seed-crash-forever: the next live seed inherits the dead one, every node homes its keys there, and less is lost than without a heir', t => {
  const { r, vc } = run(spec('seed-crash-forever', 1))
  t.true(r.ok, `${r.failures.join('; ')}\n  replay: ${r.replay}`)
  t.is(r.overshoot, 0)
  const dead = vc.seeds.find(s => vc.nodes.get(s)?.state === 'crashed') as string
  t.truthy(dead, 'a seed was killed')
  const ring = [...vc.seeds].sort()
  const heir = ring[(ring.indexOf(dead) + 1) % ring.length]
  const h = vc.cores.get(heir)
  t.deepEqual(h?.heir.log.map(e => e.node), [dead], `${heir} inherited ${dead}`)
  t.true((h?.heir.counters.tokensInherited ?? 0) > 0)
  for (const [name, core] of vc.cores) t.is(core.heir.homes.get(dead), heir, `${name} homes ${dead}'s keys at ${heir}`)
  // Without a heir (not the default) the dead seed's share is lost by design, so the comparison runs without the idle
  // tail's checks: no capacity to find again, and the survivors' shortfall estimate of a dead seed that is never
  // settled is not what the tail checks (8 against 45 missing here; shortfall.ts lists what the estimate misses).
  const lossByDesign = { ...scenario('seed-crash-forever'), shortfallCheckMs: undefined }
  const without = runSim(spec('seed-crash-forever', 1, { tuning: { inheritSeeds: false }, scenario: lossByDesign }))
  t.true(without.ok, without.failures.join('; '))
  t.true(r.stranded < without.stranded / 2, `lost with a heir ${r.stranded}, without ${without.stranded}`)
})

test('seed-crash-forever-glob: the dead seed\'s glob keys are served again, from its heir', t => {
  const { r, vc } = run(spec('seed-crash-forever-glob', 2))
  t.true(r.ok, `${r.failures.join('; ')}\n  replay: ${r.replay}`)
  t.is(r.overshoot, 0)
  const heirs = [...vc.cores.values()].filter(c => c.heir.log.length > 0)
  t.is(heirs.length, 1)
  t.true(r.cluster.utilization > r.static.utilization, `${r.cluster.utilization} against the static split's ${r.static.utilization}`)
})

test('seed-crash-return: a seed restarted after its inheritance drops what it recovered and stops allocating', t => {
  const { r, vc } = run(spec('seed-crash-return', 3))
  t.true(r.ok, `${r.failures.join('; ')}\n  replay: ${r.replay}`)
  t.is(r.overshoot, 0)
  const heir = [...vc.cores.values()].find(c => c.heir.log.length > 0)
  const dead = heir?.heir.log[0].node as string
  const back = vc.cores.get(dead)
  t.truthy(back, `${dead} is running again`)
  t.true(back?.reclaim.droppedCarried)
  t.false(back?.limiter.allocate)
  t.false(back?.replication.enabled)
})

test.serial('the token audit catches a heir that credits more than the dead seed had', t => {
  const inherit = (Heir.prototype as unknown as { inherit: (...a: unknown[]) => void }).inherit
  ;(Heir.prototype as unknown as { inherit: (...a: unknown[]) => void }).inherit = function (this: Heir, ...a: unknown[]) {
    inherit.apply(this, a)
    // 50 tokens from nowhere, in the same deferred form as the estate's.
    const ks = (this as unknown as { c: { limiter: { existing: (k: string) => Parameters<typeof ext>[0] | undefined } } }).c.limiter.existing('api')
    if (ks !== undefined) (ext(ks).deferred ??= []).push([50, 0])
    const last = this.log[this.log.length - 1]
    last.credits.set('api', (last.credits.get('api') ?? 0))
  }
  try {
    const r = runSim(spec('seed-crash-forever', 1))
    t.false(r.ok)
    t.true(r.failures.some(f => /created/.test(f)), r.failures.join('; '))
  } finally {
    ;(Heir.prototype as unknown as { inherit: (...a: unknown[]) => void }).inherit = inherit
  }
})

/**
 * Uneven copies and a restart racing the settlement. heir-crash with four
 * seeds (the property's seed 312, hard mode): n2 dies for good (+1.2 s), its
 * heir n3 is killed while it reads n2's copies (+3.26 s) and restarts 2 s
 * later (+5.26 s), as n3/1 is attested dead; n4 inherits n3/1. Here n3's
 * jreps to n4 are lost from +1 s (a one-way loss; n3 and n1, the first
 * seed, are a write quorum by themselves), so n4's copy of n3/1 lags (2281
 * chars against n1's 5731). n3/2's first jreps reach n1 at +5.302 s, 11 ms
 * before n1 settles n3/1, and replace n1's copy of n3/1; n4 settles n3/1 at
 * +5.335 s and reads it. Counting n1's answer in its read set though n1
 * held no copy of n3/1 any more, a heir took its own lagging copy as the
 * newest and credited tokens n3 had given since (49 tokens instead of 34,
 * 17 over the limit here with 2b64b66 reverted and no copy kept aside).
 * Now n1 keeps its copy of n3/1 aside (replica-store.ts `superseded`) and
 * serves it to a heir of n3/1 (n4 inherits at +5.41 s, reading it); without
 * that copy, the heir must wait rather than count n1.
 *
 * The race depends on the run's trajectory: seed 52 had it until the
 * noise-aware rates (key-ext.ts needRate/keepRate) moved it; there n4 now
 * inherits n3/1 at +5.82 s from n1's own copy of n3/1, and no replica's
 * copy of n3 is ever replaced. So both tests assert it first, and fail on
 * that precondition should a change remove it: then look for another seed
 * (heir-crash, hard, same loss) where a replica's copy of n3/1 is replaced
 * by n3/2's before n4 reads it. Seeds 1-400 had it at 8, 77, 134, 157, 167,
 * 168, 207, 228, 257, 259, 278, 287, 302, 303, 312, 342, 354, 373; only at
 * 312 does the run overshoot with 2b64b66 reverted.
 */
const UNEVEN_SEED = 312

interface Superseded { at: number, replica: string, writer: string, inc: number, by: number }
interface ReadAnswer { replica: string, inc: number, have: number, keptAside: boolean }
interface Inherited { at: number, heir: string, writer: string, inc: number, answers: ReadAnswer[] }

function unevenHeirCrash (t: ExecutionContext, keepAside: boolean): { r: SimResult, vc: VirtualCluster, superseded: Superseded[], inherited: Inherited[] } {
  const proto = ClusterCore.prototype as unknown as { onJournalWrite: (m: Jrep, from: string) => { change: ReplicaChange | null } | null }
  const store = ReplicaStore.prototype as unknown as { upTo: (w: string, inc: number) => unknown, get: (w: string) => unknown }
  type Read = { writer: string, inc: number, answers: Map<string, { inc: number, have: number }> }
  const heir = Heir.prototype as unknown as { inherit: (r: Read, ...a: unknown[]) => void }
  const onJournalWrite = proto.onJournalWrite
  const upTo = store.upTo
  const inherit = heir.inherit
  let vc: VirtualCluster | undefined
  let startMs = 0
  const superseded: Superseded[] = []
  const inherited: Inherited[] = []
  proto.onJournalWrite = function (this: ClusterCore, m: Jrep, from: string) {
    if (vc !== undefined && this.node === 'n4' && m.node === 'n3' && vc.now - startMs >= 1000) return null
    const out = onJournalWrite.call(this, m, from)
    const old = out?.change?.superseded
    if (vc !== undefined && old !== undefined) superseded.push({ at: vc.now - startMs, replica: this.node, writer: m.node, inc: old.inc, by: m.inc })
    return out
  }
  // The read set as the heir credits it: an answer of an incarnation up to the attested one from a replica whose
  // copy is of a later one now was read from the copy it kept aside.
  heir.inherit = function (this: Heir, r: Read, ...a: unknown[]) {
    const v = vc as VirtualCluster
    const answers = [...r.answers].map(([replica, x]) => {
      const now = v.cores.get(replica)?.replicas?.get(r.writer)
      return { replica, inc: x.inc, have: x.have, keptAside: x.inc <= r.inc && now !== undefined && now.inc > r.inc }
    })
    inherited.push({ at: v.now - startMs, heir: (this as unknown as { c: ClusterCore }).c.node, writer: r.writer, inc: r.inc, answers })
    inherit.call(this, r, ...a)
  }
  if (!keepAside) store.upTo = function (this: ReplicaStore, w: string) { return this.get(w) }
  try {
    const s = propertySpec({ scenario: 'heir-crash', mode: 'hard', seed: UNEVEN_SEED })
    const r = runSim({ ...s, sabotage: (v, at) => { vc = v; startMs = at } })
    t.is(r.overshoot, 0, r.failures.join('; '))
    t.true(r.ok, `${r.failures.join('; ')}\n  replay: ${r.replay}`)
    // The race both tests are about: n3/2's jreps replaced a replica's copy of n3/1 before n4 inherited n3/1 (in the
    // test that waits, n4 never does; see there).
    const n4Inherits = inherited.find(i => i.heir === 'n4' && i.writer === 'n3')?.at ?? Infinity
    const race = superseded.filter(x => x.writer === 'n3' && x.inc === 1 && x.by > 1 && x.replica !== 'n4' && x.at < n4Inherits)
    t.true(race.length > 0, `precondition (the race under test): a replica's copy of n3/1 is replaced by a later incarnation's before n4 inherits n3/1; superseded ${JSON.stringify(superseded)}, inherited ${JSON.stringify(inherited)}. The trajectory changed: find a seed where it happens (see the comment above unevenHeirCrash)`)
    return { r, vc: vc as VirtualCluster, superseded, inherited }
  } finally {
    proto.onJournalWrite = onJournalWrite
    store.upTo = upTo
    heir.inherit = inherit
  }
}

test.serial('a heir reads the copy a replica kept aside when the dead seed\'s restart replaced it (jreps to the heir lost): no overshoot, and it inherits', t => {
  const { vc, inherited } = unevenHeirCrash(t, true)
  const n4 = vc.cores.get('n4')
  const read = inherited.find(i => i.heir === 'n4' && i.writer === 'n3')
  t.true(read?.answers.some(a => a.replica !== 'n4' && a.keptAside) ?? false, `n4 inherits n3/1 from a read set holding a copy a replica kept aside (its current copy is of n3/2); read set: ${JSON.stringify(read)}`)
  t.deepEqual(n4?.heir.log.map(e => e.node), ['n3', 'n2'], 'n4 inherits n3/1, then n2 (nearest first)')
  t.true((n4?.heir.log[0].tokens ?? 0) > 0)
})

test.serial('without the copy kept aside, a replica whose copy is of a later incarnation is not in the heir\'s read set: it waits', t => {
  const { vc } = unevenHeirCrash(t, false)
  const n4 = vc.cores.get('n4')
  const reading = n4?.heir.status().reading as { writer: string, inc: number, answers: Array<{ replica: string, inc: number }> } | null | undefined
  t.deepEqual(n4?.heir.log.map(e => e.node), [], 'n3/1 is inherited only from a read set of its copies')
  // The reason it waits: a replica answered with its copy of n3/2, not counted.
  t.true(reading?.writer === 'n3' && reading.inc === 1 && reading.answers.some(a => a.replica !== 'n4' && a.inc > 1), `n4 waits reading n3/1, a replica having answered with its copy of n3/2: ${JSON.stringify(reading)}`)
})

test('a voter that restarted after a seed died still attests it: the dead seed is settled and inherited (heal-settle seeds 6 and 10)', t => {
  // Seed 6: n3 dies for good at +3.6 s; n2 restarts from its journal at +5.5 s, so it never hears n3. Before, only n1
  // attested n3 (n2's restart had no peer entry to attest): with n3's own vote gone no quorum ever formed, and n3's
  // share (61 of 110) was lost for good. n2 now attests the incarnation n1 attests.
  // Seed 10: two seeds; n2 dies for good, n1 restarts after it: no other voter names n2's incarnation, so n1 attests
  // the one its copy of n2's journal names (before: 32 of 65 lost).
  for (const [seed, dead] of [[6, 'n3'], [10, 'n2']] as const) {
    const spec = propertySpec({ scenario: 'heal-settle', mode: 'hard', seed })
    const { r, vc } = run({ ...spec, scenario: { ...spec.scenario, shortfallCheckMs: 2000 } })
    t.is(r.overshoot, 0)
    t.is([...vc.nodes].find(([, n]) => n.state === 'crashed')?.[0], dead)
    for (const [name, core] of vc.cores) {
      t.true(core.reclaim.isSettled(dead, 1), `seed ${seed}: ${name} settled ${dead}`)
      t.true(core.reclaim.attestedByMe(dead, 1), `seed ${seed}: ${name} attests ${dead}/1`)
    }
    t.true([...vc.cores.values()].some(c => c.heir.log.some(e => e.node === dead)), `seed ${seed}: ${dead} was inherited`)
  }
})

// Chaos, 5 seeds, seed 2: a heir skipped the seeds of the dead seed's group that had been inherited before, though
// they were back (without a share) and held their copies; the rest of the group was no write quorum, so the read
// waited forever, the estate (with what the dead seed had inherited) was lost, and a member's grants to the heir
// waited for it unacked. Before the fix 8 of seeds 1-15 lost capacity.
test('a heir reads its dead seed\'s copies from seeds of the group that were inherited and came back', t => {
  const failures: string[] = []
  for (let seed = 1; seed <= 15; seed++) {
    const r = runSim(propertySpec({ scenario: 'heir-reads-returned', mode: 'hard', seed }))
    if (!r.ok) failures.push(`${seed}: ${r.failures[0]}`)
  }
  t.deepEqual(failures, [])
})
