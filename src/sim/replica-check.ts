/**
 * Journal copies, judged from the virtual disks (replication.ts). When a
 * grant leaves a seed that replicates, every give of its keys so far must
 * be covered on the disks of a quorum of its replica group (the writer and
 * the next four seeds in name order: the writer's own journal and
 * the other seeds' copies, `SimNode.replicas`): a copy of the writer's
 * current incarnation and generation whose reservation for the key, or
 * whose own record of gives, is at least what the writer has given of it.
 * A heir credits a copy's books less what is left of its reservation, so it
 * then never credits a token that left. Read here as text, not through the
 * acks the writer counted.
 *
 * Written apart from replication.ts and quorum.ts: it restates the quorum
 * rule (each seed weighs 1; with an even count the first in name order
 * weighs 1.5) and parses the journal lines itself.
 */
import type { ClusterCore } from '../cluster/cluster-core.js'
import type { SimNode } from './sim-node.js'

interface Parsed {
  inc: number
  gen: number
  /** Characters parsed (whole lines). */
  len: number
  /** The checkpoint line parsed, with its newline. */
  head: string
  ceiling: Map<string, number>
  given: Map<string, number>
}

export class ReplicaWitness {
  private readonly ring: string[]
  /** Per writer: its group's weights (the writer included) and their total. */
  private readonly groups = new Map<string, { weights: Map<string, number>, total: number }>()
  /** Parsed copies by text owner and writer: re-read only from where the last read stopped. */
  private readonly cache = new Map<string, Parsed>()
  /**
   * The same, fed by each write as it reaches a disk (`wrote`): a journal
   * grows by appends, and reading its text again (even its first line)
   * copies the whole text into one flat string each time; at 200 nodes
   * that was a fifth of the simulator's time. Used while its length matches
   * the text's; a text changed another way is parsed from the text.
   */
  private readonly fed = new Map<string, { parsed: Parsed | undefined, rest: string, total: number }>()

  /** A write reached the disk holding `owner`'s text of `writer`'s journal: `chunk` appended, or the whole text when `replace`. */
  wrote (owner: string, writer: string, chunk: string, replace: boolean): void {
    const id = `${owner}>${writer}`
    let f = this.fed.get(id)
    if (f === undefined || replace) this.fed.set(id, f = { parsed: undefined, rest: '', total: 0 })
    f.total += chunk.length
    const buf = f.rest + chunk
    const end = buf.lastIndexOf('\n')
    if (end < 0) { f.rest = buf; return }
    f.rest = buf.slice(end + 1)
    let lines = buf.slice(0, end).split('\n')
    if (f.parsed === undefined) {
      f.parsed = this.head(lines[0])
      lines = lines.slice(1)
      if (f.parsed === undefined) { this.fed.delete(id); return }
    }
    this.batches(f.parsed, lines)
  }
  readonly violations: string[] = []
  checked = 0

  constructor (seeds: readonly string[]) {
    this.ring = [...new Set(seeds)].sort()
  }

  /** The writer and the (at most) four seeds after it in name order; with an even count the first in name order weighs 1.5. */
  private group (writer: string): { weights: Map<string, number>, total: number } {
    let g = this.groups.get(writer)
    if (g !== undefined) return g
    const i = this.ring.indexOf(writer)
    const members = [writer]
    for (let k = 1; k < this.ring.length && members.length < 5; k++) members.push(this.ring[(i + k) % this.ring.length])
    members.sort()
    const even = members.length % 2 === 0
    const weights = new Map(members.map((v, j) => [v, even && j === 0 ? 1.5 : 1]))
    g = { weights, total: [...weights.values()].reduce((a, b) => a + b, 0) }
    this.groups.set(writer, g)
    return g
  }

  /**
   * A grant of some keys leaves `writer`; `given`: what the writer had given
   * of each in generation `gen` when the grant was made. A copy of a later
   * generation covers it (its checkpoint's books hold the give).
   */
  leaves (writer: SimNode, core: ClusterCore, gen: number, given: ReadonlyArray<[string, number]>, nodes: ReadonlyMap<string, SimNode>, at: number): void {
    this.checked++
    const group = this.group(writer.name)
    for (const [key, g] of given) {
      let w = 0
      for (const [name, weight] of group.weights) {
        const text = name === writer.name ? writer.journal : nodes.get(name)?.replicas.get(writer.name)
        if (text === undefined) continue
        const p = this.parse(`${name}>${writer.name}`, text)
        if (p === undefined || p.inc !== core.incarnation || p.gen < gen) continue
        if (p.gen > gen || g <= Math.max(p.ceiling.get(key) ?? 0, p.given.get(key) ?? 0) + 1e-9) w += weight
      }
      if (w * 2 <= group.total && this.violations.length < 20) {
        this.violations.push(`${writer.name} at ${Math.round(at)} ms: a grant of ${key} left with ${g} given in generation ${gen}, covered on disks weighing ${w} of ${group.total}`)
      }
    }
  }

  private parse (id: string, text: string): Parsed | undefined {
    const f = this.fed.get(id)
    if (f !== undefined && f.total === text.length && f.parsed !== undefined) return f.parsed
    let p = this.cache.get(id)
    const nl = text.indexOf('\n')
    if (nl < 0) return undefined
    // A text that starts with the checkpoint line parsed is that generation, grown: compared, not parsed again.
    if (p === undefined || text.length < p.len || !text.startsWith(p.head)) {
      p = this.head(text.slice(0, nl))
      if (p === undefined) return undefined
      this.cache.set(id, p)
    }
    const end = text.lastIndexOf('\n')
    if (end < p.len) return p
    this.batches(p, text.slice(p.len, end).split('\n'))
    p.len = end + 1
    return p
  }

  /** A checkpoint line: its incarnation, generation and reservations. */
  private head (line: string): Parsed | undefined {
    let c: { inc?: number, gen?: number, reserved?: Array<[string, number]> }
    try { c = JSON.parse(line) } catch { return undefined }
    if (typeof c.inc !== 'number' || typeof c.gen !== 'number') return undefined
    return { inc: c.inc, gen: c.gen, len: line.length + 1, head: `${line}\n`, ceiling: new Map(c.reserved ?? []), given: new Map() }
  }

  /** Batch lines: the gives and ceilings they record. */
  private batches (p: Parsed, lines: readonly string[]): void {
    for (const line of lines) {
      let batch: unknown
      try { batch = JSON.parse(line) } catch { continue }
      if (!Array.isArray(batch)) continue
      for (const e of batch) {
        if (!Array.isArray(e) || e.length !== 3) continue
        if (e[0] === 'gave') p.given.set(e[1], (p.given.get(e[1]) ?? 0) + e[2])
        else if (e[0] === 'ceil') p.ceiling.set(e[1], e[2])
      }
    }
  }
}
