/**
 * Real-process helpers: write a cluster file into a fresh temp dir, start
 * `quotad` from the compiled CLI, wait for its socket, run `quotactl`.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { QuotadClient } from '../../src/client/index.js'

const CLI = fileURLToPath(new URL('../../src/cli/', import.meta.url))
export const QUOTAD = join(CLI, 'quotad.js')
export const QUOTACTL = join(CLI, 'quotactl.js')

export function tempDir (): string {
  return mkdtempSync(join(tmpdir(), 'qd-'))
}

/** Write a one-node cluster file with the given rules; returns its path and socket. */
export function writeCluster (dir: string, rules: unknown[], extra: Record<string, unknown> = {}): { file: string, socket: string } {
  const file = join(dir, 'cluster.json')
  const socket = join(dir, 'a.sock')
  writeFileSync(file, JSON.stringify({
    cluster: { name: 'test', secretFile: 'swarm.key' },
    nodes: [{ name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data/a' }],
    rules,
    ...extra
  }, null, 2))
  return { file, socket }
}

export interface Proc {
  child: ChildProcess
  stderr: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

export function startQuotad (args: string[]): Proc {
  const child = spawn(process.execPath, [QUOTAD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let err = ''
  child.stderr?.on('data', (b: Buffer) => { err += b.toString() })
  child.stdout?.on('data', () => {})
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>(resolve => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
  return { child, stderr: () => err, exited }
}

export async function waitForSocket (socketPath: string, proc?: Proc, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (true) {
    if (proc !== undefined && proc.child.exitCode !== null) throw new Error(`quotad exited early: ${proc.stderr()}`)
    try {
      const c = await QuotadClient.connect({ socketPath, timeoutMs: 1000, reconnect: false })
      await c.ping()
      await c.close()
      return
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
}

export async function waitForLog (proc: Proc, text: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!proc.stderr().includes(text)) {
    if (Date.now() > deadline) throw new Error(`no "${text}" in log: ${proc.stderr()}`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

export interface Run { code: number, stdout: string, stderr: string }

export async function run (script: string, args: string[]): Promise<Run> {
  return await new Promise(resolve => {
    execFile(process.execPath, [script, ...args], { timeout: 20_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 99
      resolve({ code, stdout, stderr })
    })
  })
}

export async function stop (proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return
  proc.child.kill('SIGTERM')
  await proc.exited
}
