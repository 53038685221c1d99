/**
 * The daemon's side of journal replication (replication.ts): jreps go out
 * over the request protocol, and each jack, or failure, goes back to the
 * core exactly once. The simulator does the same over its virtual network
 * (virtual-cluster.ts).
 */
import type { Clock } from '../clock.js'
import type { Logger } from '../util/log.js'
import type { ClusterCore } from './cluster-core.js'
import type { MessageBounds } from './messages.js'
import { encodeJrep, type Jget, type Jrep } from './replica-messages.js'
import type { Transport } from './transport/types.js'
import { decodeRequest, encodeRequest } from './request-codec.js'


/** Send what the waiting grants need of this node's journal (the core's tick sends the rest). */
export function sendReplicas (core: ClusterCore, t: Transport, bounds: MessageBounds, clock: Clock, log: Logger): void {
  for (const r of core.replication.outbound(clock.mono())) void sendReplica(core, t, r.to, r.msg, r.z, bounds, clock, log)
}

/** One jrep; on its jack, the next part if the replica still lacks some. */
export async function sendReplica (core: ClusterCore, t: Transport, to: string, msg: Jrep, z: string | null, bounds: MessageBounds, clock: Clock, log: Logger): Promise<void> {
  const peerId = core.membership.idOf(to)
  if (peerId === undefined) { core.replication.onFailed(to, clock.mono()); return }
  try {
    const a = decodeRequest(await t.request(peerId, encodeRequest(encodeJrep(msg, z)), core.tuning.wantTimeoutMs), bounds)
    if (a.t !== 'jack' || a.node !== to) throw new Error(`unexpected reply ${a.t} from ${a.node}`)
    core.replication.onAck(to, a, clock.mono())
  } catch (err) {
    core.replication.onFailed(to, clock.mono())
    log.debug('journal copy failed', { to, err })
    return
  }
  sendReplicas(core, t, bounds, clock, log)
}

/** One jget of a heir (heir.ts); its jcopy, or its failure, goes back to the heir exactly once. */
export async function readCopy (core: ClusterCore, t: Transport, to: string, msg: Jget, bounds: MessageBounds, clock: Clock, log: Logger): Promise<void> {
  const peerId = core.membership.idOf(to)
  if (peerId === undefined) { core.heir.onJgetFailed(to, msg.writer, clock.mono()); return }
  try {
    const a = decodeRequest(await t.request(peerId, encodeRequest(msg), core.tuning.wantTimeoutMs), bounds)
    if (a.t !== 'jcopy' || a.node !== to) throw new Error(`unexpected reply ${a.t} from ${a.node}`)
    core.heir.onJcopy(to, a, clock.mono())
  } catch (err) {
    core.heir.onJgetFailed(to, msg.writer, clock.mono())
    log.debug('reading a journal copy failed', { to, writer: msg.writer, err })
  }
}
