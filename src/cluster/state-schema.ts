/**
 * Validation of the state file (durable-state.ts), field by field, with the
 * JSON path of the first bad field. A state file decides how many tokens a
 * node starts with, so nothing in it is taken on trust: a string where a
 * number belongs (`"held": "1e3"`), a negative count, a key entry that is
 * not an object, or a file written by another node or cluster is refused
 * with E_STATE_INVALID, and the node does not start. Deleting the file is
 * never the fix (a first start materializes shares again): the message says
 * what to write instead.
 *
 * Version 1 files (quotad 0.1) are read as version 2 without rules: a
 * restart with the same rules works; one with a changed rule is refused
 * (there is no record of the old rule to carry the keys over from).
 */
import type { RuleConfig } from '../config/types.js'
import { parseSavedRules } from '../config/validate.js'
import { ConfigError, ErrorCodes, QuotadError } from '../errors.js'
import type { KnownDebt, SavedKey, SavedState } from './durable-state.js'
import type { RuleStamp } from './rule-change.js'
import { FieldError as Bad, parseJsonDoc } from '../util/json-file.js'

type Obj = Record<string, unknown>

/** Token counts are far below 2^53 (config caps stocks at 1e12). */
const MAX_TOKENS = 1e15


function obj (v: unknown, path: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Bad(path, 'must be an object')
  return v as Obj
}

function str (v: unknown, path: string, max = 4096): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) throw new Bad(path, `must be a non-empty string of at most ${max} characters`)
  return v
}

function count (v: unknown, path: string, max = MAX_TOKENS): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > max) throw new Bad(path, `must be a number in [0, ${max}], got ${JSON.stringify(v)}`)
  return v
}

function int (v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new Bad(path, `must be a whole number >= 0, got ${JSON.stringify(v)}`)
  return v
}

function time (v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || Math.abs(v) > 1e15) throw new Bad(path, `must be a time in ms, got ${JSON.stringify(v)}`)
  return v
}

function bool (v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') throw new Bad(path, `must be true or false, got ${JSON.stringify(v)}`)
  return v
}

function oneOf<T extends string> (v: unknown, allowed: readonly T[], path: string): T {
  if (typeof v !== 'string' || !allowed.includes(v as T)) throw new Bad(path, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`)
  return v as T
}

function arr (v: unknown, path: string, max: number): unknown[] {
  if (!Array.isArray(v)) throw new Bad(path, 'must be an array')
  if (v.length > max) throw new Bad(path, `has more than ${max} entries`)
  return v
}

function key (v: unknown, path: string): SavedKey {
  const o = obj(v, path)
  return {
    key: str(o.key, `${path}.key`, 65_536),
    rule: str(o.rule, `${path}.rule`, 64),
    ruleHash: str(o.ruleHash, `${path}.ruleHash`, 64),
    initial: count(o.initial, `${path}.initial`),
    held: count(o.held ?? 0, `${path}.held`),
    tokens: count(o.tokens, `${path}.tokens`),
    at: time(o.at, `${path}.at`),
    burn: count(o.burn ?? 0, `${path}.burn`)
  }
}

/** The saved rules, by the cluster file's own definition (config/validate.ts): no field can be dropped here. */
function rules (v: unknown): RuleConfig[] {
  try {
    return parseSavedRules(v)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    const first = err.issues[0]
    throw new Bad(first.path, first.message)
  }
}

function stamps (v: unknown, path: string): Record<string, RuleStamp[]> {
  const o = obj(v, path)
  const out: Record<string, RuleStamp[]> = {}
  for (const [name, list] of Object.entries(o)) {
    out[name] = arr(list, `${path}.${name}`, 64).map((s, i) => {
      const p = `${path}.${name}[${i}]`
      const so = obj(s, p)
      return { hash: str(so.hash, `${p}.hash`, 64), stock: count(so.stock, `${p}.stock`), glob: bool(so.glob, `${p}.glob`) }
    })
  }
  return out
}

function debt (v: unknown, path: string): KnownDebt {
  const o = obj(v, path)
  const owed = obj(o.owed, `${path}.owed`)
  const out: Record<string, number> = {}
  for (const [k, n] of Object.entries(owed)) out[k] = count(n, `${path}.owed[${JSON.stringify(k)}]`)
  return { node: str(o.node, `${path}.node`, 64), epoch: str(o.epoch, `${path}.epoch`, 64), inc: int(o.inc, `${path}.inc`), owed: out }
}

function state (raw: unknown): SavedState {
  const o = obj(raw, '$')
  if (o.version !== 1 && o.version !== 2) throw new Bad('version', `must be 1 or 2, got ${JSON.stringify(o.version)}`)
  const status = oneOf(o.status, ['running', 'stopped'] as const, 'status')
  const s: SavedState = {
    version: 2,
    node: str(o.node, 'node', 64),
    cluster: str(o.cluster, 'cluster', 64),
    status,
    allocate: bool(o.allocate, 'allocate'),
    incarnation: o.version === 1 ? 0 : int(o.incarnation, 'incarnation'),
    epoch: o.version === 1 ? 'v1' : str(o.epoch, 'epoch', 64),
    carries: o.version === 1 ? [] : arr(o.carries, 'carries', 64).map((e, i) => str(e, `carries[${i}]`, 64)),
    keys: arr(o.keys, 'keys', 10_000_000).map((k, i) => key(k, `keys[${i}]`))
  }
  if (o.attestKept !== undefined) {
    if (o.attestKept !== true) throw new Bad('attestKept', `must be true when present, got ${JSON.stringify(o.attestKept)}`)
    s.attestKept = true
  }
  if (o.carriedAtRisk !== undefined) s.carriedAtRisk = int(o.carriedAtRisk, 'carriedAtRisk')
  if (o.stoppedAt !== undefined) s.stoppedAt = time(o.stoppedAt, 'stoppedAt')
  if (o.rules !== undefined) s.rules = rules(arr(o.rules, 'rules', 10_000))
  if (o.transitions !== undefined) s.transitions = stamps(o.transitions, 'transitions')
  if (o.debts !== undefined) s.debts = arr(o.debts, 'debts', 100_000).map((d, i) => debt(d, `debts[${i}]`))
  if (o.inherited !== undefined) {
    s.inherited = arr(o.inherited, 'inherited', 4096).map((e, i) => {
      const path = `inherited[${i}]`
      if (!Array.isArray(e) || e.length !== 3) throw new Bad(path, 'must be [node, inc, calMs]')
      return [str(e[0], `${path}[0]`, 64), int(e[1], `${path}[1]`), time(e[2], `${path}[2]`)] as [string, number, number]
    })
  }
  if (o.estates !== undefined) {
    s.estates = arr(o.estates, 'estates', 4096).map((e, i) => {
      const path = `estates[${i}]`
      if (!Array.isArray(e) || e.length !== 3) throw new Bad(path, 'must be [node, home, inc]')
      return [str(e[0], `${path}[0]`, 64), str(e[1], `${path}[1]`, 64), int(e[2], `${path}[2]`)] as [string, string, number]
    })
  }
  if (o.marks !== undefined) {
    s.marks = arr(o.marks, 'marks', 1_000_000).map((e, i) => {
      const path = `marks[${i}]`
      if (!Array.isArray(e) || e.length !== 3) throw new Bad(path, 'must be [giver, giverEpoch, seq]')
      return [str(e[0], `${path}[0]`, 256), str(e[1], `${path}[1]`, 256), int(e[2], `${path}[2]`)] as [string, string, number]
    })
  }
  if (o.peers !== undefined) {
    s.peers = arr(o.peers, 'peers', 1_000_000).map((e, i) => {
      const path = `peers[${i}]`
      if (!Array.isArray(e) || e.length !== 4) throw new Bad(path, 'must be [node, epoch, key, tokens]')
      const n = e[3]
      if (typeof n !== 'number' || !Number.isFinite(n) || Math.abs(n) > MAX_TOKENS) throw new Bad(`${path}[3]`, `must be a number of tokens, got ${JSON.stringify(n)}`)
      return [str(e[0], `${path}[0]`, 256), str(e[1], `${path}[1]`, 256), str(e[2], `${path}[2]`), n] as [string, string, string, number]
    })
  }
  if (o.incs !== undefined) {
    s.incs = arr(o.incs, 'incs', 1_000_000).map((e, i) => {
      const path = `incs[${i}]`
      if (!Array.isArray(e) || e.length !== 3) throw new Bad(path, 'must be [node, epoch, inc]')
      return [str(e[0], `${path}[0]`, 256), str(e[1], `${path}[1]`, 256), int(e[2], `${path}[2]`)] as [string, string, number]
    })
  }
  return s
}

/** What to put in place of a bad file so the node starts with nothing (its tokens stay stranded). */
export function emptyStateHint (node: string, cluster: string): string {
  return JSON.stringify({ version: 2, node, cluster, status: 'running', allocate: false, incarnation: 1_000_000, epoch: 'reset', carries: [], keys: [] })
}

/** Parse and validate a state file's text. Throws E_STATE_INVALID naming the field. */
export function parseState (text: string, file: string): SavedState {
  return parseJsonDoc(text, state, (path, what) => invalid(file, path, what))
}

function invalid (file: string, path: string, what: string): QuotadError {
  return new QuotadError(ErrorCodes.STATE_INVALID,
    `${file} is not a valid quotad state file: ${what}. Do not delete it (a first start would materialize this node's shares again). ` +
    'To start the node with nothing (its tokens stay stranded), write ' + emptyStateHint('NODE', 'CLUSTER') + ' with this node\'s and cluster\'s names',
    { file, path })
}

/** Refuse a state file written by another node or cluster. */
export function checkOwner (s: SavedState, file: string, node: string, cluster: string): void {
  if (s.node !== node) throw invalid(file, 'node', `it belongs to node "${s.node}", not "${node}" (a data directory per node)`)
  if (s.cluster !== cluster) throw invalid(file, 'cluster', `it belongs to cluster "${s.cluster}", not "${cluster}"`)
}
