/**
 * Round-robin turns for connections that have more input than one turn may
 * handle.
 *
 * Without it, one busy connection slows every other: libuv hands a readable
 * socket up to 32 reads of 64 KiB in one go, and the server answered every
 * frame in them before looking at any other socket, so a well-behaved client
 * waited behind megabytes of someone else's requests (p99 0.77 s with 8
 * connections flooding). Now a connection works for at most one turn (a few
 * hundred frames, 256 KiB or a quarter of a millisecond, see connection.ts),
 * then stops reading, keeps the rest of its input, and queues here. Queued
 * connections get turns in arrival order, one per `setImmediate`, so the
 * event loop polls the sockets between any two turns.
 *
 * A connection queues itself at most once (`queued`), and a closed one is
 * dropped at its next turn, so the queue never keeps a dead connection for
 * longer than one round.
 */

export interface Turned {
  /** True while in the queue. Owned by the scheduler. */
  queued: boolean
  /** Handle some held input; the connection queues itself again if it has more. */
  runTurn: () => void
}

export class TurnScheduler {
  private queue: Turned[] = []
  private head = 0
  private scheduled = false

  /** Connections waiting for a turn. */
  get size (): number {
    return this.queue.length - this.head
  }

  enqueue (c: Turned): void {
    if (c.queued) return
    c.queued = true
    this.queue.push(c)
    this.schedule()
  }

  private schedule (): void {
    if (this.scheduled || this.head === this.queue.length) return
    this.scheduled = true
    setImmediate(this.turn)
  }

  /**
   * One turn, then back to the event loop. An immediate set from an
   * immediate runs in the next loop iteration, after the poll phase: so
   * between any two turns the loop reads the sockets that have data, and a
   * quiet connection's request waits for one busy turn, not for a turn of
   * every busy connection.
   */
  private readonly turn = (): void => {
    this.scheduled = false
    const c = this.queue[this.head++]
    if (this.head === this.queue.length) {
      this.queue.length = 0
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
    c.queued = false
    try {
      c.runTurn() // may queue `c` again, at the back
    } catch {
      // runTurn handles its own errors; one connection's bug must not starve the rest.
    }
    this.schedule()
  }
}
