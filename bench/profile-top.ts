/**
 * Summarize V8 .cpuprofile files (from `node --cpu-prof`): the functions with
 * the most self time, and the project's own functions (src/) with their self
 * and total (inclusive) time. Total time counts a function once per sample
 * even when it recurses.
 *
 * Run: node dist/bench/profile-top.js FILE_OR_DIR... [--top N] [--filter TEXT]
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'

interface CallFrame { functionName: string, url: string, lineNumber: number, columnNumber: number }
interface ProfileNode { id: number, callFrame: CallFrame, children?: number[], hitCount?: number }
interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

interface Fn { name: string, where: string, self: number, total: number }

function files (args: string[]): string[] {
  const out: string[] = []
  for (const a of args) {
    if (statSync(a).isDirectory()) {
      for (const f of readdirSync(a)) if (f.endsWith('.cpuprofile')) out.push(path.join(a, f))
    } else {
      out.push(a)
    }
  }
  return out
}

function location (cf: CallFrame): string {
  if (cf.url === '') return '(native)'
  let u = cf.url.replace(/^file:\/\//, '')
  const i = u.indexOf('/dist/')
  if (i >= 0) u = u.slice(i + 1)
  else if (u.includes('/node_modules/')) u = u.slice(u.lastIndexOf('/node_modules/') + 1)
  return `${u}:${cf.lineNumber + 1}`
}

function summarize (p: Profile): { fns: Fn[], totalMs: number } {
  const byId = new Map(p.nodes.map(n => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  // Time per sample: the delta to the next sample (V8's own convention).
  const timeOfNode = new Map<number, number>()
  for (let i = 0; i < p.samples.length; i++) {
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000
    timeOfNode.set(p.samples[i], (timeOfNode.get(p.samples[i]) ?? 0) + dt)
  }
  const fns = new Map<string, Fn>()
  const keyOf = (cf: CallFrame): string => `${cf.functionName}@${cf.url}:${cf.lineNumber}:${cf.columnNumber}`
  const fnOf = (cf: CallFrame): Fn => {
    const k = keyOf(cf)
    let f = fns.get(k)
    if (f === undefined) {
      f = { name: cf.functionName === '' ? '(anonymous)' : cf.functionName, where: location(cf), self: 0, total: 0 }
      fns.set(k, f)
    }
    return f
  }
  let totalMs = 0
  for (const [id, ms] of timeOfNode) {
    totalMs += ms
    const leaf = byId.get(id) as ProfileNode
    fnOf(leaf.callFrame).self += ms
    const seen = new Set<string>()
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = (byId.get(cur) as ProfileNode).callFrame
      const k = keyOf(cf)
      if (seen.has(k)) continue
      seen.add(k)
      fnOf(cf).total += ms
    }
  }
  return { fns: [...fns.values()], totalMs }
}

function main (): void {
  const argv = process.argv.slice(2)
  let top = 25
  let filter = '/src/'
  const paths: string[] = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--top') top = Number(argv[++i])
    else if (argv[i] === '--filter') filter = argv[++i] ?? ''
    else paths.push(argv[i])
  }
  if (paths.length === 0) {
    process.stdout.write('usage: node dist/bench/profile-top.js FILE_OR_DIR... [--top N] [--filter TEXT]\n')
    process.exit(2)
  }
  for (const f of files(paths)) {
    const { fns, totalMs } = summarize(JSON.parse(readFileSync(f, 'utf8')) as Profile)
    const pct = (ms: number): string => `${(ms / totalMs * 100).toFixed(1).padStart(5)}%`
    const idle = fns.filter(x => x.name === '(idle)').reduce((a, x) => a + x.self, 0)
    process.stdout.write(`\n${f}: ${(totalMs / 1000).toFixed(1)} s sampled, ${pct(idle)} idle\n`)
    process.stdout.write(`\ntop ${top} by self time (all code):\n`)
    for (const x of [...fns].sort((a, b) => b.self - a.self).slice(0, top)) {
      process.stdout.write(`  ${pct(x.self)}  ${x.name}  ${x.where}\n`)
    }
    process.stdout.write(`\ntop ${top} matching "${filter}" by total time (self / total):\n`)
    for (const x of fns.filter(x => x.where.includes(filter)).sort((a, b) => b.total - a.total).slice(0, top)) {
      process.stdout.write(`  ${pct(x.self)} / ${pct(x.total)}  ${x.name}  ${x.where}\n`)
    }
  }
}

main()
