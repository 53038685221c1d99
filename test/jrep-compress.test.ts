/**
 * Compressed jreps (replica-messages.ts): a writer sends a replica its
 * journal text deflated once the replica's jack says it reads that, the
 * parser gives back the very text, and a `z` that is not a bounded deflate
 * of text is a bad message. A jrep that continues a generation is deflated
 * against the text before it, which only a replica holding that text reads
 * back; one that lacks it takes nothing.
 */
import test from 'ava'
import { deflateRawSync } from 'node:zlib'
import { CLUSTER_VERSION, parseMessage } from '../src/cluster/messages.js'
import { Quorum } from '../src/cluster/quorum.js'
import { DICT_CHARS, encodeJrep, MAX_CHUNK, type Jack, type Jrep } from '../src/cluster/replica-messages.js'
import { ReplicaStore } from '../src/cluster/replica-store.js'
import { JournalReplication } from '../src/cluster/replication.js'
import { BooksJournal, type JournalCheckpoint } from '../src/cluster/journal.js'
import { wire } from '../src/cluster/wire.js'
import { ErrorCodes } from '../src/errors.js'

const jrep = (data: string): Jrep => ({ v: CLUSTER_VERSION, t: 'jrep', node: 'a', epoch: 'a.1', inc: 1, gen: 1, offset: 0, data })
const overWire = (m: unknown): ReturnType<typeof parseMessage> => parseMessage(wire.unpack(wire.pack(m)))

test('the writer compresses for a replica only once its jack says it reads compressed jreps', t => {
  const r = new JournalReplication({ node: 'a', epoch: 'a.1', inc: 1, enabled: true, quorum: new Quorum(['a', 'b', 'c']), version: CLUSTER_VERSION, timeoutMs: 1000, retryMs: 250 })
  const j = new BooksJournal()
  const cp = (): JournalCheckpoint => ({ v: 1, node: 'a', cluster: 'c', inc: 1, gen: r.nextGen, epoch: 'a.1', carries: [], allocate: true, rules: [], keys: [['k:1', 3]] })
  const w = r.take(j, cp)
  if (w === null) throw new Error('nothing to write')
  r.localDone(w.pos)
  const first = r.outbound(0, true)
  t.deepEqual(first.map(o => [o.to, o.z]), [['b', null], ['c', null]], 'nothing said yet: plain text')
  const store = new ReplicaStore()
  for (const { to, msg, z } of first) {
    // Over the wire as the drivers send it (node-effects.ts, for the daemon and the simulator alike): the replica reads the same text.
    const m = overWire(encodeJrep(msg, z))
    if (m.t !== 'jrep') throw new Error('not a jrep')
    t.is(m.data, msg.data)
    if (to === 'b') { const c = store.accept(m); if (c !== null) store.commit(c) }
  }
  const newer = store.ack('a', 'b', 'b.1', CLUSTER_VERSION)
  t.true(newer.z, 'a replica says it reads compressed jreps')
  const older: Jack = { ...newer, have: 0 }
  delete older.z
  r.onAck('b', newer, 10)
  r.onAck('c', overWire(older) as Jack, 10)
  for (let i = 0; i < 20; i++) j.record('k:1', -1, true, ['m', 'm.1'])
  const w2 = r.take(j, cp)
  if (w2 === null) throw new Error('nothing to write')
  r.localDone(w2.pos)
  const next = new Map(r.outbound(2000, true).map(o => [o.to, o]))
  const b = next.get('b')
  if (b === undefined) throw new Error('nothing for b')
  t.true(b.msg.offset > 0)
  t.is(b.z, store.get('a')?.text.slice(-DICT_CHARS) ?? null, 'b said z: compressed from now on, against the text it holds')
  t.is(next.get('c')?.z, null, 'c never said it (an older node): plain text still')
  const wireBytes = wire.pack(encodeJrep(b.msg, b.z)).length
  const alone = wire.pack(encodeJrep(b.msg, '')).length
  t.true(wireBytes < alone && alone < wire.pack(b.msg).length, `against the text before: ${wireBytes} B; deflated alone ${alone}; plain ${wire.pack(b.msg).length}`)
  const m = overWire(encodeJrep(b.msg, b.z))
  if (m.t !== 'jrep') throw new Error('not a jrep')
  t.is(m.data, '', 'only a replica holding the text before can read it')
  t.is(m.packed?.d, b.z?.length)
  // A replica without the first part takes nothing; b, which has it, reads the very text.
  t.is(new ReplicaStore().accept(m), null)
  const c = store.accept(m)
  t.is(c?.kind, 'append')
  t.is(c?.text, b.msg.data)
  // Garbage in place of the deflate: nothing taken, nothing thrown.
  t.is(store.accept({ ...m, packed: { z: new Uint8Array([1, 2, 3]), d: m.packed?.d ?? 1 } }), null)
})

test('a z that is not a bounded deflate of text is a bad message; so is a jrep with both data and z', t => {
  const bad = (m: unknown): void => {
    const err = t.throws(() => overWire(m))
    t.is((err as { code?: string }).code, ErrorCodes.BAD_FRAME)
  }
  const { data: _, ...head } = jrep('x')
  // A bomb: a small z that inflates past MAX_CHUNK x 3 bytes.
  const bomb = deflateRawSync(Buffer.alloc(MAX_CHUNK * 3 + 1, 0x61))
  t.true(bomb.length < 1024)
  bad({ ...head, z: bomb })
  bad({ ...head, z: Buffer.from('not deflate at all') })
  bad({ ...head, z: 'a string' })
  bad({ ...jrep('x'), z: deflateRawSync(Buffer.from('x')) })
  bad({ ...head, z: deflateRawSync(Buffer.alloc(0)) })
  // Within the bound it is the text, multi-byte characters included.
  const text = '[["k:é",-1]]\n'.repeat(50)
  const m = overWire(encodeJrep(jrep(text), ''))
  t.is(m.t === 'jrep' ? m.data : undefined, text)
  // Against preceding text: d from 1 to DICT_CHARS, at most the offset, with z and no data.
  const cont = { ...head, offset: 20 }
  bad({ ...cont, z: deflateRawSync(Buffer.from('x')), d: 0 })
  bad({ ...cont, z: deflateRawSync(Buffer.from('x')), d: 21 })
  bad({ ...cont, offset: 20_000, z: deflateRawSync(Buffer.from('x')), d: DICT_CHARS + 1 })
  bad({ ...cont, z: 'a string', d: 5 })
  bad({ ...cont, data: 'x', z: deflateRawSync(Buffer.from('x')), d: 5 })
})
