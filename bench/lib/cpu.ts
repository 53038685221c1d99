/**
 * CPU time of a process over a trial, to tell which side of the socket was
 * the bottleneck: on a 2-core machine the load generator (with the client)
 * and the server each get about one core, and whichever saturates first sets
 * the throughput. Our own process is read with process.cpuUsage(); another
 * process from /proc/<pid>/stat (utime + stime, in clock ticks).
 */
import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'

let ticksPerSecond: number | null = null

function clockTicks (): number {
  if (ticksPerSecond === null) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })
    const n = Number(r.stdout?.trim())
    ticksPerSecond = Number.isFinite(n) && n > 0 ? n : 100
  }
  return ticksPerSecond
}

/** CPU ms used so far by `pid` (null: our own process); NaN if unreadable. */
export function cpuMs (pid: number | null): number {
  if (pid === null || pid === process.pid) {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces; fields are counted after its ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const utime = Number(rest[11])
    const stime = Number(rest[12])
    return (utime + stime) / clockTicks() * 1000
  } catch {
    return NaN
  }
}

/**
 * Busy CPU ms of the whole machine so far, summed over cores (user, nice,
 * system, irq, softirq, steal from /proc/stat); NaN if unreadable. Minus our
 * two processes, it shows other load competing with a trial.
 */
export function machineBusyMs (): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]
    const f = line.trim().split(/\s+/).slice(1).map(Number)
    const busy = f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] ?? 0)
    return busy / clockTicks() * 1000
  } catch {
    return NaN
  }
}
