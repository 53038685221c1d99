/**
 * The floor: the round trip of a bare Node-to-Node Unix-socket echo, with no
 * quotad code on either side. A child process echoes every chunk it reads;
 * this process sends one small frame (the size of an acquire request), waits
 * for the echo, and sends the next. Whatever quotad's c=1 latency is above
 * this, quotad (client, codec, server, limiter) adds; what is below it no
 * socket design in Node can reach on this machine.
 *
 * Run: node dist/bench/floor.js [--ms 3000] [--trials 3]
 * Compare with both processes on one CPU: taskset -c 0 node dist/bench/floor.js
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { cpuMs, machineBusyMs } from './lib/cpu.js'
import { machineInfo, printMachine } from './lib/machine.js'
import { LatencyLog, median } from './lib/stats.js'
import { fmtInt, fmtPct, fmtUs, renderTable } from './lib/table.js'

/** An acquire frame is about this big (4-byte header + msgpack map). */
const FRAME_BYTES = 40

function serve (socketPath: string): void {
  const server = net.createServer(socket => {
    socket.setNoDelay?.(true)
    socket.on('data', chunk => socket.write(chunk))
    socket.on('error', () => {})
  })
  server.listen(socketPath, () => process.stdout.write('ready\n'))
  process.on('SIGTERM', () => process.exit(0))
}

async function trial (socket: net.Socket, ms: number, serverPid: number): Promise<{ rps: number, p50: number, p99: number, p999: number, other: number }> {
  const frame = Buffer.alloc(FRAME_BYTES, 7)
  const lat = new LatencyLog()
  let got = 0
  let wake: (() => void) | null = null
  const onData = (b: Buffer): void => {
    got += b.length
    if (got >= FRAME_BYTES && wake !== null) { const w = wake; wake = null; w() }
  }
  socket.on('data', onData)
  const m0 = machineBusyMs()
  const c0 = cpuMs(null) + cpuMs(serverPid)
  const start = performance.now()
  const deadline = start + ms
  let n = 0
  while (true) {
    const t0 = performance.now()
    if (t0 >= deadline) break
    got = 0
    const p = new Promise<void>(resolve => { wake = resolve })
    socket.write(frame)
    await p
    lat.push(performance.now() - t0)
    n++
  }
  const elapsed = performance.now() - start
  socket.off('data', onData)
  const s = lat.summary()
  const other = Math.max(0, ((machineBusyMs() - m0) - (cpuMs(null) + cpuMs(serverPid) - c0)) / elapsed * 100)
  return { rps: n / elapsed * 1000, p50: s.p50Us, p99: s.p99Us, p999: s.p999Us, other }
}

async function main (): Promise<void> {
  const { values } = parseArgs({
    options: { serve: { type: 'string' }, ms: { type: 'string' }, trials: { type: 'string' } }
  })
  if (values.serve !== undefined) return serve(values.serve)
  const ms = Number(values.ms ?? 3000)
  const trials = Number(values.trials ?? 3)
  printMachine(machineInfo())
  const dir = mkdtempSync(path.join(os.tmpdir(), 'quotad-floor-'))
  const socketPath = path.join(dir, 'echo.sock')
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', socketPath], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    await once(child.stdout as NodeJS.ReadableStream, 'data')
    const socket = net.connect(socketPath)
    await once(socket, 'connect')
    await trial(socket, 300, child.pid as number) // warm-up
    const rows = []
    for (let t = 0; t < trials; t++) {
      rows.push(await trial(socket, ms, child.pid as number))
      await sleep(10)
    }
    socket.destroy()
    process.stdout.write(`\nbare Node Unix-socket echo, ${FRAME_BYTES}-byte frames, one in flight (c=1), ${trials} x ${ms} ms:\n`)
    process.stdout.write(renderTable(['trial', 'round trips/s', 'p50 µs', 'p99 µs', 'p999 µs', 'other CPU'], [
      ...rows.map((r, i) => [String(i + 1), fmtInt(r.rps), fmtUs(r.p50), fmtUs(r.p99), fmtUs(r.p999), fmtPct(r.other)]),
      ['median', fmtInt(median(rows.map(r => r.rps))), fmtUs(median(rows.map(r => r.p50))), fmtUs(median(rows.map(r => r.p99))),
        fmtUs(median(rows.map(r => r.p999))), fmtPct(median(rows.map(r => r.other)))]
    ]))
  } finally {
    child.kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch(err => {
  process.stderr.write(`floor bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exitCode = 1
})
