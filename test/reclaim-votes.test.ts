/**
 * The votes file (`quotad-votes.json`): written atomically, read back to the
 * same acceptor, refused with a stable code naming the field when it is
 * malformed or someone else's, and missing-while-the-state-file-exists is a
 * refusal to vote (design §10), not an empty start.
 */
import test from 'ava'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { STATE_FILE } from '../src/cluster/durable-state.js'
import { CLUSTER_VERSION } from '../src/cluster/messages.js'
import { emptyVotes, ReclaimLog, type ReclaimValue, type VotesState } from '../src/cluster/reclaim-log.js'
import { checkMayVote, openVotes, parseVotes, readVotes, VOTES_FILE, writeVotes } from '../src/cluster/reclaim-votes.js'
import { Rng } from '../src/sim/rng.js'
import { weightedQuorum } from './helpers/paxos-net.js'

const ABC = ['a', 'b', 'c']
const value: ReclaimValue = { slot: 2, D: [{ node: 'd', acct: 2, inc: 4, epoch: 'ed' }], heir: { node: 'c', epoch: 'e1', acct: 1 }, listed: [{ node: 'b', acct: 7 }] }

function dir (): string {
  return mkdtempSync(join(tmpdir(), 'quotad-votes-'))
}

/** A voter's votes after a promise, an acceptance, a chosen slot and an echo: every field filled. */
function busyVotes (): VotesState {
  const log = new ReclaimLog({ node: 'b', epoch: 'e', voters: ABC, quorum: weightedQuorum(ABC), votes: emptyVotes('b', 'test') })
  const rng = new Rng(1)
  log.learnGossip('a', { accepted: [], chosen: [{ slot: 1, value: { ...value, slot: 1 } }] }, 0)
  log.noteEchoed('m', 3)
  log.handle('c', { v: CLUSTER_VERSION, node: 'c', epoch: 'e', t: 'accept', slot: 2, ballot: { round: 2, node: 'c' }, value }, 0, rng)
  const last = log.handle('a', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 3, ballot: { round: 1, node: 'a' } }, 0, rng)
  return last.persist!
}

test('written atomically (no temp file left) and read back equal; a log rebuilt from it keeps its word', async t => {
  const d = dir()
  const v = busyVotes()
  t.is(v.through, 1)
  t.is(v.slots.length, 2)
  t.deepEqual(v.echoed, [['m', 3]])
  await writeVotes(d, v)
  t.deepEqual(readdirSync(d), [VOTES_FILE])
  const back = await readVotes(d)
  t.deepEqual(back, v)
  const log = new ReclaimLog({ node: 'b', epoch: 'e2', voters: ABC, quorum: weightedQuorum(ABC), votes: back })
  const r = log.handle('a', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 2, ballot: { round: 3, node: 'a' } }, 0, new Rng(1))
  t.like(r.reply, { t: 'promise', accepted: { ballot: { round: 2, node: 'c' } }, known: [['m', 3]] })
  t.like(log.handle('a', { v: CLUSTER_VERSION, node: 'a', epoch: 'e', t: 'prepare', slot: 1, ballot: { round: 9, node: 'a' } }, 0, new Rng(1)).reply, { t: 'nack', through: 1 })
})

test('no file: readVotes says so; openVotes on a first start creates it before the state file exists', async t => {
  const d = dir()
  t.is(await readVotes(d), undefined)
  const v = await openVotes(d, 'b', 'test')
  t.deepEqual(v, emptyVotes('b', 'test'))
  t.deepEqual(JSON.parse(readFileSync(join(d, VOTES_FILE), 'utf8')), v)
  t.deepEqual(await openVotes(d, 'b', 'test'), v, 'the next start reads it')
})

test('missing while the state file exists: E_VOTES_MISSING, and nothing is created', async t => {
  const d = dir()
  writeFileSync(join(d, STATE_FILE), '{}')
  await t.throwsAsync(openVotes(d, 'b', 'test'), { code: 'E_VOTES_MISSING' })
  t.deepEqual(readdirSync(d), [STATE_FILE])
  t.throws(() => checkMayVote(undefined, true, VOTES_FILE), { code: 'E_VOTES_MISSING' })
  t.notThrows(() => checkMayVote(undefined, false, VOTES_FILE))
  t.notThrows(() => checkMayVote(emptyVotes('b', 'test'), true, VOTES_FILE))
})

test('another node\'s or cluster\'s file is refused with E_VOTES_INVALID naming the field', async t => {
  const d = dir()
  await writeVotes(d, emptyVotes('x', 'test'))
  t.like(await t.throwsAsync(openVotes(d, 'b', 'test')), { code: 'E_VOTES_INVALID', details: { path: 'node' } })
  await writeVotes(d, emptyVotes('b', 'other'))
  t.like(await t.throwsAsync(openVotes(d, 'b', 'test')), { code: 'E_VOTES_INVALID', details: { path: 'cluster' } })
})

type Edit = (v: Record<string, unknown>) => void
const slots = (v: Record<string, unknown>) => v.slots as Array<Record<string, unknown>>
const bad: Array<[string, Edit | string, string]> = [
  ['not JSON', '{"version":', '$'],
  ['an unknown version', v => { v.version = 2 }, 'version'],
  ['a string gen', v => { v.gen = '3' }, 'gen'],
  ['a negative through', v => { v.through = -1 }, 'through'],
  ['a slot at or below through', v => { slots(v)[0].slot = 1 }, 'slots[0].slot'],
  ['a slot listed twice', v => { slots(v)[1].slot = slots(v)[0].slot }, 'slots'],
  ['an acceptance above the promise', v => { slots(v)[0].promised = { round: 1, node: 'a' } }, 'slots[0].accepted.ballot'],
  ['a promise with round 0 and a name', v => { slots(v)[1].promised = { round: 0, node: 'a' } }, 'slots[1].promised.node'],
  ['an accepted value for another slot', v => { (slots(v)[0].accepted as Record<string, unknown>).value = { ...value, slot: 5 } }, 'slots[0].accepted.value.slot'],
  ['a D entry without epoch', v => { ((slots(v)[0].accepted as { value: { D: Array<Record<string, unknown>> } }).value.D[0]).epoch = undefined }, 'slots[0].accepted.value.D[0].epoch'],
  ['a chosen entry above through', v => { (v.chosen as Array<Record<string, unknown>>)[0].slot = 2 }, 'chosen[0].slot'],
  ['an echoed entry that is not a pair', v => { v.echoed = [['m']] }, 'echoed[0]'],
  ['echoed not an array', v => { v.echoed = {} }, 'echoed']
]

for (const [what, edit, path] of bad) {
  test(`a votes file with ${what} is refused with E_VOTES_INVALID at ${path}`, async t => {
    const d = dir()
    let text: string
    if (typeof edit === 'string') text = edit
    else {
      const v = JSON.parse(JSON.stringify(busyVotes())) as Record<string, unknown>
      edit(v)
      text = JSON.stringify(v)
    }
    writeFileSync(join(d, VOTES_FILE), text)
    const err = await t.throwsAsync(readVotes(d))
    t.like(err, { code: 'E_VOTES_INVALID', details: { path } })
    t.is(readFileSync(join(d, VOTES_FILE), 'utf8'), text, 'the file is left as it was')
    t.throws(() => parseVotes(text, 'f'), { code: 'E_VOTES_INVALID' })
  })
}

test('a file that cannot be read is E_VOTES_UNREADABLE; a place that cannot be written is E_VOTES_UNWRITABLE', async t => {
  const d = dir()
  mkdirSync(join(d, VOTES_FILE)) // a directory where the file should be
  await t.throwsAsync(readVotes(d), { code: 'E_VOTES_UNREADABLE' })
  const notDir = join(dir(), 'file')
  writeFileSync(notDir, 'x') // the data directory is a file
  await t.throwsAsync(writeVotes(notDir, emptyVotes('b', 'test')), { code: 'E_VOTES_UNWRITABLE' })
})
