// The numbers issue 44 (item 6) tracks, from dependency-cruiser's graph of
// src (the same config as `npm run lint`, type imports included):
//
//   node scripts/import-numbers.mjs
//
// - the largest import cycle in src/cluster: the largest set of files that
//   all reach each other through their imports (a strongly connected
//   component), with `import type` and without it. Target: 6 files at most.
// - how many files in src import the machine, src/cluster/cluster-core.ts.
//   Target: 3 at most.
//
// The lint rules (.dependency-cruiser.cjs) hold what is true today; these
// numbers are the distance still to go, so they are printed, not enforced.
/* global process, console, URL */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const out = execFileSync(process.execPath, ['node_modules/dependency-cruiser/bin/dependency-cruise.mjs', 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
  { cwd: ROOT, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
const modules = JSON.parse(out).modules

/** Strongly connected components of more than one file, largest first, among the files `keep` accepts. */
function cycles (keep, withTypes) {
  const graph = new Map()
  for (const m of modules) {
    if (!keep(m.source)) continue
    graph.set(m.source, m.dependencies
      .filter(d => keep(d.resolved) && (withTypes || !d.dependencyTypes.includes('type-only')))
      .map(d => d.resolved))
  }
  // Tarjan's algorithm.
  let next = 0
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const found = []
  const visit = v => {
    index.set(v, next); low.set(v, next); next++
    stack.push(v); onStack.add(v)
    for (const w of graph.get(v)) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v), low.get(w))) } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
    }
    if (low.get(v) !== index.get(v)) return
    const c = []
    let w
    do { w = stack.pop(); onStack.delete(w); c.push(w) } while (w !== v)
    if (c.length > 1) found.push(c.sort())
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found.sort((a, b) => b.length - a.length)
}

const inCluster = f => /^src\/cluster\/[^/]+$/.test(f)
for (const withTypes of [true, false]) {
  const c = cycles(inCluster, withTypes)
  console.log(`largest import cycle in src/cluster, ${withTypes ? 'type imports included' : 'without type imports'}: ${c[0]?.length ?? 0} files (target: 6 at most)`)
  if (c.length > 0) console.log(`  ${c[0].join(' ')}`)
  if (c.length > 1) console.log(`  the other cycles: ${c.slice(1).map(x => x.length).join(', ')} files`)
}
const machine = modules.filter(m => m.source.startsWith('src/') && m.dependencies.some(d => d.resolved === 'src/cluster/cluster-core.ts')).map(m => m.source).sort()
console.log(`files in src that import src/cluster/cluster-core.ts: ${machine.length} (target: 3 at most)`)
console.log(`  ${machine.join(' ')}`)
