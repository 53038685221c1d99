/**
 * docs/cluster-protocol.md against the wire (issue 46: the document said version 14
 * and a dictionary without the leading `prev`, so about one gossip in ten
 * did not inflate with it). Gossip captured from running nodes (two seeds
 * and a member that joined, real processes, heard by a libp2p node with
 * the swarm key on all three topics) is decoded with only what the
 * document says: its dictionary block, its version, the `hb` array's
 * layout, and the fields of its message tables. Nothing here imports the
 * codec's dictionary or field lists: that would check the code against
 * itself.
 */
import test from 'ava'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { inflateRawSync } from 'node:zlib'
import { Packr } from 'msgpackr'
import { QuotadClient } from '@quotad/client'
import { gossipTopic, membersTopic, seedsTopic } from '../src/cluster/messages.js'
import type { Transport } from '../src/cluster/transport/types.js'
import { makeCluster, waitForPeers } from './helpers/cluster-procs.js'
import { eventually, stop, waitForSocket, type Proc } from './helpers/proc.js'
import { insiderNode, joinMember } from './helpers/insider-flood.js'

const DOC = readFileSync(fileURLToPath(new URL('../../docs/cluster-protocol.md', import.meta.url)), 'utf8')
const RULES = [
  { name: 'day', match: 'day', limit: 1000, per: '1d', algorithm: 'fixed-window' },
  { name: 'glob', match: 'g:*', limit: 50, per: '1m', algorithm: 'fixed-window' }
]

/** What the document says, read from its text alone. */
interface DocWire {
  dictionary: Buffer
  version: number
  hb: string[]
  /** Every gossip field the document names (the five every message has, and the `gossip` table's), with its tuple arity where its type is an array of tuples. */
  fields: Map<string, number | null>
}

/** The rows of the markdown table after `heading`: first cell's `name` -> second cell. */
function tableAfter (heading: string): Map<string, string> {
  const at = DOC.indexOf(heading)
  if (at < 0) throw new Error(`cluster-protocol.md has no ${heading}`)
  const rows = new Map<string, string>()
  let inTable = false
  for (const line of DOC.slice(at + heading.length).split('\n')) {
    if (line.startsWith('|')) {
      inTable = true
      const cells = line.split('|').map(s => s.trim())
      const name = /^`([A-Za-z]+)`$/.exec(cells[1])
      if (name !== null) rows.set(name[1], cells[2])
    } else if (inTable) break
  }
  return rows
}

function readDoc (): DocWire {
  const block = /```gossip-dictionary\n([\s\S]*?)```/.exec(DOC)
  if (block === null) throw new Error('cluster-protocol.md has no gossip-dictionary block')
  const names = block[1].split(/\s+/).filter(s => s !== '')
  const dictionary = Buffer.concat(names.map(f => Buffer.concat([Buffer.from([0xa0 | f.length]), Buffer.from(f, 'ascii')])))
  const version = /\| `v` \| integer \| Protocol version: `(\d+)`/.exec(DOC)
  const hb = /`\[v, "hb", ([^\]]+)\]`/.exec(DOC)
  if (version === null || hb === null) throw new Error('cluster-protocol.md names no version or no hb layout')
  const fields = new Map<string, number | null>()
  for (const [name, type] of [...tableAfter('Every message has these five fields:'), ...tableAfter('### `gossip` fields')]) {
    const tuple = /array of `\[([^\]]+)\]`/.exec(type)
    fields.set(name, tuple === null ? null : tuple[1].split(',').length)
  }
  return { dictionary, version: Number(version[1]), hb: ['v', 't', ...hb[1].split(',').map(s => s.trim())], fields }
}

test('the document names a dictionary, a version, an hb layout and the gossip fields', t => {
  const d = readDoc()
  t.true(d.dictionary.length > 100)
  t.true(d.dictionary.includes(Buffer.from('\xa4prev', 'latin1')), 'the dictionary has prev')
  t.true(['v', 't', 'node', 'epoch', 'inc', 'seq', 'now', 'keys', 'members'].every(f => d.fields.has(f)))
  t.is(d.fields.get('keys'), 8)
  t.deepEqual(d.hb.slice(0, 3), ['v', 't', 'node'])
})

test.serial('every gossip captured from running nodes decodes with only the document\'s dictionary and fields', async t => {
  t.timeout(300_000)
  const doc = readDoc()
  const c = await makeCluster(['a', 'b'], RULES)
  const extra: Proc[] = []
  const ears: Transport[] = []
  t.teardown(async () => {
    await Promise.all(ears.map(async e => await e.stop()))
    await c.stopAll()
    await Promise.all(extra.map(async p => await stop(p)))
  })
  await c.start('a')
  await c.start('b')
  await waitForPeers(c, ['a', 'b'], 1)
  const pod = joinMember(c, 'pod-doc')
  extra.push(pod.proc)
  await waitForSocket(pod.socket, pod.proc)

  const captured: Uint8Array[] = []
  ears.push(await insiderNode(c, {
    hear: [seedsTopic('test'), gossipTopic('test'), membersTopic('test')],
    onGossip: (_from, data) => { if (captured.length < 5000) captured.push(data) }
  }))
  // Traffic: acquires at every node on a plain key and on glob keys, so gossip carries key lines, acks and sums.
  const clients = await Promise.all([c.sockets.a, c.sockets.b, pod.socket].map(async socketPath => await QuotadClient.connect({ socketPath })))
  t.teardown(async () => { await Promise.all(clients.map(async q => await q.close())) })
  const packr = new Packr({ useRecords: false })
  const kinds = { plain: 0, gz: 0, hb: 0 }
  let i = 0
  await eventually('300 gossips captured, 50 of them deflated', async () => {
    for (const q of clients) await q.acquire(i % 3 === 0 ? 'day' : `g:${i % 17}`, { waitMs: 200 }).catch(() => undefined)
    i++
    return captured.length >= 300 && captured.filter(b => { const m = packr.unpack(b) as { t?: string }; return !Array.isArray(m) && m.t === 'gz' }).length >= 50
  }, 180_000)

  const bad: string[] = []
  const check = (what: string, ok: boolean): void => { if (!ok && bad.length < 10) bad.push(what) }
  for (const bytes of captured) {
    const outer = packr.unpack(bytes) as unknown
    if (Array.isArray(outer)) {
      kinds.hb++
      check(`an hb of ${outer.length} fields (the document: ${doc.hb.length}, prev optional)`, outer[1] === 'hb' && (outer.length === doc.hb.length || outer.length === doc.hb.length - 1))
      check(`an hb of version ${String(outer[0])}`, outer[0] === doc.version)
      continue
    }
    const env = outer as Record<string, unknown>
    let msg = env
    if (env.t === 'gz') {
      kinds.gz++
      check('an envelope with fields the document does not name', Object.keys(env).every(k => ['v', 't', 'z'].includes(k)))
      check(`an envelope of version ${String(env.v)}`, env.v === doc.version)
      let inner: Buffer | null = null
      try { inner = inflateRawSync(env.z as Uint8Array, { dictionary: doc.dictionary }) } catch (err) { check(`z does not inflate with the document's dictionary: ${(err as Error).message}`, false) }
      if (inner === null) continue
      msg = packr.unpack(inner) as Record<string, unknown>
    } else kinds.plain++
    check(`a gossip of t ${String(msg.t)}`, msg.t === 'gossip')
    check(`a gossip of version ${String(msg.v)}`, msg.v === doc.version)
    for (const [k, v] of Object.entries(msg)) {
      check(`field ${k}, which the document does not name`, doc.fields.has(k))
      const arity = doc.fields.get(k)
      if (arity === null || arity === undefined) continue
      check(`${k}: entries of the document's ${arity} fields`, Array.isArray(v) && v.every(e => Array.isArray(e) && e.length === arity))
    }
  }
  t.deepEqual(bad, [], `${captured.length} gossips (${JSON.stringify(kinds)})`)
  t.true(kinds.gz >= 50 && kinds.gz + kinds.plain + kinds.hb === captured.length)
})
