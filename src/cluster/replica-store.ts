/**
 * Journal replication, the replica's side (replication.ts has the writer's).
 * A seed keeps, for every other seed that holds a share, a copy of that
 * seed's current journal generation: the text its heir will read should the
 * writer die for good (cluster-protocol.md, "The heir of a dead seed").
 *
 * Invariant: what a jack calls durable is on this node's disk. `accept`
 * decides what a jrep changes without changing the durable copy; the driver
 * writes the change and only then `commit`s it and answers. A new
 * generation replaces the copy only once its checkpoint line is whole (it
 * may come in several jreps): until then the disk keeps the previous one,
 * and the jack says `durable: false`.
 *
 * Only jreps from seeds are taken (the driver checks that the sender's peer
 * id is bound to the writer's name), and a copy is bounded in size.
 *
 * A newer incarnation's copy does not erase the one it replaces: that one is
 * kept aside (`superseded`, one per writer, the latest) until a still newer
 * incarnation comes. A writer killed and restarted from its journal can
 * reach a replica before the replica settles the dead incarnation, which a
 * quorum may attest all the same; its heir then needs this copy (heir.ts
 * reads only copies of the attested incarnation or an earlier one).
 */
import { CHECKPOINT_EVERY } from './journal.js'
import { unpackJrep, type Jack, type Jrep } from './replica-messages.js'

/** The largest copy kept of one writer's generation, in characters. */
export const MAX_REPLICA_CHARS = 64 * 1024 * 1024

export interface StoredReplica {
  inc: number
  epoch: string
  gen: number
  text: string
}

export interface ReplicaChange {
  writer: string
  /** replace: the file becomes `text` (a new generation); append: `text` is added at its end. */
  kind: 'replace' | 'append'
  text: string
  next: StoredReplica
  /** A replace by a newer incarnation: the copy it replaces, written aside first (the superseded copy). */
  superseded?: StoredReplica
}

export class ReplicaStore {
  private readonly stored = new Map<string, StoredReplica>()
  private readonly pending = new Map<string, StoredReplica>()
  /** Per writer, the copy of the latest incarnation before the stored one's. */
  private readonly superseded = new Map<string, StoredReplica>()

  /** `texts`: the copies on disk, by writer (a copy whose checkpoint line does not parse is ignored); `older`: the superseded ones. */
  constructor (texts: ReadonlyMap<string, string> = new Map(), older: ReadonlyMap<string, string> = new Map()) {
    for (const [writer, text] of texts) {
      const s = parseStored(text)
      if (s !== undefined) this.stored.set(writer, s)
    }
    for (const [writer, text] of older) {
      const s = parseStored(text)
      const cur = this.stored.get(writer)
      if (s !== undefined && cur !== undefined && s.inc < cur.inc) this.superseded.set(writer, s)
    }
  }

  /** What this jrep changes on disk, or null if nothing (old, a gap, a duplicate, or a checkpoint not yet whole). */
  accept (packed: Jrep): ReplicaChange | null {
    const m = this.unpack(packed)
    if (m === null) return null
    const s = this.stored.get(m.node)
    if (s !== undefined && older(m, s)) return null
    if (s !== undefined && m.inc === s.inc && m.gen === s.gen) {
      const have = s.text.length
      if (m.offset > have || m.offset + m.data.length <= have) return null
      const text = m.data.slice(have - m.offset)
      if (have + text.length > MAX_REPLICA_CHARS) return null
      return { writer: m.node, kind: 'append', text, next: { ...s, text: s.text + text } }
    }
    // A newer generation or incarnation: assembled here until its checkpoint line is whole.
    let p = this.pending.get(m.node)
    if (p === undefined || older(p, m)) {
      if (m.offset !== 0) return null
      p = { inc: m.inc, epoch: m.epoch, gen: m.gen, text: '' }
      this.pending.set(m.node, p)
    } else if (older(m, p)) {
      return null
    }
    if (m.offset > p.text.length || m.offset + m.data.length <= p.text.length) return null
    p.text += m.data.slice(p.text.length - m.offset)
    if (p.text.length > MAX_REPLICA_CHARS) { this.pending.delete(m.node); return null }
    if (!p.text.includes('\n')) return null
    this.pending.delete(m.node)
    const aside = s !== undefined && s.inc < p.inc ? { superseded: s } : {}
    return { writer: m.node, kind: 'replace', text: p.text, next: p, ...aside }
  }

  /**
   * A jrep's text: a packed one (replica-messages.ts) inflated against this
   * copy's text before its offset, in the same incarnation and generation
   * (the stored copy, or the one being assembled); null if this replica
   * lacks that text or it does not inflate (the jack then says what it has).
   */
  private unpack (m: Jrep): Jrep | null {
    if (m.packed === undefined) return m
    const s = this.stored.get(m.node)
    const p = this.pending.get(m.node)
    const copy = s !== undefined && s.inc === m.inc && s.gen === m.gen ? s : p !== undefined && p.inc === m.inc && p.gen === m.gen ? p : undefined
    if (copy === undefined || copy.text.length < m.offset) return null
    return unpackJrep(m, copy.text.slice(Math.max(0, m.offset - m.packed.d), m.offset))
  }

  /** The change is on disk. */
  commit (c: ReplicaChange): void {
    if (c.superseded !== undefined) this.superseded.set(c.writer, c.superseded)
    this.stored.set(c.writer, c.next)
  }

  /** The reply to a jrep from `writer`. */
  ack (writer: string, me: string, myEpoch: string, version: number): Jack {
    const s = this.stored.get(writer)
    const p = this.pending.get(writer)
    // z: this replica reads compressed jreps (replica-messages.ts).
    if (p !== undefined && (s === undefined || older(s, p))) return { v: version, t: 'jack', node: me, epoch: myEpoch, inc: p.inc, gen: p.gen, have: p.text.length, durable: false, z: true }
    return { v: version, t: 'jack', node: me, epoch: myEpoch, inc: s?.inc ?? 0, gen: s?.gen ?? 0, have: s?.text.length ?? 0, durable: true, z: true }
  }

  /** The copy of `writer`'s journal (what a heir reads). */
  get (writer: string): StoredReplica | undefined {
    return this.stored.get(writer)
  }

  /**
   * The copy a heir of `writer`'s incarnation `inc` reads: the newest kept of
   * an incarnation up to `inc` (the stored copy, else the superseded one),
   * else the stored copy (a later incarnation's, which the heir does not count).
   */
  upTo (writer: string, inc: number): StoredReplica | undefined {
    const s = this.stored.get(writer)
    if (s === undefined || s.inc <= inc) return s
    const old = this.superseded.get(writer)
    return old !== undefined && old.inc <= inc ? old : s
  }

  writers (): string[] {
    return [...this.stored.keys()]
  }

  status (): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    for (const [w, s] of this.stored) out[w] = { inc: s.inc, gen: s.gen, chars: s.text.length, lines: countLines(s.text) }
    return out
  }
}

/** Whether `a` is of an older incarnation or generation than `b`. */
function older (a: { inc: number, gen: number }, b: { inc: number, gen: number }): boolean {
  return a.inc < b.inc || (a.inc === b.inc && a.gen < b.gen)
}

function parseStored (text: string): StoredReplica | undefined {
  const nl = text.indexOf('\n')
  if (nl < 0) return undefined
  try {
    const c = JSON.parse(text.slice(0, nl)) as { inc?: unknown, epoch?: unknown, gen?: unknown }
    if (!Number.isSafeInteger(c.inc) || typeof c.epoch !== 'string' || !Number.isSafeInteger(c.gen)) return undefined
    return { inc: c.inc as number, epoch: c.epoch, gen: c.gen as number, text }
  } catch {
    return undefined
  }
}

function countLines (text: string): number {
  let n = 0
  for (let i = text.indexOf('\n'); i >= 0 && n <= CHECKPOINT_EVERY + 1; i = text.indexOf('\n', i + 1)) n++
  return n
}
