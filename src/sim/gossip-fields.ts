/**
 * A gossip's bytes by field, for the figures' `gossipFields`: every
 * SAMPLE-th gossip published is packed again, one field at a time (cheap,
 * and the mix of fields is steady over a run). Each field packed alone: the
 * map's own framing and the field names are not counted.
 */
import { wire } from '../cluster/wire.js'

const SAMPLE = 16

export class GossipFields {
  private published = 0
  private sampled = 0
  private readonly bytes = new Map<string, number>()

  /** A gossip was published (packed again if it is a sampled one). */
  sample (msg: object): void {
    if (++this.published % SAMPLE !== 0) return
    this.sampled++
    for (const [f, v] of Object.entries(msg)) this.bytes.set(f, (this.bytes.get(f) ?? 0) + wire.pack(v).length)
  }

  /** Mean bytes per gossip by field, largest first. */
  means (): Record<string, number> {
    if (this.sampled === 0) return {}
    return Object.fromEntries([...this.bytes].sort((a, b) => b[1] - a[1]).map(([f, b]) => [f, Math.round(10 * b / this.sampled) / 10]))
  }
}
