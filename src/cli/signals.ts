/**
 * Stop signals, from the first moment of the process (see quotad.ts). No
 * imports: this module must load before anything heavy does.
 *
 * Until a handler is attached, a signal is only recorded; attaching a
 * handler delivers any signal recorded so far to it at once.
 *
 * A start that does not finish must still stop when asked: a signal that
 * comes during the start arms a timer, and if no handler has taken the
 * signal within START_STOP_MS (the start is stuck: a read that never
 * returns, a peer that does not answer) the process ends by the signal's
 * default action, as it would have without a handler (a shell sees 128 +
 * the signal's number). A second signal ends it at once. The state file may then say "running", so the next start
 * is an unclean one: the price of a start that could not finish.
 */
type Handler = (signal: string) => void

/**
 * How long a signal during the start waits for the start to finish: the stop
 * must come within 2 s of the signal (measured: exit 50 ms after the timer).
 * A start that finishes in time stops cleanly (the usual case: a signal as
 * libp2p starts was followed by the end of the start within ~0.5 s here).
 */
export const START_STOP_MS = 1800

class EarlySignals {
  private pending: string | null = null
  private handler: Handler | null = null
  private deadline: NodeJS.Timeout | null = null

  install (): void {
    // SIGHUP's default action is to exit: until the daemon can reload, ignore it (it reads the file when it starts).
    process.on('SIGHUP', () => {})
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () => {
        if (this.handler !== null) { this.handler(sig); return }
        if (this.pending !== null) { this.exitNow(sig, 'a second stop signal during the start'); return }
        this.pending = sig
        this.deadline = setTimeout(() => { this.exitNow(sig, `the start did not finish within ${START_STOP_MS} ms of the signal`) }, START_STOP_MS)
        // Nothing else to wait for: the process may end sooner on its own.
        this.deadline.unref()
      })
    }
  }

  private exitNow (sig: 'SIGTERM' | 'SIGINT', why: string): void {
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'warn', component: 'quotad', msg: 'stopped during the start', signal: sig, why, pid: process.pid }) + '\n')
    // The signal's default action, not process.exit: exit waits for libuv's thread pool, and a start stuck
    // in a blocking call there (a read of a FIFO, a hung network filesystem) would hold the exit too.
    process.removeAllListeners(sig)
    process.kill(process.pid, sig)
  }

  /** The signal received before any handler was attached, if any. */
  get received (): string | null {
    return this.pending
  }

  /** From now on signals go to `h`; one already received is delivered now. */
  onStop (h: Handler): void {
    this.handler = h
    // The start finished: the stop is the daemon's own from here.
    if (this.deadline !== null) clearTimeout(this.deadline)
    this.deadline = null
    if (this.pending !== null) h(this.pending)
  }
}

export const earlySignals = new EarlySignals()
