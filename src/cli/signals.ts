/**
 * Stop signals, from the first moment of the process (see quotad.ts). No
 * imports: this module must load before anything heavy does.
 *
 * Until a handler is attached, a signal is only recorded; attaching a
 * handler delivers any signal recorded so far to it at once.
 */
type Handler = (signal: string) => void

class EarlySignals {
  private pending: string | null = null
  private handler: Handler | null = null

  install (): void {
    // SIGHUP's default action is to exit: until the daemon can reload, ignore it (it reads the file when it starts).
    process.on('SIGHUP', () => {})
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () => {
        if (this.handler !== null) this.handler(sig)
        else this.pending ??= sig
      })
    }
  }

  /** The signal received before any handler was attached, if any. */
  get received (): string | null {
    return this.pending
  }

  /** From now on signals go to `h`; one already received is delivered now. */
  onStop (h: Handler): void {
    this.handler = h
    if (this.pending !== null) h(this.pending)
  }
}

export const earlySignals = new EarlySignals()
