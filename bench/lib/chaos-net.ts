/**
 * Real links between the nodes of a chaos run, to cut and spoil: one network
 * namespace per node (`ip netns`), a veth pair from each to one bridge in
 * the root namespace, and iptables rules inside each node's namespace.
 *
 * Why namespaces and not TCP relays on loopback: libp2p's identify tells
 * peers each node's real listen addresses, so a relay in the middle can be
 * bypassed; a namespace has only its own address, so every byte between two
 * nodes crosses the veths and their iptables. The Unix sockets the load uses
 * live in the file system, which namespaces do not separate, so the load
 * never crosses a faulty link.
 *
 * What the kernel here offers: no `netem` qdisc, so no delay or reordering
 * at the packet level. Loss is `-m statistic --mode random -j DROP` (TCP
 * turns it into retransmission stalls of 200 ms and more, which is the delay
 * libp2p sees); duplication is `-j TEE --gateway <peer>` in mangle
 * POSTROUTING (a clone of the packet sent to the peer again; TCP drops the
 * copy, so it tests the stack, not quotad). A partition drops both ways.
 *
 * Each node's rules are rewritten whole with one `iptables-restore` (atomic),
 * from the faults in force, so overlapping faults heal independently.
 */
import { execFile, spawnSync } from 'node:child_process'

export interface NetFault {
  id: number
  kind: 'partition' | 'loss' | 'dup'
  /** partition: the two sides; loss/dup: the node whose links are spoilt. */
  groups?: [string[], string[]]
  node?: string
  probability?: number
}

function sh (cmd: string, args: string[], input?: string): { ok: boolean, out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, timeout: 20_000 })
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error?.message ?? ''}`.trim() }
}

/**
 * Whether network faults can run here, and why not: root, `ip`, and
 * `iptables` (installed from Debian's package when missing).
 */
export function netSupport (): { ok: true } | { ok: false, why: string } {
  if (process.getuid?.() !== 0) return { ok: false, why: 'not root: network namespaces and iptables need root' }
  if (!sh('ip', ['-V']).ok) return { ok: false, why: '`ip` (iproute2) is not installed' }
  if (!sh('iptables', ['-V']).ok) {
    process.stderr.write('chaos: installing iptables (apt-get install -y iptables)\n')
    const r = sh('apt-get', ['install', '-y', '-q', 'iptables'])
    if (!r.ok || !sh('iptables', ['-V']).ok) return { ok: false, why: `iptables is missing and apt-get install failed: ${r.out.slice(-300)}` }
  }
  return { ok: true }
}

export class ChaosNet {
  /** Node name -> its namespace and address. */
  readonly ns = new Map<string, string>()
  readonly ip = new Map<string, string>()
  private readonly bridge: string
  private readonly faults = new Map<number, NetFault>()
  private nextId = 1

  /** `tag`: unique per harness process (its pid), so two harnesses never share a name. */
  constructor (readonly names: readonly string[], private readonly tag: string) {
    this.bridge = `qdb${tag}`
    names.forEach((n, i) => {
      this.ns.set(n, `qd${tag}-${n}`)
      this.ip.set(n, `10.77.0.${i + 2}`)
    })
  }

  /** Create the bridge, namespaces and veths; throws with the failing command's output. */
  async up (): Promise<void> {
    this.down()
    must('ip', ['link', 'add', this.bridge, 'type', 'bridge'])
    must('ip', ['link', 'set', this.bridge, 'up'])
    this.names.forEach((n, i) => {
      const ns = this.ns.get(n) as string
      const host = `qv${this.tag}h${i}`
      const peer = `qv${this.tag}n${i}`
      must('ip', ['netns', 'add', ns])
      must('ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', peer])
      must('ip', ['link', 'set', peer, 'netns', ns])
      must('ip', ['link', 'set', host, 'master', this.bridge])
      must('ip', ['link', 'set', host, 'up'])
      must('ip', ['netns', 'exec', ns, 'ip', 'addr', 'add', `${this.ip.get(n) as string}/24`, 'dev', peer])
      must('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', peer, 'up'])
      must('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up'])
    })
    await this.apply()
  }

  /** Remove everything `up` made (namespaces take their veths with them). Safe to call twice. */
  down (): void {
    for (const ns of this.ns.values()) sh('ip', ['netns', 'del', ns])
    sh('ip', ['link', 'del', this.bridge])
  }

  /** The argv prefix that runs a command in `name`'s namespace. */
  wrap (name: string): string[] {
    return ['ip', 'netns', 'exec', this.ns.get(name) as string]
  }

  async add (f: Omit<NetFault, 'id'>): Promise<number> {
    const id = this.nextId++
    this.faults.set(id, { ...f, id })
    await this.apply()
    return id
  }

  async remove (id: number): Promise<void> {
    if (this.faults.delete(id)) await this.apply()
  }

  async clear (): Promise<void> {
    this.faults.clear()
    await this.apply()
  }

  /**
   * Rewrite every namespace's filter and mangle tables from the faults in force, all namespaces at
   * once. Applies are chained, so an older set of rules never lands after a newer one.
   */
  private applying: Promise<void> = Promise.resolve()
  private async apply (): Promise<void> {
    const next = this.applying.then(async () => await this.applyNow())
    this.applying = next.catch(() => {})
    await next
  }

  private async applyNow (): Promise<void> {
    const faults = [...this.faults.values()]
    await Promise.all(this.names.map(async n => {
      const filter: string[] = []
      const mangle: string[] = []
      for (const f of faults) {
        if (f.kind === 'partition' && f.groups !== undefined) {
          const [a, b] = f.groups
          const other = a.includes(n) ? b : b.includes(n) ? a : []
          for (const o of other) {
            const ip = this.ip.get(o) as string
            filter.push(`-A INPUT -s ${ip} -j DROP`, `-A OUTPUT -d ${ip} -j DROP`)
          }
        } else if (f.node !== undefined && f.probability !== undefined) {
          // The spoilt node's links to every peer, both ways: rules on its side and on each peer's.
          const peers = f.node === n ? this.names.filter(o => o !== n) : [f.node]
          for (const o of peers) {
            const ip = this.ip.get(o) as string
            if (f.kind === 'loss') {
              filter.push(`-A INPUT -s ${ip} -m statistic --mode random --probability ${f.probability} -j DROP`)
            } else if (f.node === n) {
              mangle.push(`-A POSTROUTING -d ${ip} -m statistic --mode random --probability ${f.probability} -j TEE --gateway ${ip}`)
            }
          }
        }
      }
      const rules = [
        '*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...filter, 'COMMIT',
        '*mangle', ':PREROUTING ACCEPT [0:0]', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':POSTROUTING ACCEPT [0:0]', ...mangle, 'COMMIT', ''
      ].join('\n')
      const r = await shAsync('ip', ['netns', 'exec', this.ns.get(n) as string, 'iptables-restore'], rules)
      if (!r.ok) throw new Error(`iptables-restore in ${n}'s namespace failed: ${r.out}\n${rules}`)
    }))
  }
}

/** `sh`, without blocking the event loop: the load's timestamps and the plan's timers go on meanwhile. */
async function shAsync (cmd: string, args: string[], input: string): Promise<{ ok: boolean, out: string }> {
  return await new Promise(resolve => {
    const child = execFile(cmd, args, { timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ ok: err === null, out: `${stdout}${stderr}${err?.message ?? ''}`.trim() })
    })
    child.stdin?.end(input)
  })
}

function must (cmd: string, args: string[]): void {
  const r = sh(cmd, args)
  if (!r.ok) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.out}`)
}
