/**
 * The simulator's agenda: a binary min-heap of events ordered by (time,
 * insertion order). The insertion order breaks ties, so two runs with the
 * same seed execute the same events in the same order: determinism.
 */
export interface SimEvent {
  at: number
  seq: number
  run: () => void
}

export class EventQueue {
  private readonly heap: SimEvent[] = []
  private seq = 0

  get size (): number { return this.heap.length }

  /** Time of the next event (Infinity when empty). */
  peekAt (): number {
    return this.heap.length > 0 ? this.heap[0].at : Infinity
  }

  push (at: number, run: () => void): void {
    const h = this.heap
    const e: SimEvent = { at, seq: this.seq++, run }
    let i = h.length
    h.push(e)
    while (i > 0) {
      const p = (i - 1) >> 1
      if (!before(e, h[p])) break
      h[i] = h[p]
      i = p
    }
    h[i] = e
  }

  pop (): SimEvent | undefined {
    const h = this.heap
    if (h.length === 0) return undefined
    const top = h[0]
    const last = h.pop() as SimEvent
    if (h.length > 0) {
      let i = 0
      const n = h.length
      while (true) {
        const l = 2 * i + 1
        if (l >= n) break
        const r = l + 1
        const c = r < n && before(h[r], h[l]) ? r : l
        if (!before(h[c], last)) break
        h[i] = h[c]
        i = c
      }
      h[i] = last
    }
    return top
  }
}

function before (a: SimEvent, b: SimEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq)
}
