/** Voters and quorums (cluster/quorum.ts): the first `voters` seeds, weights 1, the first of an even count 1.5. */
import test from 'ava'
import { Quorum } from '../src/cluster/quorum.js'
import { clusterHash } from '../src/cluster/cluster-hash.js'
import { leaseSettings } from '../src/config/lease-options.js'
import { voterSet } from '../src/core/share.js'

/** Every subset of `names`. */
function subsets (names: readonly string[]): string[][] {
  return Array.from({ length: 2 ** names.length }, (_, m) => names.filter((_, i) => (m >> i & 1) === 1))
}

test('one voter is its own quorum; non-voters weigh nothing', t => {
  const q = new Quorum(['a'])
  t.true(q.isQuorum(['a']))
  t.false(q.isQuorum([]))
  t.false(q.isQuorum(['m1', 'm2']))
  t.false(q.isVoter('m1'))
})

test('two voters: the first in name order alone is a quorum, the second is not', t => {
  const q = new Quorum(['b', 'a'])
  t.deepEqual(q.voters, ['a', 'b'])
  t.is(q.weight('a'), 1.5)
  t.true(q.isQuorum(['a']))
  t.false(q.isQuorum(['b']))
  t.false(q.isQuorum(['b', 'b']), 'duplicates count once')
})

test('odd counts are strict majorities; four voters need two including the first', t => {
  const three = new Quorum(['a', 'b', 'c'])
  t.false(three.isQuorum(['a']))
  t.true(three.isQuorum(['b', 'c']))
  const four = new Quorum(['a', 'b', 'c', 'd'])
  t.true(four.isQuorum(['a', 'd']))
  t.false(four.isQuorum(['b', 'c']))
  t.true(four.isQuorum(['b', 'c', 'd']))
})

test('any two quorums intersect in a voter other than one the second excludes, for 1 to 7 voters', t => {
  for (let n = 1; n <= 7; n++) {
    const names = Array.from({ length: n }, (_, i) => `s${i}`)
    const q = new Quorum(names)
    const quorums = subsets(names).filter(s => q.isQuorum(s))
    for (const a of quorums) {
      for (const b of quorums) {
        for (const v of names) {
          if (b.includes(v)) continue
          t.true(a.some(x => b.includes(x) && x !== v), `n=${n}: ${a.join()} and ${b.join()} share nothing but ${v}`)
        }
      }
    }
  }
})

test('voterSet: the first `voters` seeds in name order, at least one; all of them when there are fewer', t => {
  t.deepEqual(voterSet(['s9', 's1', 's5', 's3', 's1'], 3), ['s1', 's3', 's5'])
  t.deepEqual(voterSet(['b', 'a'], 15), ['a', 'b'])
  t.deepEqual(voterSet(['b', 'a'], 0), ['a'])
})

test('the cluster hash names the voter count only when it leaves seeds out', t => {
  const file = (seeds: number, voters: number): Parameters<typeof clusterHash>[0] => ({
    cluster: { ...leaseSettings(250), voters, name: 'c', secretFile: '', gossipIntervalMs: 250, firstUseWaitMs: 100, transportNice: 0, inheritSeeds: true },
    nodes: Array.from({ length: seeds }, (_, i) => ({ name: `s${i}`, seed: true })) as unknown as Parameters<typeof clusterHash>[0]['nodes']
  })
  // Every seed votes either way: the hash a file had before `voters` existed.
  t.is(clusterHash(file(5, 15)), clusterHash(file(5, 5)))
  // Two nodes counting different voters have quorums that need not intersect: they must not share tokens.
  t.not(clusterHash(file(5, 3)), clusterHash(file(5, 5)))
  t.not(clusterHash(file(5, 3)), clusterHash(file(5, 4)))
})
