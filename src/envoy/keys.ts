/**
 * The quotad key of an Envoy descriptor, and the `match` pattern of the rule
 * a config descriptor makes. Like envoyproxy/ratelimit's cache key, a key
 * is the domain and every entry of the request's descriptor; unlike it, it
 * opens with the name of the rule that counts it:
 *
 *     envoy:0.1.2|<domain>|<key>=<value>|<key>=<value>
 *
 * Why the rule name: a glob `*` matches any run of characters, `|` included,
 * so two descriptors' patterns could both match one key, and the first glob
 * in file order would win, not the descriptor the request matched. Rule names
 * hold no `|`, so a key matches its own rule's pattern and no other. Domain,
 * keys and values are escaped (`%`, `|`, `=`, `*` as %XX), so a value Envoy
 * sends can neither end an entry early nor act as a wildcard.
 */

const ESCAPE = /[%|=*]/g
const HEX: Record<string, string> = { '%': '%25', '|': '%7C', '=': '%3D', '*': '%2A' }

export function escapePart (s: string): string {
  return s.replace(ESCAPE, c => HEX[c])
}

export interface Entry { key: string, value: string }

/** The key a request's descriptor is counted under, once it matched the descriptor of `rule`. */
export function descriptorKey (rule: string, domain: string, entries: readonly Entry[]): string {
  let out = `${rule}|${escapePart(domain)}`
  for (const e of entries) out += `|${escapePart(e.key)}=${escapePart(e.value)}`
  return out
}

/**
 * The match pattern of `rule` for the config path `entries` (a value
 * undefined: any value; `wildcard`: the value's literal parts around `*`).
 */
export function descriptorPattern (rule: string, domain: string, entries: ReadonlyArray<{ key: string, value?: string, wildcard?: string[] }>): string {
  let out = `${rule}|${escapePart(domain)}`
  for (const e of entries) {
    const value = e.wildcard !== undefined ? e.wildcard.map(escapePart).join('*') : e.value === undefined ? '*' : escapePart(e.value)
    out += `|${escapePart(e.key)}=${value}`
  }
  return out
}

/** Whether `value` has the shape of a wildcard value's `parts` (the literal text around its stars). */
export function wildcardMatch (parts: readonly string[], value: string): boolean {
  const first = parts[0]
  const last = parts[parts.length - 1]
  const fixed = parts.reduce((n, p) => n + p.length, 0)
  if (value.length < fixed || !value.startsWith(first) || !value.endsWith(last)) return false
  let at = first.length
  const end = value.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i], at)
    if (found < 0 || found + parts[i].length > end) return false
    at = found + parts[i].length
  }
  return true
}
