/** What machine a bench ran on, printed first so results can be compared. */
import os from 'node:os'

export interface MachineInfo {
  cpu: string
  cores: number
  totalMemGiB: number
  node: string
  kernel: string
  platform: string
  loadavg: number[]
}

export function machineInfo (): MachineInfo {
  const cpus = os.cpus()
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    totalMemGiB: Math.round(os.totalmem() / 2 ** 30 * 10) / 10,
    node: process.version,
    kernel: os.release(),
    platform: `${os.platform()} ${os.arch()}`,
    loadavg: os.loadavg().map(x => Math.round(x * 100) / 100)
  }
}

export function printMachine (m: MachineInfo): void {
  process.stdout.write(`machine: ${m.cpu}, ${m.cores} cores, ${m.totalMemGiB} GiB RAM, node ${m.node}, kernel ${m.kernel} (${m.platform}), loadavg ${m.loadavg.join(' ')}\n`)
}
