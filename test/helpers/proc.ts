/**
 * Real-process helpers: write a cluster file into a fresh temp dir, start
 * `quotad` from the compiled CLI, wait for its socket, run `quotactl`.
 *
 * Nothing here bounds how fast the machine is: every wait polls for its
 * condition with a generous deadline (a busy 2-core CI machine can take many
 * seconds to start a node), and a deadline only turns "never" into a failure
 * with a message.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { QuotadClient } from '@quotad/client'

const CLI = fileURLToPath(new URL('../../src/cli/', import.meta.url))
export const QUOTAD = join(CLI, 'quotad.js')
export const QUOTACTL = join(CLI, 'quotactl.js')
export const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm'

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

/**
 * Every quotad a test started and that has not exited. A test worker that ava
 * ends (a timeout) skips the tests' teardowns: without this, its nodes would
 * live on, gossiping, and load the machine for the rest of the run.
 */
const live = new Set<ChildProcess>()
process.once('exit', () => { for (const c of live) c.kill('SIGKILL') })
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  process.once(sig, () => {
    for (const c of live) c.kill('SIGKILL')
    process.kill(process.pid, sig) // the listener is gone: the default action ends the worker as before
  })
}

export function startQuotad (args: string[], env?: Record<string, string>): Proc {
  const child = spawn(process.execPath, [QUOTAD, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...(env === undefined ? {} : { env: { ...process.env, ...env } }) })
  live.add(child)
  child.on('exit', () => live.delete(child))
  let err = ''
  const logTo = process.env.QD_TEST_LOGS
  if (logTo !== undefined) appendFileSync(join(logTo, `quotad-${String(child.pid)}.log`), `${new Date().toISOString()} ${JSON.stringify(args)} ${JSON.stringify(env ?? {})}\n`)
  child.stderr?.on('data', (b: Buffer) => {
    err += b.toString()
    if (logTo !== undefined) appendFileSync(join(logTo, `quotad-${String(child.pid)}.log`), b)
  })
  child.stdout?.on('data', () => {})
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>(resolve => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
  return { child, stderr: () => err, exited }
}

/** Deadline for anything a real process has to do (start, answer, log, exit). */
export const PROC_DEADLINE_MS = 60_000

/** A client with a timeout long enough for a loaded machine (the default is 5 s). */
export async function connect (socketPath: string): Promise<QuotadClient> {
  return await QuotadClient.connect({ socketPath, timeoutMs: 30_000 })
}

/**
 * Poll `f` until it returns something other than undefined/false, and return
 * that; after `ms`, throw with `what` and the last value `describe` gives.
 */
export async function eventually<T> (what: string, f: () => Promise<T | undefined | false> | T | undefined | false, ms = PROC_DEADLINE_MS, describe?: () => unknown): Promise<T> {
  const deadline = Date.now() + ms
  while (true) {
    const v = await f()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) {
      const last = describe === undefined ? '' : `; last seen: ${JSON.stringify(describe())}`
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last}`)
    }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

export async function waitForSocket (socketPath: string, proc?: Proc, ms = PROC_DEADLINE_MS): Promise<void> {
  const deadline = Date.now() + ms
  while (true) {
    if (proc !== undefined && proc.child.exitCode !== null) throw new Error(`quotad exited early: ${proc.stderr()}`)
    try {
      const c = await QuotadClient.connect({ socketPath, timeoutMs: 5000, reconnect: false })
      await c.ping()
      await c.close()
      return
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
}

export async function waitForLog (proc: Proc, text: string, ms = PROC_DEADLINE_MS): Promise<void> {
  const deadline = Date.now() + ms
  while (!proc.stderr().includes(text)) {
    if (Date.now() > deadline) throw new Error(`no "${text}" in log: ${proc.stderr()}`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

export interface Run { code: number, stdout: string, stderr: string }

/** Run a CLI to completion; it is killed (code 99 or a signal) only after `timeoutMs`, a deadline, not a speed bound. */
export async function run (script: string, args: string[], { timeoutMs = PROC_DEADLINE_MS } = {}): Promise<Run> {
  return await sh(process.execPath, [script, ...args], { timeoutMs })
}

/**
 * Run any command (npm, git, node with a script) to completion, in `cwd`,
 * with `env` over this process's environment; killed (code 99 or a signal)
 * only after `timeoutMs`.
 */
export async function sh (cmd: string, args: string[], { cwd, env, timeoutMs = PROC_DEADLINE_MS }: { cwd?: string, env?: Record<string, string>, timeoutMs?: number } = {}): Promise<Run> {
  return await new Promise(resolve => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, ...(env === undefined ? {} : { env: { ...process.env, ...env } }) }, (err, stdout, stderr) => {
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
