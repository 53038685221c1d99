/**
 * The cluster transport over libp2p, and the ONLY module of quotad that
 * imports libp2p (moving to the libp2p 3 line is a change here and nowhere
 * else). It owns one libp2p node: TCP + pnet + noise + yamux, identify and
 * gossipsub, nothing that discovers or phones out (no bootstrap, mDNS,
 * autoNAT, relay, UPnP or DCUtR).
 *
 * - Private network: every connection is first wrapped by `@libp2p/pnet`
 *   (XSalsa20 with the swarm key), so a node with another key, or none, never
 *   gets as far as the noise handshake.
 * - Gossip: one topic (a member publishes on a second one that only seeds
 *   hear: member-sums.ts), messages signed by their origin (StrictSign). Size is
 *   capped twice: gossipsub drops RPC frames above `maxInboundDataLength`
 *   before decoding them, and our topic validator rejects single messages
 *   above `maxMessageBytes` (not delivered, not forwarded, counted).
 *   Rate is capped per origin (`flood-guard.ts`): a peer that floods with its
 *   own key is hung up on, refused for the penalty (connection gater) and
 *   graylisted through gossipsub's peer score (its RPCs, if any, dropped
 *   before their signatures are checked). Duplicates are dropped before the
 *   signature check too (`fastMsgIdFn`).
 *   A watchdog resets connections on which gossipsub silently gave up.
 * - Requests: `/quotad/transfer/1.0.0`, see `transfer.ts` and `framing.ts`;
 *   calls on long-lived sessions: `/quotad/forward/5.0.0`, see `calls.ts`.
 * - Seeds: `redialer.ts` keeps every seed connected.
 * - Identity: `identity.ts`; option checks: `options.ts`.
 *
 * Library code: it never logs. Events go to `onEvent` and to
 * diagnostics_channel `quotad:transport:<name>` (`events.ts`).
 */
import './polyfill.js'
import { gossipsub } from '@chainsafe/libp2p-gossipsub'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { identify } from '@libp2p/identify'
import { TopicValidatorResult } from '@libp2p/interface'
import type { IncomingStreamData, Message, PeerId, PubSub } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import { preSharedKey } from '@libp2p/pnet'
import { tcp } from '@libp2p/tcp'
import { multiaddr } from '@multiformats/multiaddr'
import { createLibp2p } from 'libp2p'
import type { Libp2p, Libp2pOptions } from 'libp2p'
import { ErrorCodes, QuotadError } from '../../errors.js'
import { formatSwarmKey } from '../../config/swarm-key.js'
import { emitTransportEvent } from './events.js'
import { loadOrCreateIdentity } from './identity.js'
import type { PeerPrivateKey } from './identity.js'
import { Redialer } from './redialer.js'
import { stripPeer, validateOptions } from './options.js'
import type { ResolvedOptions as Resolved } from './options.js'
import { callTransfer, classify, serveRequest } from './transfer.js'
import { CallSessions, callCounters } from './calls.js'
import { CALL_PROTOCOL, TRANSFER_PROTOCOL } from './types.js'
import { FloodGuard, PENALTY_SCORE } from './flood-guard.js'
import type { Transport, TransportOptions } from './types.js'

/** Room for signature, key, seqno, topic and protobuf overhead around one message's data. */
const RPC_OVERHEAD_BYTES = 16 * 1024
/** One RPC may carry several messages (IWANT replies); allow a few full ones per frame. */
const MESSAGES_PER_RPC = 4
const MAX_INBOUND_REQUEST_STREAMS = 64
/** A peer needs one call session at a time; a few more cover one being replaced. */
const MAX_INBOUND_CALL_STREAMS = 4
/** How often to look for connected peers that gossipsub has silently dropped. */
const GOSSIP_CHECK_INTERVAL_MS = 1000
/** A new connection gets this long to show up in gossipsub (identify, then topology). */
const GOSSIP_GRACE_MS = 2000
/**
 * An origin may send this many seconds of its average budget at once (flood-guard.ts): 4 s of an honest node's
 * gossip. Not more: until a flooder is penalised, every message it sends is checked and judged, and queues
 * ahead of honest gossip (a burst of 16 s let a seed's backlog grow until it took its peer seed for dead).
 */
const FLOOD_BURST_SECONDS = 2
/**
 * How long a peer that flooded gossip with its own key stays hung up on and graylisted. Short: a flooder that
 * comes back costs one burst per penalty (about 2 s of its budget), and an honest member penalised by mistake
 * (more than 4 s of its gossip held back, then delivered at once) is not shut out for long.
 */
const FLOOD_PENALTY_MS = 10_000
/** Most origins whose budgets are tracked (least recently heard dropped first). */
const FLOOD_MAX_ORIGINS = 4096

type Node = Libp2p<{ identify: unknown, pubsub: PubSub }>

/** Every topic this node hears or publishes on: gossipsub ignores subscriptions to any other (allowedTopics). */
function topicsOf (o: Resolved): string[] {
  return [...new Set([o.topic, o.publishTopic, ...o.alsoSubscribe, ...o.alsoPublish])]
}

export async function createTransport (opts: TransportOptions): Promise<Transport> {
  const o = validateOptions(opts)
  const identity = await loadOrCreateIdentity(o.dataDir)
  const guard: FloodGuard = new FloodGuard({
    perSecond: o.maxGossipPerSec,
    burst: FLOOD_BURST_SECONDS * o.maxGossipPerSec,
    penaltyMs: FLOOD_PENALTY_MS,
    maxOrigins: FLOOD_MAX_ORIGINS,
    // read only while validating, after start
    exempt: (id: string): boolean => t.isListed(id)
  })
  const t: Libp2pTransport = new Libp2pTransport(o, await buildNode(o, identity.key, guard), guard)
  t.emit('identity', { path: identity.path, created: identity.created, mode: identity.mode, peerId: t.peerId })
  return t
}

/** gossipsub's cheap message id, before the signature check: the same as its StrictSign id (origin and seqno). */
function fastMsgId (msg: { from?: Uint8Array, seqno?: Uint8Array }): string {
  // Only ids of messages whose signature checked out enter gossipsub's fast cache: a forged copy cannot shadow one.
  return msg.from === undefined || msg.seqno === undefined ? '' : `${Buffer.from(msg.from).toString('base64')}/${Buffer.from(msg.seqno).toString('base64')}`
}

async function buildNode (o: Resolved, privateKey: PeerPrivateKey, guard: FloodGuard): Promise<Node> {
  const node = await createLibp2p({
    start: false,
    // @libp2p/crypto 5.1.23 (the one installed, also used by libp2p itself)
    // types its keys with @libp2p/interface 3, libp2p 2.10 with interface 2.
    // Same runtime objects; only the declared types differ.
    privateKey: privateKey as unknown as NonNullable<Libp2pOptions['privateKey']>,
    addresses: { listen: [o.listen] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    ...(o.psk === null ? {} : { connectionProtector: preSharedKey({ psk: new TextEncoder().encode(formatSwarmKey(o.psk)) }) }),
    connectionManager: {
      dialTimeout: o.dialTimeoutMs,
      // A dialler without our key never finishes the upgrade; it gives up
      // after its dial timeout, and so do we instead of holding a pending slot.
      inboundUpgradeTimeout: o.dialTimeoutMs,
      // The defaults (5 new connections/s per IP, 10 pending) suit the public
      // network; here several nodes may share one host, and keyless dialers
      // must not crowd out cluster members.
      inboundConnectionThreshold: 50,
      maxIncomingPendingConnections: 32,
      // no /dnsaddr/ lookups: seeds are literal addresses
      resolvers: {}
    },
    peerDiscovery: [],
    // A peer the flood guard penalised is hung up on (its queued RPCs go unread) and may not come back until the
    // penalty ends: refused right after the handshake, before any stream.
    connectionGater: {
      denyInboundEncryptedConnection: peerId => guard.refuses(peerId.toString(), performance.now()),
      denyOutboundEncryptedConnection: peerId => guard.refuses(peerId.toString(), performance.now())
    },
    services: {
      identify: identify(),
      pubsub: gossipsub({
        allowPublishToZeroTopicPeers: true,
        emitSelf: false,
        globalSignaturePolicy: 'StrictSign',
        allowedTopics: topicsOf(o),
        maxInboundDataLength: MESSAGES_PER_RPC * o.maxMessageBytes + RPC_OVERHEAD_BYTES,
        // a peer that stops reading must not make us buffer without bound
        maxOutboundBufferSize: 64 * (o.maxMessageBytes + RPC_OVERHEAD_BYTES),
        // A copy of a message already seen (every gossip reaches a seed directly and through its other peers)
        // is dropped before its signature is checked.
        fastMsgIdFn: fastMsgId,
        // Scoring as gossipsub's defaults (thresholds, behaviour), plus the flood guard: a penalised peer's score
        // is far below graylistThreshold (-80), so its RPCs are ignored unread. No IP colocation penalty: its
        // default (-5 x the square of the peers over 10 on one address) graylists every peer of a host with 15
        // sidecars on it, the intended deployment; members per address are bounded by admission instead
        // (limits.maxMembersPerHost, membership.ts).
        scoreParams: { appSpecificScore: id => guard.penalised(id, performance.now()) ? PENALTY_SCORE : 0, IPColocationFactorWeight: 0 }
      })
    }
  })
  return node as unknown as Node
}

export class Libp2pTransport implements Transport {
  onGossip: Transport['onGossip'] = () => {}
  onRequest: Transport['onRequest'] = () => { throw new Error('no request handler') }
  onCall: Transport['onCall'] = () => { throw new Error('no call handler') }
  onPeer: Transport['onPeer'] = () => {}

  private readonly o: Resolved
  private readonly guard: FloodGuard
  private readonly callStats = callCounters()
  private readonly calls: CallSessions
  private readonly node: Node
  private readonly redialer: Redialer
  private readonly ownAddrs = new Set<string>()
  private readonly counters = {
    published: 0,
    received: 0,
    /** Gossip payload bytes published (once per message, before gossipsub copies it to peers). */
    publishedBytes: 0,
    /** Gossip copies handed to peers (a message counts once per recipient). */
    publishedCopies: 0,
    receivedBytes: 0,
    /** Request and reply payload bytes of the transfer protocol, both directions. */
    requestBytesOut: 0,
    requestBytesIn: 0,
    droppedOversize: 0,
    requestsIn: 0,
    requestsOut: 0,
    requestErrors: 0,
    requestsInFailed: 0,
    requestsOversize: 0,
    dials: 0,
    dialFailures: 0,
    handlerErrors: 0,
    gossipResets: 0
  }

  private gossipCheck: NodeJS.Timeout | undefined

  private state: 'new' | 'started' | 'stopped' = 'new'

  constructor (o: Resolved, node: Node, guard: FloodGuard) {
    this.o = o
    this.node = node
    this.guard = guard
    this.ownAddrs.add(stripPeer(o.listen))
    this.calls = new CallSessions({
      open: async (peerId, signal) => await this.node.dialProtocol(parsePeerId(peerId), CALL_PROTOCOL, { signal }),
      handler: async (from, data) => await this.onCall(from, data),
      inboundTimeoutMs: o.inboundTimeoutMs,
      counters: this.callStats,
      emit: (name, fields) => { this.emit(name, fields) }
    })
    this.redialer = new Redialer({
      seeds: o.seeds.map(stripPeer),
      dial: async (addr, peerId) => await this.dialSeed(addr, peerId),
      isConnected: id => this.node.getConnections(peerIdFromString(id)).some(c => c.status === 'open'),
      selfId: this.peerId,
      minBackoffMs: o.minBackoffMs,
      maxBackoffMs: o.maxBackoffMs,
      seedMaxBackoffMs: o.seedMaxBackoffMs,
      onEvent: (name, fields) => { this.emit(name, fields) }
    })
  }

  get peerId (): string { return this.node.peerId.toString() }

  get listenAddrs (): string[] { return this.node.getMultiaddrs().map(String) }

  async start (): Promise<void> {
    if (this.state !== 'new') throw new QuotadError(ErrorCodes.INTERNAL, `transport cannot start: it is ${this.state}`)
    this.state = 'started'
    const { node, o } = this
    node.addEventListener('peer:connect', evt => { this.peerEvent(evt.detail, true) })
    node.addEventListener('peer:disconnect', evt => { this.peerEvent(evt.detail, false) })
    const pubsub = node.services.pubsub
    for (const topic of topicsOf(o)) {
      pubsub.topicValidators.set(topic, (from, msg) => {
        if (msg.data.byteLength > o.maxMessageBytes) {
          this.counters.droppedOversize++
          this.emit('gossip-oversize', { from: from.toString(), bytes: msg.data.byteLength, limit: o.maxMessageBytes })
          return TopicValidatorResult.Reject
        }
        // StrictSign: every message gossipsub validates is signed.
        if (msg.type !== 'signed') return TopicValidatorResult.Accept
        const verdict = this.guard.judge(msg.from.toString(), from.toString(), performance.now(), peerId => {
          this.emit('gossip-flood', { peerId, penaltyMs: FLOOD_PENALTY_MS, perSecond: o.maxGossipPerSec })
          // What it already sent is still queued on the connection: closing it drops that unread.
          this.node.hangUp(from).catch(() => {})
        })
        return verdict === 'accept' ? TopicValidatorResult.Accept : verdict === 'reject' ? TopicValidatorResult.Reject : TopicValidatorResult.Ignore
      })
    }
    pubsub.addEventListener('message', evt => { this.gossipIn(evt.detail) })
    await node.handle(TRANSFER_PROTOCOL, data => { void this.serve(data) }, {
      maxInboundStreams: MAX_INBOUND_REQUEST_STREAMS
    })
    await node.handle(CALL_PROTOCOL, ({ stream, connection }) => { void this.calls.serve(stream, connection.remotePeer.toString()) }, {
      maxInboundStreams: MAX_INBOUND_CALL_STREAMS
    })
    try {
      await node.start()
    } catch (err) {
      this.state = 'stopped'
      await Promise.resolve().then(async () => { await node.stop() }).catch(() => {})
      // libp2p's message lists every address with a stack trace; keep the cause
      const text = (err as Error)?.message ?? String(err)
      const cause = /Error: (.*)/.exec(text)?.[1] ?? text.split('\n')[0]
      throw new QuotadError(ErrorCodes.CONFIG_INVALID, `cannot listen on ${o.listen}: ${cause}`)
    }
    pubsub.subscribe(o.topic)
    for (const topic of o.alsoSubscribe) pubsub.subscribe(topic)
    // Relayed, not delivered (gossipIn): a seed passes the members' copies of every seed's gossip on to the members
    // it is connected to, as every node relayed every seed's gossip before (a member dials the seeds alone, and
    // one that has not reconnected to a restarted seed yet still hears it through the others).
    for (const topic of o.alsoPublish) pubsub.subscribe(topic)
    for (const a of node.getMultiaddrs()) this.ownAddrs.add(stripPeer(a.toString()))
    this.emit('started', { peerId: this.peerId, listenAddrs: this.listenAddrs })
    this.redialer.start()
    this.gossipCheck = setInterval(() => { this.resetLostGossipPeers() }, GOSSIP_CHECK_INTERVAL_MS)
    this.gossipCheck.unref()
  }

  async stop (): Promise<void> {
    if (this.state === 'stopped') return
    const wasStarted = this.state === 'started'
    this.state = 'stopped'
    this.redialer.stop()
    this.calls.stop()
    clearInterval(this.gossipCheck)
    if (wasStarted) await this.node.stop()
    this.emit('stopped', {})
  }

  async publish (data: Uint8Array, topic = this.o.publishTopic): Promise<number> {
    this.assertStarted()
    if (topic !== this.o.publishTopic && !this.o.alsoPublish.includes(topic)) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `not a topic this node publishes on: ${topic}`)
    if (data.byteLength > this.o.maxMessageBytes) {
      throw new QuotadError(ErrorCodes.FRAME_TOO_LARGE,
        `gossip message of ${data.byteLength} bytes is above maxMessageBytes ${this.o.maxMessageBytes}`)
    }
    const result = await this.node.services.pubsub.publish(topic, data)
    this.counters.published++
    this.counters.publishedBytes += data.byteLength
    this.counters.publishedCopies += result.recipients.length
    return result.recipients.length
  }

  async request (peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    this.assertStarted()
    this.counters.requestsOut++
    try {
      const reply = await callTransfer(async signal => await this.node.dialProtocol(parsePeerId(peerId), TRANSFER_PROTOCOL, { signal }),
        data, this.o.maxRequestBytes, timeoutMs, `request to ${peerId}`)
      this.counters.requestBytesOut += data.byteLength + reply.byteLength
      return reply
    } catch (err) {
      const e = err as QuotadError
      this.counters.requestErrors++
      if (e.code === ErrorCodes.FRAME_TOO_LARGE) this.counters.requestsOversize++
      this.emit('request-failed', { peerId, direction: 'out', code: e.code, error: e.message })
      throw e
    }
  }

  async call (peerId: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    this.assertStarted()
    return await this.calls.call(peerId, data, timeoutMs)
  }

  connectedPeers (): string[] {
    return this.node.getPeers().map(String)
  }

  hostOf (peerId: string): string | undefined {
    let id: PeerId
    try { id = peerIdFromString(peerId) } catch { return undefined }
    for (const c of this.node.getConnections(id)) {
      if (c.status !== 'open') continue
      try { return c.remoteAddr.toOptions().host } catch { return c.remoteAddr.toString() }
    }
    return undefined
  }

  stats (): Record<string, number> {
    return {
      ...this.counters,
      ...this.callStats,
      ...this.guard.counters,
      floodPenalised: this.guard.penalisedNow(performance.now()),
      peers: this.state === 'started' ? this.node.getPeers().length : 0
    }
  }

  /** A listed node (a seed address we dial) has this peer id: the flood guard never penalises it. */
  isListed (peerId: string): boolean {
    return this.redialer.snapshot().some(s => s.peerId === peerId)
  }

  async dial (addr: string): Promise<void> {
    this.assertStarted()
    let ma
    try {
      ma = multiaddr(addr)
    } catch (err) {
      throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `not a multiaddr: ${JSON.stringify(addr)} (${(err as Error).message})`)
    }
    const peerId = await this.dialAddr(ma.toString())
    if (peerId === this.peerId) throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `${addr} is this node's own address`)
    this.redialer.learned(stripPeer(addr), peerId)
  }

  /**
   * Dial one address with a timeout; resolves with the remote peer id, or
   * with our own id when the address turns out to be ours (libp2p learns
   * that only after the handshake when the address has no /p2p/ part).
   */
  private async dialAddr (addr: string): Promise<string> {
    const signal = AbortSignal.timeout(this.o.dialTimeoutMs)
    this.counters.dials++
    try {
      const conn = await this.node.dial(multiaddr(addr), { signal })
      return conn.remotePeer.toString()
    } catch (err) {
      if ((err as Error)?.name === 'InvalidPeerIdError' && /dial self/i.test((err as Error).message)) return this.peerId
      this.counters.dialFailures++
      throw classify(err, signal, `dial ${addr}`)
    }
  }

  private async dialSeed (addr: string, peerId: string | undefined): Promise<string> {
    if (this.ownAddrs.has(addr)) return this.peerId
    return await this.dialAddr(peerId === undefined ? addr : `${addr}/p2p/${peerId}`)
  }

  private peerEvent (peer: PeerId, connected: boolean): void {
    const id = peer.toString()
    this.emit('peer', { peerId: id, connected })
    if (connected) this.redialer.peerConnected(id)
    else this.redialer.peerDisconnected(id)
    this.callHandler('onPeer', () => { this.onPeer(id, connected) })
  }

  private gossipIn (msg: Message): void {
    if ((msg.topic !== this.o.topic && !this.o.alsoSubscribe.includes(msg.topic)) || msg.type !== 'signed') return
    const from = msg.from.toString()
    if (from === this.peerId) return
    // the validator already rejected these; this guards against a gossipsub
    // path that skips validation
    if (msg.data.byteLength > this.o.maxMessageBytes) return
    this.counters.received++
    this.counters.receivedBytes += msg.data.byteLength
    this.callHandler('onGossip', () => { this.onGossip(from, msg.data) })
  }

  /**
   * Gossipsub drops a peer whose inbound RPC stream fails (a frame above
   * `maxInboundDataLength`, or garbage) but leaves the connection open, and
   * the peer keeps "sending" into a dead stream: gossip between the two stops
   * for good while both still look connected. Closing the connection makes
   * both sides start over (the redialer reconnects), with fresh streams.
   */
  private resetLostGossipPeers (): void {
    const inGossip = new Set(this.node.services.pubsub.getPeers().map(String))
    const now = Date.now()
    const lost = new Set<string>()
    for (const conn of this.node.getConnections()) {
      const id = conn.remotePeer.toString()
      if (conn.status !== 'open' || inGossip.has(id) || now - conn.timeline.open < GOSSIP_GRACE_MS) continue
      lost.add(id)
    }
    for (const id of lost) {
      this.counters.gossipResets++
      this.emit('gossip-reset', { peerId: id })
      this.node.hangUp(peerIdFromString(id)).catch(() => {})
    }
  }

  /** Serve one inbound request (transfer.ts `serveRequest`). Never throws: any failure resets the stream. */
  private async serve ({ stream, connection }: IncomingStreamData): Promise<void> {
    await serveRequest(stream, connection.remotePeer.toString(), async (from, req) => await this.onRequest(from, req),
      { maxBytes: this.o.maxRequestBytes, timeoutMs: this.o.inboundTimeoutMs }, this.counters, (name, fields) => { this.emit(name, fields) })
  }

  private callHandler (name: string, fn: () => void): void {
    try {
      fn()
    } catch (err) {
      this.counters.handlerErrors++
      this.emit('handler-error', { handler: name, error: (err as Error)?.message ?? String(err) })
    }
  }

  private assertStarted (): void {
    if (this.state !== 'started') {
      throw new QuotadError(ErrorCodes.SHUTTING_DOWN, `transport is ${this.state === 'new' ? 'not started' : 'stopped'}`)
    }
  }

  /** @internal */
  emit (name: string, fields: Record<string, unknown>): void {
    emitTransportEvent(this.o.onEvent, name, fields)
  }
}

function parsePeerId (id: string): PeerId {
  try {
    return peerIdFromString(id)
  } catch {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `not a peer id: ${JSON.stringify(id)}`)
  }
}
