/**
 * How the server reports what happens to it without logging: every event goes
 * to a `node:diagnostics_channel` channel named `quotad:server:<name>` and to
 * the optional `onEvent` callback the daemon passes in. Publishing checks for
 * subscribers first, so an unobserved event costs one branch.
 */
import diagnosticsChannel from 'node:diagnostics_channel'

export type ServerEventName =
  | 'listening' | 'close'
  | 'connection' | 'disconnect' | 'refused'
  | 'bad-frame' | 'socket-error' | 'internal-error'

export const SERVER_EVENT_NAMES: readonly ServerEventName[] = [
  'listening', 'close', 'connection', 'disconnect', 'refused', 'bad-frame', 'socket-error', 'internal-error'
]

export type ServerEventListener = (name: ServerEventName, data: Record<string, unknown>) => void

const channels = new Map(SERVER_EVENT_NAMES.map(n => [n, diagnosticsChannel.channel(`quotad:server:${n}`)]))

export class EventSink {
  private readonly listener: ServerEventListener | undefined

  constructor (listener?: ServerEventListener) {
    this.listener = listener
  }

  /** Whether anyone would see `name`: lets callers skip building the payload. */
  wants (name: ServerEventName): boolean {
    return this.listener !== undefined || (channels.get(name)?.hasSubscribers ?? false)
  }

  publish (name: ServerEventName, data: Record<string, unknown>): void {
    const ch = channels.get(name)
    if (ch?.hasSubscribers === true) ch.publish(data)
    if (this.listener !== undefined) {
      try {
        this.listener(name, data)
      } catch {
        // An observer's bug must not take the server down.
      }
    }
  }
}
