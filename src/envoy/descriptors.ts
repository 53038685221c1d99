/**
 * Which limit a request's descriptor gets: envoyproxy/ratelimit's lookup
 * (config_impl.go GetLimit) over the compiled `envoy` section. Entry by
 * entry, a level offers the descriptor with the entry's key and exact value,
 * else the first whose wildcard value fits, else the one with the key and no
 * value; a limit applies only where the request's entries end. No match, or
 * a request longer or shorter than any limited path: no limit (answered OK).
 */
import type { EnvoyConfig, EnvoyDescriptor, EnvoyLimit } from '../config/types.js'
import { wildcardMatch, type Entry } from './keys.js'

interface Level {
  /** key -> exact value -> descriptor */
  exact: Map<string, Map<string, Node>>
  /** key -> descriptors with a wildcard value, in file order */
  wild: Map<string, Node[]>
  /** key -> the descriptor with no value */
  any: Map<string, Node>
}

interface Node {
  d: EnvoyDescriptor
  next: Level | null
}

function level (list: readonly EnvoyDescriptor[]): Level {
  const l: Level = { exact: new Map(), wild: new Map(), any: new Map() }
  for (const d of list) {
    const node: Node = { d, next: d.descriptors.length > 0 ? level(d.descriptors) : null }
    if (d.value === undefined) {
      l.any.set(d.key, node)
    } else if (d.wildcard !== undefined) {
      const list = l.wild.get(d.key) ?? []
      list.push(node)
      l.wild.set(d.key, list)
    } else {
      const byValue = l.exact.get(d.key) ?? new Map<string, Node>()
      byValue.set(d.value, node)
      l.exact.set(d.key, byValue)
    }
  }
  return l
}

export type Found = EnvoyLimit | 'unlimited' | undefined

export class DescriptorIndex {
  private readonly domains = new Map<string, Level>()

  constructor (config: EnvoyConfig | undefined) {
    for (const d of config?.domains ?? []) this.domains.set(d.domain, level(d.descriptors))
  }

  /** Whether the config has this domain (an unknown one is answered OK, as envoyproxy/ratelimit does). */
  has (domain: string): boolean {
    return this.domains.has(domain)
  }

  lookup (domain: string, entries: readonly Entry[]): Found {
    let at = this.domains.get(domain)
    for (let i = 0; i < entries.length && at !== undefined; i++) {
      const { key, value } = entries[i]
      const node = at.exact.get(key)?.get(value) ??
        at.wild.get(key)?.find(n => wildcardMatch(n.d.wildcard as string[], value)) ??
        at.any.get(key)
      if (node === undefined) return undefined
      if (i === entries.length - 1) return node.d.limit
      at = node.next ?? undefined
    }
    return undefined
  }
}
