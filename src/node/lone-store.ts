/**
 * A lone node's durable state (a cluster file with one node: no cluster
 * layer, no peers to hold its books). Two files in its dataDir:
 *
 * - `quotad-lone.json`, rewritten atomically: `running` while a process
 *   serves, or a clean stop's snapshot (`stopped`): every key with tokens
 *   spent and not yet back, how many, and when the last of them returns.
 * - `quotad-spends.log`, appended: spending recorded ahead of use
 *   (spend-ahead.ts), one JSON line `[key, n, fromCal, untilCal]` each.
 *
 * Start: after a clean stop, each saved key is spent again (`forceSpend`) up
 * to what was outstanding, so its tokens come back on the rule's schedule
 * from now, never earlier than they would have (a fixed window continues
 * exactly). After a crash (the file says `running`), every line of the log
 * whose tokens may not have returned yet counts as spent now. Then the log
 * is rewritten with what is outstanding (a second crash keeps it), the file
 * says `running` again, and only then does the node serve.
 *
 * Only `hard` rules are recorded ahead; a `soft` rule's spending is saved at
 * a clean stop and lost in a crash (soft mode prefers availability).
 *
 * Writes are group-committed: the lines asked for while one write is on its
 * way go together in the next (one fsync). A failed write reserves nothing;
 * the requests that waited for it are denied, and the next one tries again.
 */
import { fdatasyncSync, writeSync } from 'node:fs'
import { open, readFile, rm, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import type { Calendar } from '../core/calendar.js'
import type { CompiledRule } from '../core/rules.js'
import type { Limiter } from '../core/limiter.js'
import { horizonAt } from '../cluster/recovery.js'
import { ErrorCodes, QuotadError } from '../errors.js'
import { writeFileAtomic } from '../util/atomic-file.js'
import { readIfExists, writeJsonFile } from '../util/json-file.js'
import { batchOf, lifeEnd, SpendAhead, type SpendLine } from './spend-ahead.js'

export const LONE_FILE = 'quotad-lone.json'
export const SPENDS_LOG = 'quotad-spends.log'
/** A log longer than this many lines, and than 4x its last checkpoint, is rewritten (compacted). */
const COMPACT_MIN_LINES = 10_000

/** A clean stop's key: [key, rule hash, tokens outstanding, calendar ms by which all have returned]. */
type SavedLoneKey = [key: string, hash: string, n: number, at: number]

interface LoneFile {
  version: 1
  node: string
  status: 'running' | 'stopped'
  stoppedAt?: number
  keys?: SavedLoneKey[]
}

export interface LoneStoreOptions {
  dataDir: string
  node: string
  limiter: Limiter
  calendar: Calendar
  /** Bound on how far a crashed process's calendar ran ahead of this one's (cluster.maxClockSkewMs). */
  skewMs: number
}

/** What a start restored, for the log line. */
export interface LoneRestored {
  kind: 'first-start' | 'clean-restart' | 'unclean-restart'
  keys: number
  tokens: number
}

export class LoneStore {
  readonly ahead = new SpendAhead()
  readonly restored: LoneRestored
  private readonly opts: LoneStoreOptions
  private fh: FileHandle | null
  private queue: SpendLine[] = []
  private flushing: Promise<void> | null = null
  private readonly waiters = new Map<string, Array<(ok: boolean) => void>>()
  private lines = 0
  private checkpointLines = 0
  private closed = false
  /** Writes that failed (status). */
  failures = 0

  private constructor (opts: LoneStoreOptions, fh: FileHandle, restored: LoneRestored, lines: number) {
    this.opts = opts
    this.fh = fh
    this.restored = restored
    this.lines = this.checkpointLines = lines
  }

  /** Restore the limiter from the data directory, and record that a process serves. Before the socket opens. */
  static async open (opts: LoneStoreOptions, nowMs: number): Promise<LoneStore> {
    const file = join(opts.dataDir, LONE_FILE)
    const text = await readIfExists(opts.dataDir, LONE_FILE, ErrorCodes.STATE_UNREADABLE)
    const saved = text === undefined ? undefined : parseLoneFile(text, file, opts.node)
    const cal = opts.calendar.at(nowMs)
    let restored: LoneRestored
    if (saved === undefined) restored = { kind: 'first-start', keys: 0, tokens: 0 }
    else if (saved.status === 'stopped') restored = spendAgain(opts.limiter, (saved.keys ?? []).filter(k => k[3] > cal).map(k => [k[0], k[2]]), nowMs, 'clean-restart')
    else restored = spendAgain(opts.limiter, await unreturned(opts, cal), nowMs, 'unclean-restart')
    // What is outstanding now goes first in the new log: a crash before the next clean stop keeps it.
    const checkpoint = outstanding(opts.limiter, nowMs, cal)
    await writeFileAtomic(opts.dataDir, SPENDS_LOG, linesText(checkpoint))
    await writeJsonFile(opts.dataDir, LONE_FILE, { version: 1, node: opts.node, status: 'running' } satisfies LoneFile, ErrorCodes.STATE_UNWRITABLE)
    const fh = await open(join(opts.dataDir, SPENDS_LOG), 'a', 0o600)
    return new LoneStore(opts, fh, restored, checkpoint.length)
  }

  /** Whether spending of `rule` must be recorded ahead. */
  guards (rule: CompiledRule): boolean {
    return rule.config.mode === 'hard' && !this.closed
  }

  /**
   * Ask for a reservation of `key` (spend-ahead.ts `want`) if it needs one;
   * `then` hears whether it is durable (at once with `true` when none was
   * needed and none is on its way).
   */
  reserve (key: string, rule: CompiledRule, count: number, nowCal: number, untilCal: number, then?: (ok: boolean) => void): void {
    const line = this.ahead.want(key, rule, count, nowCal, untilCal)
    if (line !== null) {
      this.queue.push(line)
      this.kick()
    }
    if (then === undefined) return
    if (!this.ahead.waiting(key)) { then(true); return }
    const list = this.waiters.get(key)
    if (list === undefined) this.waiters.set(key, [then])
    else list.push(then)
  }

  /**
   * A reservation for `key` written now, synchronously (one write and one
   * fdatasync on the event loop): for a batch item, which must be answered
   * at once, of a key with none on disk. Returns whether it is durable.
   */
  reserveNow (key: string, rule: CompiledRule, count: number, nowCal: number): boolean {
    if (this.fh === null || this.closed) return false
    const line: SpendLine = [key, batchOf(rule, count), nowCal, lifeEnd(rule, nowCal)]
    try {
      writeSync(this.fh.fd, JSON.stringify(line) + '\n')
      fdatasyncSync(this.fh.fd)
    } catch {
      this.failures++
      return false
    }
    this.lines++
    this.ahead.durable(line)
    return true
  }

  /** Drop expired reservations (the sweeper). */
  sweep (nowCal: number): void {
    this.ahead.sweep(nowCal)
  }

  /**
   * A clean stop: the snapshot replaces the log. After the socket stopped
   * (no more decisions), before the lock goes.
   */
  async close (nowMs: number): Promise<void> {
    if (this.closed) return
    this.closed = true
    while (this.flushing !== null) await this.flushing
    await this.fh?.close()
    this.fh = null
    const cal = this.opts.calendar.at(nowMs)
    const keys: SavedLoneKey[] = []
    for (const ks of this.opts.limiter.states()) {
      ks.bucket.advance(nowMs)
      const n = ks.bucket.outstanding(nowMs)
      if (n > 0) keys.push([ks.key, ks.rule.hash, n, cal + ks.bucket.resetIn(nowMs)])
    }
    await writeJsonFile(this.opts.dataDir, LONE_FILE, { version: 1, node: this.opts.node, status: 'stopped', stoppedAt: cal, keys } satisfies LoneFile, ErrorCodes.STATE_UNWRITABLE)
    await rm(join(this.opts.dataDir, SPENDS_LOG), { force: true })
  }

  status (): Record<string, unknown> {
    return { start: this.restored.kind, restoredKeys: this.restored.keys, restoredTokens: this.restored.tokens, reservedKeys: this.ahead.keys, writeFailures: this.failures }
  }

  private kick (): void {
    if (this.flushing !== null || this.queue.length === 0) return
    this.flushing = this.flush().finally(() => {
      this.flushing = null
      this.kick()
    })
  }

  private async flush (): Promise<void> {
    const batch = this.queue
    this.queue = []
    let ok = false
    try {
      if (this.fh === null) throw new Error('the spends log is closed')
      await this.fh.appendFile(linesText(batch))
      await this.fh.datasync()
      ok = true
      this.lines += batch.length
    } catch {
      this.failures++
    }
    for (const line of batch) {
      if (ok) this.ahead.durable(line)
      else this.ahead.failed(line)
      const list = this.waiters.get(line[0])
      this.waiters.delete(line[0])
      for (const w of list ?? []) w(ok)
    }
    if (ok && this.lines > Math.max(COMPACT_MIN_LINES, 4 * this.checkpointLines)) await this.compact().catch(() => { this.failures++ })
  }

  /** Rewrite the log as what is outstanding plus the live reservations (between flushes: nothing is appended meanwhile). */
  private async compact (): Promise<void> {
    const now = this.opts.limiter.now
    const cal = this.opts.calendar.at(now)
    const lines = [...outstanding(this.opts.limiter, now, cal), ...this.ahead.lines(cal)]
    await writeFileAtomic(this.opts.dataDir, SPENDS_LOG, linesText(lines))
    await this.fh?.close()
    this.fh = await open(join(this.opts.dataDir, SPENDS_LOG), 'a', 0o600)
    this.lines = this.checkpointLines = lines.length
  }
}

/** Every key with tokens out now, as lines spent now: [key, n, cal, cal]. */
function outstanding (limiter: Limiter, nowMs: number, cal: number): SpendLine[] {
  const out: SpendLine[] = []
  for (const ks of limiter.states()) {
    ks.bucket.advance(nowMs)
    const n = ks.bucket.outstanding(nowMs)
    if (n > 0) out.push([ks.key, n, cal, cal])
  }
  return out
}

/** Spend each key's tokens again now (down to none held), so they return on the rule's schedule from now. */
function spendAgain (limiter: Limiter, keys: Iterable<[string, number]>, nowMs: number, kind: LoneRestored['kind']): LoneRestored {
  const r: LoneRestored = { kind, keys: 0, tokens: 0 }
  for (const [key, n] of keys) {
    if (limiter.ruleFor(key) === undefined) continue // its rule is gone: dropped, as a reload drops it
    const ks = limiter.existing(key) ?? limiter.keyState(key, 1, nowMs)
    const before = ks.bucket.held
    ks.bucket.forceSpend(n, nowMs)
    r.keys++
    r.tokens += before - ks.bucket.held
  }
  return r
}

/**
 * After a crash: per key, the tokens of every line that a spend within its
 * window (at the latest at `untilCal`, or now if earlier) may not have
 * returned by now. A torn last line (the crash cut its write) is ignored: its
 * reservation was never durable, so nothing was spent from it.
 */
async function unreturned (opts: LoneStoreOptions, cal: number): Promise<Map<string, number>> {
  const file = join(opts.dataDir, SPENDS_LOG)
  let text = ''
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new QuotadError(ErrorCodes.STATE_UNREADABLE, `cannot read ${file}: ${(err as Error).message}`, { file })
  }
  const sums = new Map<string, number>()
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] === '') continue
    const line = parseLine(lines[i])
    if (line === null) {
      if (i >= lines.length - 2) continue // the torn last line
      throw new QuotadError(ErrorCodes.STATE_INVALID, `${file}: line ${i + 1} is not [key, n, fromCal, untilCal]. Do not delete the file (a crash's spending would be forgotten)`, { file, path: `line ${i + 1}` })
    }
    const [key, n, from, until] = line
    const rule = opts.limiter.ruleFor(key)
    if (rule === undefined) continue
    // A reservation for a window that had not begun (on the crashed process's calendar, at most skew ahead): unspent.
    if (from > cal + opts.skewMs) continue
    if (horizonAt(rule.config, Math.min(until, cal), opts.skewMs) <= cal) continue
    sums.set(key, (sums.get(key) ?? 0) + n)
  }
  return sums
}

function parseLine (text: string): SpendLine | null {
  let v: unknown
  try { v = JSON.parse(text) } catch { return null }
  if (!Array.isArray(v) || v.length !== 4 || typeof v[0] !== 'string') return null
  for (let i = 1; i < 4; i++) if (typeof v[i] !== 'number' || !Number.isFinite(v[i]) || (v[i] as number) < 0) return null
  return v as SpendLine
}

function parseLoneFile (text: string, file: string, node: string): LoneFile {
  const bad = (what: string): QuotadError => new QuotadError(ErrorCodes.STATE_INVALID, `${file} is not a valid lone-node state file: ${what}`, { file })
  let v: unknown
  try { v = JSON.parse(text) } catch (err) { throw bad(`not JSON (${(err as Error).message})`) }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('must be an object')
  const o = v as Record<string, unknown>
  if (o.version !== 1) throw bad(`version must be 1, got ${JSON.stringify(o.version)}`)
  if (o.node !== node) throw bad(`it belongs to node ${JSON.stringify(o.node)}, not ${JSON.stringify(node)} (a data directory per node)`)
  if (o.status !== 'running' && o.status !== 'stopped') throw bad(`status must be "running" or "stopped", got ${JSON.stringify(o.status)}`)
  const keys = o.keys ?? []
  if (!Array.isArray(keys)) throw bad('keys must be a list')
  keys.forEach((k: unknown, i) => {
    if (!Array.isArray(k) || k.length !== 4 || typeof k[0] !== 'string' || typeof k[1] !== 'string' ||
      typeof k[2] !== 'number' || !Number.isFinite(k[2]) || k[2] < 0 || typeof k[3] !== 'number' || !Number.isFinite(k[3])) {
      throw bad(`keys[${i}] must be [key, ruleHash, tokens, calMs]`)
    }
  })
  return { version: 1, node, status: o.status, keys: keys as SavedLoneKey[] }
}

/** The log's text for `lines`: one JSON line each. */
function linesText (lines: SpendLine[]): string {
  return lines.length === 0 ? '' : lines.map(l => JSON.stringify(l)).join('\n') + '\n'
}
