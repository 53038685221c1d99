/**
 * A small world for the reclaim log: voters and proposers running the real
 * ReclaimLog over a network that loses, duplicates, delays and reorders
 * messages, with voters that crash and restart from what they persisted.
 * Seeded (src/sim/rng.ts), virtual time, so every run replays exactly.
 *
 * The checker does not trust the learners: it records every acceptance an
 * acceptor answers with, and a slot is chosen (by the definition of Paxos)
 * when a quorum of voters accepted the same (ballot, value). Agreement is
 * "never two values chosen for one slot", checked on those records and on
 * everything any node learned.
 *
 * `durable: false` is the sabotage: a restarted voter forgets its votes (as
 * if the driver answered before writing, or the votes file were lost). The
 * checker must then find disagreements, or it is blind.
 */
import { emptyVotes, ReclaimLog, valueDigest, type Quorum, type ReclaimValue, type VotesState } from '../../src/cluster/reclaim-log.js'
import { parseReclaimMessage, parseGossipLog, toWire, gossipLogToWire, type ReclaimMessage } from '../../src/cluster/reclaim-messages.js'
import { Rng } from '../../src/sim/rng.js'

/** Weights 1, the first voter 1.5 when their number is even (design §2); quorum: more than half the total. */
export function weightedQuorum (voters: readonly string[]): Quorum {
  const w = new Map(voters.map((v, i) => [v, voters.length % 2 === 0 && i === 0 ? 1.5 : 1]))
  const total = [...w.values()].reduce((a, b) => a + b, 0)
  return {
    isQuorum (names: Iterable<string>): boolean {
      let s = 0
      for (const n of new Set(names)) s += w.get(n) ?? 0
      return s * 2 > total
    }
  }
}

export interface WorldOptions {
  seed: number
  voters: number
  proposers: number
  /** Slots each proposer leads in turn (it moves on once the slot is chosen, whoever's value won). */
  slots: number
  loss: number
  dup: number
  /** Delivery delay is uniform in [1, maxDelayMs] (reordering comes from it). */
  maxDelayMs: number
  /** Chance per voter per 10 ms tick of a crash while faults last; it restarts 50–300 ms later. */
  crash: number
  /** Faults (loss, duplication, long delays, crashes) stop here; every node is up after it. */
  faultsUntilMs: number
  endMs: number
  /** false: the sabotage, restarted voters forget their votes. @default true */
  durable?: boolean
}

export interface WorldResult {
  /** Slots where two different values were chosen (by the acceptance records) or learned. */
  disagreements: string[]
  /** Chosen slots (by the records) → digest. */
  chosen: Map<number, string>
  /** Per node, the slot up to which it knows the log at the end. */
  through: Record<string, number>
  /** Per node, the entries it took, in order. */
  taken: Record<string, number[]>
  /** Slots in which acceptors accepted two or more different values (the proposers really raced). */
  contested: number
  messages: number
}

interface Node {
  name: string
  log?: ReclaimLog
  disk?: VotesState
  epoch: number
  downUntil?: number
  /** The slot it leads now, if a proposer. */
  leading?: number
  startAt: number
  taken: number[]
}

interface InFlight { at: number, to: string, from: string, wire: Record<string, unknown> }

export function runWorld (o: WorldOptions): WorldResult {
  const rng = new Rng(o.seed)
  const names = Array.from({ length: o.voters }, (_, i) => `v${i}`)
  const quorum = weightedQuorum(names)
  const timing = { phaseTimeoutMs: 200, resendMs: 40, backoffMinMs: 10, backoffMaxMs: 300 }
  const nodes = new Map<string, Node>(names.map((n, i) => [n, { name: n, epoch: 0, startAt: i < o.proposers ? rng.int(0, 100) : Infinity, taken: [] }]))
  const durable = o.durable ?? true
  const flights: InFlight[] = []
  const accepts = new Map<string, Set<string>>() // slot|round|node|digest -> acceptors
  const learned = new Map<number, Set<string>>() // slot -> digests learned anywhere
  const disagreements: string[] = []
  let messages = 0
  let now = 0

  const boot = (n: Node): void => {
    n.epoch++
    const votes = durable ? (n.disk ?? emptyVotes(n.name, 'c')) : emptyVotes(n.name, 'c')
    n.log = new ReclaimLog({ node: n.name, epoch: `e${n.epoch}`, voters: names, quorum, votes, timing, applied: n.taken.length === 0 ? 0 : Math.max(...n.taken) })
    n.leading = undefined
  }
  for (const n of nodes.values()) boot(n)

  const faulty = (): boolean => now < o.faultsUntilMs
  const post = (from: string, to: string, m: ReclaimMessage): void => {
    if (faulty() && rng.chance(o.loss)) return
    const copies = faulty() && rng.chance(o.dup) ? 2 : 1
    for (let i = 0; i < copies; i++) {
      const delay = rng.int(1, faulty() ? o.maxDelayMs : 5)
      flights.push({ at: now + delay, from, to, wire: toWire(m) })
      messages++
    }
  }
  const noteLearned = (slot: number, v: ReclaimValue): void => {
    const s = learned.get(slot) ?? new Set()
    s.add(valueDigest(v))
    learned.set(slot, s)
  }
  const apply = (n: Node, step: ReturnType<ReclaimLog['tick']>, replyTo?: string): void => {
    if (step.persist !== null && (n.disk === undefined || step.persist.gen > n.disk.gen)) n.disk = step.persist
    if (step.reply !== null && replyTo !== undefined) post(n.name, replyTo, step.reply)
    for (const s of step.send) post(n.name, s.to, s.msg)
    for (const e of n.log!.take()) {
      n.taken.push(e.slot)
      noteLearned(e.slot, e.value)
    }
  }
  const valueOf = (n: Node, slot: number): ReclaimValue => ({
    slot, D: [{ node: `dead-${n.name}-${slot}`, acct: 1, inc: 1, epoch: 'x' }], heir: { node: n.name, epoch: `e${n.epoch}`, acct: 1 }, listed: [{ node: n.name, acct: 1 }]
  })

  for (now = 0; now <= o.endMs; now += 10) {
    // deliver what is due, in random order among the due (reordering within a tick too)
    const due = rng.shuffle(flights.filter(f => f.at <= now))
    for (let i = flights.length - 1; i >= 0; i--) if (flights[i].at <= now) flights.splice(i, 1)
    for (const f of due) {
      const n = nodes.get(f.to)!
      if (n.downUntil !== undefined) continue
      const m = parseReclaimMessage(f.wire)
      const step = n.log!.handle(f.from, m, now, rng)
      if (m.t === 'accept' && step.reply?.t === 'accepted') {
        // The acceptance record: what the acceptor said it accepted, whatever any learner makes of it.
        const k = `${m.slot}|${m.ballot.round}|${m.ballot.node}|${valueDigest(m.value)}`
        const set = accepts.get(k) ?? new Set()
        set.add(n.name)
        accepts.set(k, set)
      }
      apply(n, step, m.t === 'prepare' || m.t === 'accept' || m.t === 'log?' ? f.from : undefined)
    }
    for (const n of nodes.values()) {
      if (n.downUntil !== undefined) {
        if (now >= n.downUntil || !faulty()) { n.downUntil = undefined; boot(n) } else continue
      }
      if (faulty() && rng.chance(o.crash)) { n.downUntil = now + rng.int(50, 300); n.log = undefined; continue }
      const log = n.log!
      // a proposer leads the next open slot until it has led `slots` of them
      if (now >= n.startAt && n.leading === undefined && log.through < o.slots) {
        n.leading = log.through + 1
        apply(n, log.propose(n.leading, valueOf(n, n.leading), now, rng))
      } else if (n.leading !== undefined && log.through >= n.leading) {
        n.leading = undefined
      } else if (n.leading !== undefined && log.proposal(n.leading) === undefined) {
        apply(n, log.propose(n.leading, valueOf(n, n.leading), now, rng)) // its proposer finished as closed and was dropped
      }
      apply(n, log.tick(now, rng))
      if (now % 250 === 0) {
        const g = parseGossipLog(gossipLogToWire(log.gossip())) // once per sender: receivers share it, as values are never mutated
        for (const to of names) {
          if (to === n.name || (faulty() && rng.chance(o.loss))) continue
          const dest = nodes.get(to)!
          if (dest.downUntil === undefined) apply(dest, dest.log!.learnGossip(n.name, g, now))
        }
      }
    }
  }

  const chosen = new Map<number, string>()
  for (const [k, voters] of accepts) {
    if (!quorum.isQuorum(voters)) continue
    const [slot, , , digest] = k.split('|')
    const had = chosen.get(Number(slot))
    if (had !== undefined && had !== digest) disagreements.push(`slot ${slot}: quorums accepted ${had} and ${digest}`)
    chosen.set(Number(slot), digest)
  }
  for (const [slot, ds] of learned) {
    if (ds.size > 1) disagreements.push(`slot ${slot}: learned ${[...ds].join(', ')}`)
    const c = chosen.get(slot)
    if (c !== undefined && !ds.has(c)) disagreements.push(`slot ${slot}: learned ${[...ds].join(', ')}, chosen ${c}`)
  }
  for (const n of nodes.values()) {
    for (const c of n.log?.conflicts ?? []) disagreements.push(`slot ${c.slot}: ${n.name} learned ${c.kept} and ${c.other}`)
  }
  const valuesPerSlot = new Map<string, Set<string>>()
  for (const k of accepts.keys()) {
    const [slot, , , digest] = k.split('|')
    valuesPerSlot.set(slot, (valuesPerSlot.get(slot) ?? new Set()).add(digest))
  }
  const contested = [...valuesPerSlot.values()].filter(d => d.size > 1).length
  const through: Record<string, number> = {}
  const taken: Record<string, number[]> = {}
  for (const n of nodes.values()) { through[n.name] = n.log?.through ?? -1; taken[n.name] = n.taken }
  return { disagreements, chosen, through, taken, contested, messages }
}
