/**
 * What `quotad check-config` checks beyond the file's own shape: the things
 * that would make a node fail at start, or quietly not do what the file says.
 *
 * Errors: a swarm key file (multi-node) that is missing, unreadable, not a
 * swarm key, or readable by group or others; two nodes with the same listen
 * address. Warnings: a glob rule that an earlier glob rule shadows (its keys
 * all match the earlier one, which wins, so it is never used); seeds without
 * a pinned peer id.
 */
import { ConfigError, isQuotadError, type ConfigIssue } from '../errors.js'
import { voterSet } from '../core/share.js'
import { loadSwarmKey } from './swarm-key.js'
import type { ClusterConfig } from './types.js'

export interface DeployCheck {
  errors: ConfigIssue[]
  warnings: ConfigIssue[]
}

export async function checkDeploy (cfg: ClusterConfig): Promise<DeployCheck> {
  const out: DeployCheck = { errors: [], warnings: [] }
  if (cfg.nodes.length > 1) {
    try {
      await loadSwarmKey(cfg.cluster.secretFile)
    } catch (err) {
      if (!isQuotadError(err)) throw err
      const hint = /EACCES/.test(err.message) ? ' (quotad needs read permission on it)' : /ENOENT/.test(err.message) ? ' (create it with "quotad keygen FILE")' : ''
      out.errors.push({ path: 'cluster.secretFile', message: `${err.message}${hint}` })
    }
    const listens = new Map<string, number>()
    cfg.nodes.forEach((n, i) => {
      if (/\/tcp\/0$/.test(n.listen)) return
      const first = listens.get(n.listen)
      if (first !== undefined) out.errors.push({ path: `nodes[${i}].listen`, message: `${n.listen} is also nodes[${first}]'s (${cfg.nodes[first].name}): each node needs its own address` })
      else listens.set(n.listen, i)
    })
    const unpinned = cfg.nodes.map((n, i) => [n, i] as const).filter(([n]) => n.seed && n.peerId === undefined)
    for (const [n, i] of unpinned) {
      out.warnings.push({ path: `nodes[${i}].peerId`, message: `seed ${n.name} has no pinned peer id: its name is bound to the first key that speaks for it (run "quotad peer-id --config FILE --node ${n.name}")` })
    }
    if (cfg.cluster.leases) out.warnings.push(...voterWarnings(cfg))
  }
  // The envoy section's rules come first and match only keys that open with their own names (envoy/keys.ts): the file's `rules` are judged alone, by their own indexes.
  const fileRules = cfg.rules.slice(cfg.envoy?.rules.length ?? 0)
  fileRules.forEach((r, j) => {
    if (!r.match.includes('*')) return
    for (let i = 0; i < j; i++) {
      const earlier = fileRules[i]
      if (earlier.match.includes('*') && shadows(earlier.match, r.match)) {
        out.warnings.push({ path: `rules[${j}].match`, message: `every key of ${JSON.stringify(r.match)} also matches the earlier glob rules[${i}] (${earlier.name}: ${JSON.stringify(earlier.match)}), which wins: rule ${r.name} is never used` })
        break
      }
    }
  })
  return out
}

/** The first `voters` seeds vote on leases (cluster/quorum.ts): an even count breaks ties by the first in name order. */
function voterWarnings (cfg: ClusterConfig): ConfigIssue[] {
  const seeds = cfg.nodes.filter(n => n.seed).map(n => n.name)
  const voters = voterSet(seeds, cfg.cluster.voters)
  const all = voters.length === seeds.length
  const what = all ? 'seeds' : `voters (of the seeds, the first ${voters.length} in name order: cluster.voters)`
  const path = all ? 'nodes' : 'cluster.voters'
  if (voters.length === 2) {
    return [{
      path,
      message: `two ${what}: with leases, ${voters[0]} (first in name order) alone is a quorum and ${voters[1]} is not, so losing ` +
        `${voters[0]} (or a cut between it and the rest) fences every node and stops hard-mode spending until it is back; add a third ${all ? 'seed' : 'voter'} to tolerate either`
    }]
  }
  if (voters.length > 2 && voters.length % 2 === 0) {
    return [{
      path,
      message: `${voters.length} ${what}: an even number of voters; ${voters[0]} (first in name order) weighs 1.5 to break ties, so ` +
        `${voters.length / 2} voters including it are a quorum and ${voters.length / 2} without it are not; an odd number tolerates as many losses either way`
    }]
  }
  return []
}

/**
 * Whether every key glob `later` matches is matched by glob `earlier`. Exact
 * for the forms rules use: `earlier` of the form PREFIX*SUFFIX (one star)
 * shadows `later` when later's text before its first star starts with PREFIX
 * and its text after its last star ends with SUFFIX. Patterns with more stars
 * in `earlier` are not judged (no warning).
 */
export function shadows (earlier: string, later: string): boolean {
  const parts = earlier.split('*')
  if (parts.length !== 2) return false
  const [prefix, suffix] = parts
  const head = later.slice(0, later.indexOf('*'))
  const tail = later.slice(later.lastIndexOf('*') + 1)
  return head.startsWith(prefix) && tail.endsWith(suffix)
}

/** Throw the errors as one ConfigError (E_CONFIG_INVALID), as validation does. */
export function throwIfErrors (check: DeployCheck, source?: string): void {
  if (check.errors.length > 0) throw new ConfigError(check.errors, source)
}

