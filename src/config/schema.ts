/**
 * The cluster file's JSON Schema (`cluster.schema.json`, at the package's
 * root) is the one statement of the file's shape: quotad validates against it
 * with ajv (its code generated from the schema at build time,
 * schema-code-gen.ts), and editors complete and check files with it. This module turns
 * ajv's errors into quotad's issues: one per JSON path, in the path style of
 * the rest of quotad (`rules[2].limit`), with the constraint in words, the
 * bad value, and "did you mean" for a misspelt field or value.
 *
 * What a schema can't say (uniqueness, durations, fields that depend on
 * another field) is checked in validate.ts, on a file that passed this.
 */
import type { ErrorObject, ValidateFunction } from 'ajv'
import type { ConfigIssue } from '../errors.js'
import { DEFS, SCHEMA, type Json } from './schema-source.js'
// ajv's code for the two schemas of schema-source.ts, generated at build time (schema-code-gen.ts): compiling
// them at every start took ajv's import and ~200 ms, a fifth of a node's start on the main thread.
import { validateFile, validateRules } from './schema-code.cjs'

export { SCHEMA }

const validateSchema: ValidateFunction = validateFile
/** The `rules` list alone, for saved rules (the state file, the journal): the same definition as the cluster file's. */
const validateRulesSchema: ValidateFunction = validateRules

const props = (node: Json): string[] => Object.keys((node.properties ?? {}) as Json)

/** The fields each object allows (for tests and for "did you mean"). */
export const FIELDS = {
  top: props(SCHEMA),
  cluster: props(DEFS.cluster),
  node: props(DEFS.node),
  rule: props(DEFS.rule),
  limits: props(DEFS.limits),
  envoy: props(DEFS.envoy),
  envoyDescriptor: props(DEFS.envoyDescriptor),
  envoyRateLimit: props(DEFS.envoyRateLimit)
} as const

/** Field -> the words for its pattern, where a regular expression would say nothing to a user. */
const PATTERN_TEXT: Record<string, string> = {
  name: '1-64 characters from A-Z a-z 0-9 . _ - (rules may also use :)',
  listen: 'a multiaddr like /ip4/127.0.0.1/tcp/7401 (/ip4, /ip6, /dns4, /dns6 or /dns, then /tcp/<port>)',
  per: 'a whole number and a unit: ms, s, m, h or d (like "500ms", "1s", "1d")',
  credit: 'a whole number and a unit: ms, s, m, h or d (like "250ms")',
  peerId: 'a libp2p peer id as `quotad peer-id` prints it (base58, like 12D3KooW...)',
  http: 'HOST:PORT, such as "127.0.0.1:9464"',
  grpc: '"unix:PATH" or a loopback HOST:PORT such as "127.0.0.1:8081"',
  rule: 'a rule name: 1-64 characters from A-Z a-z 0-9 . _ : -',
  socketMode: 'an octal string like "0660" or an integer from 0 to 511 (JSON numbers are decimal: write octal modes as strings)'
}

/** A short rendering of a bad value for messages: `-1`, `"abc"`, `an array`. */
export function describe (v: unknown): string {
  if (v === undefined) return 'nothing'
  if (Array.isArray(v)) return 'an array'
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 77)}...` : v)
  return `an ${typeof v}`
}

/** `rules[2].limit` from a JSON pointer. */
export function pathOf (pointer: string, extra?: string): string {
  let out = ''
  const segs = pointer === '' ? [] : pointer.slice(1).split('/').map(s => s.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (extra !== undefined) segs.push(extra)
  for (const s of segs) {
    if (/^\d+$/.test(s)) out += `[${s}]`
    else if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(s)) out += out === '' ? s : `.${s}`
    else out += `[${JSON.stringify(s)}]`
  }
  return out === '' ? '(root)' : out
}

/** Edit distance, for "did you mean" on misspelt keys; inputs are short. */
function distance (a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = cur
  }
  return prev[b.length]
}

export function nearest (word: string, options: readonly string[]): string | undefined {
  return options.find(k => k.toLowerCase() === word.toLowerCase()) ?? options.find(k => distance(k, word) <= 2)
}

function valueAt (raw: unknown, pointer: string): unknown {
  let at = raw
  for (const s of pointer === '' ? [] : pointer.slice(1).split('/')) {
    if (at === null || typeof at !== 'object') return undefined
    at = (at as Json)[s.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  return at
}

function message (e: ErrorObject, raw: unknown): { path: string, message: string } | null {
  const got = `, got ${describe(valueAt(raw, e.instancePath))}`
  const field = e.instancePath.split('/').pop() ?? ''
  const p = e.params as Record<string, unknown>
  switch (e.keyword) {
    case 'required':
      return { path: pathOf(e.instancePath, String(p.missingProperty)), message: 'is required' }
    case 'additionalProperties': {
      const key = String(p.additionalProperty)
      const parent = (e.parentSchema ?? {}) as Json
      const allowed = props(parent)
      const near = nearest(key, allowed)
      return { path: pathOf(e.instancePath, key), message: near !== undefined ? `unknown field; did you mean ${JSON.stringify(near)}?` : `unknown field; allowed: ${allowed.join(', ')}` }
    }
    case 'type': {
      const t = String(p.type)
      const words = t === 'integer' ? 'a whole number' : t === 'object' ? 'an object' : t === 'array' ? 'an array' : `a ${t}`
      return { path: pathOf(e.instancePath), message: `must be ${words}${got}` }
    }
    case 'minimum': return { path: pathOf(e.instancePath), message: `must be at least ${String(p.limit)}${got}` }
    case 'maximum': return { path: pathOf(e.instancePath), message: `must be at most ${String(p.limit)}${got}` }
    case 'minLength': return { path: pathOf(e.instancePath), message: `must be a non-empty string${got}` }
    case 'maxLength': return { path: pathOf(e.instancePath), message: `must be at most ${String(p.limit)} characters${got}` }
    case 'minItems': return { path: pathOf(e.instancePath), message: `must have at least ${String(p.limit)} entr${p.limit === 1 ? 'y' : 'ies'}` }
    case 'maxItems': return { path: pathOf(e.instancePath), message: `must have at most ${String(p.limit)} entries` }
    case 'pattern': return { path: pathOf(e.instancePath), message: `must be ${PATTERN_TEXT[field] ?? `text matching ${String(p.pattern)}`}${got}` }
    case 'enum': {
      const allowed = (p.allowedValues as unknown[]).map(String)
      const v = valueAt(raw, e.instancePath)
      const near = typeof v === 'string' ? nearest(v, allowed) : undefined
      return { path: pathOf(e.instancePath), message: `must be one of ${allowed.map(a => JSON.stringify(a)).join(', ')}${got}${near !== undefined ? `; did you mean ${JSON.stringify(near)}?` : ''}` }
    }
    case 'oneOf':
      return { path: pathOf(e.instancePath), message: `must be ${PATTERN_TEXT[field] ?? 'one of the allowed forms'}${got}` }
    case 'if':
    case 'not':
    case 'allOf':
      // Conditional rules: `then` errors say what is missing; the field-dependent ones (burst only for
      // token-bucket, onPartition and maxDebt only for soft) are reported on the field by validate.ts.
      return null
    default:
      return { path: pathOf(e.instancePath), message: `${e.message ?? 'is invalid'}${got}` }
  }
}

/**
 * The file's problems by the schema: one issue per path. A oneOf's own error
 * replaces its branches' errors at the same path (it says which forms are
 * allowed).
 */
export function schemaIssues (raw: unknown): ConfigIssue[] {
  return issuesOf(validateSchema, raw)
}

/** The problems of `{ rules: [...] }` by the rule definition alone: paths `rules[i].field`, as in the cluster file. */
export function ruleSchemaIssues (raw: { rules: unknown }): ConfigIssue[] {
  return issuesOf(validateRulesSchema, raw)
}

function issuesOf (validate: ValidateFunction, raw: unknown): ConfigIssue[] {
  if (validate(raw)) return []
  const errors = validate.errors ?? []
  const oneOfPaths = new Set(errors.filter(e => e.keyword === 'oneOf').map(e => e.instancePath))
  const out = new Map<string, string>()
  for (const e of errors) {
    if (oneOfPaths.has(e.instancePath) && e.keyword !== 'oneOf') continue
    const m = message(e, raw)
    if (m !== null && !out.has(m.path)) out.set(m.path, m.message)
  }
  return [...out].map(([path, message]) => ({ path, message }))
}
