/**
 * How the transport reports what happens to it without logging: every event
 * goes to diagnostics_channel `quotad:transport:<name>` and to the optional
 * `onEvent` callback. Publishing checks for subscribers first, so an
 * unobserved event costs a map lookup and a branch.
 *
 * Names: identity, started, stopped, peer, dial-failed, redial-scheduled,
 * seed-is-self, gossip-oversize, gossip-flood, gossip-reset, request-failed,
 * handler-error.
 */
import diagnosticsChannel from 'node:diagnostics_channel'

export type TransportEventListener = (name: string, fields: Record<string, unknown>) => void

const channels = new Map<string, diagnosticsChannel.Channel>()

function channel (name: string): diagnosticsChannel.Channel {
  let ch = channels.get(name)
  if (ch === undefined) {
    ch = diagnosticsChannel.channel(`quotad:transport:${name}`)
    channels.set(name, ch)
  }
  return ch
}

export function emitTransportEvent (listener: TransportEventListener | undefined, name: string, fields: Record<string, unknown>): void {
  const ch = channel(name)
  if (ch.hasSubscribers) ch.publish(fields)
  if (listener === undefined) return
  try {
    listener(name, fields)
  } catch {
    // an observer's bug must not take the transport down
  }
}
