/**
 * The cluster file's `envoy` section and the nodes' `grpc` addresses, past
 * the schema (schema.ts already checked every field's type and range): what
 * a schema can't say, and the compiled form the Rate Limit Service reads.
 *
 * Each descriptor with a limit becomes a quotad rule of its own, so Envoy's
 * limits are counted by the same conserved tokens (and, in hard mode, held
 * under the same cap across the cluster) as any other rule. `rate_limit` makes
 * a fixed-window, hard rule, envoyproxy/ratelimit's semantics; `rule` copies a
 * rule of the file's, for any algorithm or mode. The rule is named after the
 * descriptor's place, `envoy:<domain>.<descriptor>...` (indexes), and matches
 * only keys that open with that name (src/envoy/keys.ts).
 */
import { isIPv4 } from 'node:net'
import { resolve } from 'node:path'
import { describe } from './schema.js'
import type { EnvoyConfig, EnvoyDescriptor, EnvoyLimit, EnvoyUnit, RuleConfig } from './types.js'
import { descriptorPattern } from '../envoy/keys.js'

type Obj = Record<string, unknown>

/** Where validation reports a problem: one message per JSON path, the first one kept. */
export interface IssueSink {
  has: (path: string) => boolean
  add: (path: string, message: string) => void
}

export const UNIT_MS: Record<EnvoyUnit, number> = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000, week: 604_800_000 }
const UNIT_PER: Record<EnvoyUnit, string> = { second: '1s', minute: '1m', hour: '1h', day: '1d', week: '7d' }
/** Longest rule name (the rules' own pattern), which bounds how deep descriptors nest. */
const MAX_RULE_NAME = 64
/** Linux sun_path is 108 bytes including the terminating NUL. */
const MAX_UNIX_PATH_BYTES = 107

export const GRPC_TEXT = '"unix:PATH" or a loopback HOST:PORT such as "127.0.0.1:8081", "[::1]:8081" or "localhost:8081"'

/** The gRPC address with a unix path made absolute against `baseDir`, or why it is unusable. */
export function grpcAddress (text: string, baseDir: string): { address: string } | { issue: string } {
  if (text.startsWith('unix:')) {
    const p = text.slice(5).replace(/^\/\/(?=\/)/, '')
    if (p === '' || p.includes('\0')) return { issue: `must be ${GRPC_TEXT}, got ${describe(text)}` }
    const abs = resolve(baseDir, p)
    if (Buffer.byteLength(abs) > MAX_UNIX_PATH_BYTES) {
      return { issue: `resolves to ${JSON.stringify(abs)}, ${Buffer.byteLength(abs)} bytes; Unix socket paths are limited to ${MAX_UNIX_PATH_BYTES} bytes` }
    }
    return { address: `unix:${abs}` }
  }
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text)
  if (m === null) return { issue: `must be ${GRPC_TEXT}, got ${describe(text)}` }
  const [, host, port] = m
  // The RLS answers whoever connects, with no authentication: a sidecar's port stays on loopback.
  const loopback = host === 'localhost' || host === '[::1]' || (isIPv4(host) && host.startsWith('127.'))
  if (!loopback) return { issue: `must listen on loopback (127.0.0.0/8, [::1] or localhost) or a Unix socket: the Rate Limit Service has no authentication, got ${describe(text)}` }
  if (Number(port) > 65_535) return { issue: `has TCP port ${port}; ports are 0 to 65535` }
  return { address: text }
}

function unitOf (perMs: number): EnvoyUnit | undefined {
  return (Object.keys(UNIT_MS) as EnvoyUnit[]).find(u => UNIT_MS[u] === perMs)
}

const objects = (v: unknown): Obj[] => Array.isArray(v) ? v.filter((x): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x)) : []

/**
 * Compile a schema-checked `envoy` section. Returns the section and the
 * rules its descriptors make; every problem goes to `issues` with its path.
 */
export function envoySection (raw: Obj, rules: readonly RuleConfig[], maxKeyBytes: number, issues: IssueSink): { envoy: EnvoyConfig, rules: RuleConfig[] } {
  const made: RuleConfig[] = []
  const paths: EnvoyConfig['rules'] = []
  const taken = new Map(rules.map((r, i) => [r.name, i]))
  const seenDomains = new Map<string, number>()

  const descriptor = (o: Obj, path: string, indexes: number[], domain: string, trail: EnvoyDescriptor[]): EnvoyDescriptor => {
    const key = String(o.key)
    const value = typeof o.value === 'string' && o.value !== '' ? o.value : undefined
    const d: EnvoyDescriptor = { key, ...(value === undefined ? {} : { value }), ...(value?.includes('*') === true ? { wildcard: value.split('*') } : {}), descriptors: [] }
    const name = `envoy:${indexes.join('.')}`
    const rl = o.rate_limit as Obj | undefined
    if (rl !== undefined && o.rule !== undefined) issues.add(`${path}.rule`, 'give either rate_limit or rule, not both')
    let rule: RuleConfig | undefined
    if (rl !== undefined) {
      const unit = typeof rl.unit === 'string' ? rl.unit.toLowerCase() as EnvoyUnit : undefined
      if (rl.unlimited === true) {
        if (unit !== undefined) issues.add(`${path}.rate_limit.unit`, 'must not be given with "unlimited": true (as envoyproxy/ratelimit)')
        d.limit = 'unlimited'
      } else if (unit === undefined) {
        issues.add(`${path}.rate_limit.unit`, 'is required (second, minute, hour, day or week), unless "unlimited": true')
      } else if (typeof rl.requests_per_unit !== 'number') {
        issues.add(`${path}.rate_limit.requests_per_unit`, 'is required (0 denies every request), unless "unlimited": true')
      } else {
        const limit = rl.requests_per_unit
        const base: Omit<EnvoyLimit, 'rule'> = { requestsPerUnit: limit, unit, shadowMode: o.shadow_mode === true, ...(typeof rl.name === 'string' ? { name: rl.name } : {}) }
        if (limit === 0) {
          d.limit = { rule: null, ...base }
        } else {
          d.limit = { rule: name, ...base }
          rule = { name, match: '', limit, perMs: UNIT_MS[unit], per: UNIT_PER[unit], algorithm: 'fixed-window', burst: limit, mode: 'hard', onPartition: 'local-share', maxDebt: limit }
        }
      }
    } else if (typeof o.rule === 'string') {
      const at = taken.get(o.rule)
      const ref = at === undefined ? undefined : rules[at]
      if (ref === undefined) {
        issues.add(`${path}.rule`, `no rule named ${JSON.stringify(o.rule)} in rules (rules: ${rules.map(r => r.name).join(', ')})`)
      } else {
        rule = { ...ref, name, match: '' }
        const unit = unitOf(ref.perMs)
        d.limit = { rule: name, requestsPerUnit: ref.limit, ...(unit === undefined ? {} : { unit }), shadowMode: o.shadow_mode === true }
      }
    }
    const here = [...trail, d]
    if (rule !== undefined) {
      if (name.length > MAX_RULE_NAME) issues.add(path, `is nested too deep: its rule name ${name} is longer than ${MAX_RULE_NAME} characters`)
      const clash = taken.get(name)
      if (clash !== undefined) issues.add(path, `makes rule ${JSON.stringify(name)}, which is also the name of rules[${clash}]; rename that rule`)
      rule.match = descriptorPattern(name, domain, here)
      // A glob rule's maxKeys bounds its keys; an exact one has one key, so a copied maxKeys would only confuse.
      if (!rule.match.includes('*')) {
        delete rule.maxKeys
        if (Buffer.byteLength(rule.match) > maxKeyBytes) issues.add(path, `makes the key ${describe(rule.match)}, longer than limits.maxKeyBytes (${maxKeyBytes}); raise that limit or shorten the domain, keys or values`)
      }
      made.push(rule)
      paths.push({ name, path })
    }
    d.descriptors = children(o.descriptors, path, indexes, domain, here)
    return d
  }

  /** The descriptors under `path`; two with the same key and value are one too many (as envoyproxy/ratelimit). */
  const children = (list: unknown, path: string, indexes: number[], domain: string, trail: EnvoyDescriptor[]): EnvoyDescriptor[] => {
    const seen = new Map<string, string>()
    return objects(list).map((c, i) => {
      const at = `${path}.descriptors[${i}]`
      const child = descriptor(c, at, [...indexes, i], domain, trail)
      const id = JSON.stringify([child.key, child.value ?? null])
      const first = seen.get(id)
      if (first !== undefined) issues.add(at, `duplicate descriptor (key ${JSON.stringify(child.key)}${child.value === undefined ? '' : `, value ${JSON.stringify(child.value)}`}), already at ${first}`)
      else seen.set(id, at)
      return child
    })
  }

  const domains = objects(raw.domains).map((o, di) => {
    const path = `envoy.domains[${di}]`
    const domain = String(o.domain)
    const first = seenDomains.get(domain)
    if (first !== undefined) issues.add(`${path}.domain`, `duplicate domain ${JSON.stringify(domain)}, already used by envoy.domains[${first}]`)
    else seenDomains.set(domain, di)
    return { domain, descriptors: children(o.descriptors, path, [di], domain, []) }
  })
  return { envoy: { responseHeaders: raw.responseHeaders === true, domains, rules: paths }, rules: made }
}
