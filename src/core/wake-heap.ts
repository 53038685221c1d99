/**
 * A binary min-heap of (time, item) wake-ups for the limiter's waiting keys.
 *
 * Entries are never removed or re-keyed in place: when an item's wake time
 * changes, a new entry is pushed and the old one goes stale. The owner decides
 * staleness on pop (the limiter compares against the key's current `wakeAt`).
 * This keeps every operation O(log n) with no index bookkeeping.
 */
export class WakeHeap<T> {
  private times: number[] = []
  private items: T[] = []

  get size (): number { return this.times.length }

  peekTime (): number {
    return this.times.length > 0 ? this.times[0] : Infinity
  }

  push (time: number, item: T): void {
    const times = this.times
    const items = this.items
    let i = times.length
    times.push(time)
    items.push(item)
    while (i > 0) {
      const p = (i - 1) >> 1
      if (times[p] <= time) break
      times[i] = times[p]
      items[i] = items[p]
      i = p
    }
    times[i] = time
    items[i] = item
  }

  /** Remove and return the earliest item (undefined when empty). */
  pop (): T | undefined {
    const times = this.times
    const items = this.items
    const n = times.length
    if (n === 0) return undefined
    const top = items[0]
    const lastT = times.pop() as number
    const lastI = items.pop() as T
    if (n > 1) {
      let i = 0
      const m = n - 1
      while (true) {
        let c = 2 * i + 1
        if (c >= m) break
        if (c + 1 < m && times[c + 1] < times[c]) c++
        if (times[c] >= lastT) break
        times[i] = times[c]
        items[i] = items[c]
        i = c
      }
      times[i] = lastT
      items[i] = lastI
    }
    return top
  }
}
