/**
 * The documents that are a spec stay one (issue 44, item 4):
 * docs/cluster-protocol.md is at most 1,000 lines, its message table names
 * every message type the wire defines, and every relative link in README.md
 * and docs/**.md reaches an existing file (and heading, for a #anchor).
 *
 * The message types are read from the compiled code, not from a copy kept
 * here: the `case` labels of `parseMessage` (every message that carries a
 * `t`), and the decoders of forward-messages.ts (`decodeFwd`, `decodeFans`:
 * the call payloads, which carry none). A type added to the wire without a
 * row in the table fails this test.
 */
import test from 'ava'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseMessage } from '../src/cluster/messages.js'
import * as forwardMessages from '../src/cluster/forward-messages.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SPEC = join(ROOT, 'docs', 'cluster-protocol.md')

/** The message types the compiled wire defines. */
function wireTypes (): string[] {
  const parsed = [...parseMessage.toString().matchAll(/case\s+['"]([a-z]+)['"]\s*:/g)].map(m => m[1])
  const calls = Object.keys(forwardMessages).flatMap(k => {
    const m = /^decode([A-Z][a-z]+)$/.exec(k)
    return m === null ? [] : [m[1].toLowerCase()]
  })
  return [...new Set([...parsed, ...calls])]
}

/** The first cells (`name` in backticks) of the first table after `heading`. */
function tableNames (doc: string, heading: string): string[] {
  const at = doc.indexOf(`\n${heading}\n`)
  if (at < 0) throw new Error(`no heading ${heading}`)
  const names: string[] = []
  let inTable = false
  for (const line of doc.slice(at + heading.length + 2).split('\n')) {
    if (line.startsWith('|')) {
      inTable = true
      const cell = /^\|\s*`([A-Za-z]+)`\s*\|/.exec(line)
      if (cell !== null) names.push(cell[1])
    } else if (inTable) break
  }
  return names
}

function mdFiles (dir: string): string[] {
  return readdirSync(dir).flatMap(f => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? mdFiles(p) : f.endsWith('.md') ? [p] : []
  })
}

/** Text outside fenced blocks and inline code, where links and headings live. */
function prose (text: string): string {
  return text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, m => m.replace(/[[\]()#]/g, ' '))
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors (file: string): Set<string> {
  const out = new Set<string>()
  const seen = new Map<string, number>()
  for (const m of readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const slug = m[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    out.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return out
}

test('docs/cluster-protocol.md is at most 1,000 lines', t => {
  const lines = readFileSync(SPEC, 'utf8').replace(/\n$/, '').split('\n').length
  t.true(lines <= 1000, `${lines} lines`)
  t.true(lines > 100, `${lines} lines: the spec is missing or truncated`)
})

test('the spec\'s message table names every message type the compiled wire defines', t => {
  const types = wireTypes()
  // The reader itself must find something, or this test would pass on nothing.
  t.true(types.includes('gossip') && types.includes('grant') && types.includes('fwd'), `read ${types.join(', ')}`)
  const rows = tableNames(readFileSync(SPEC, 'utf8'), '## Messages')
  t.deepEqual(types.filter(ty => !rows.includes(ty)), [], 'wire types without a row in the message table')
  t.deepEqual(rows.filter(r => !types.includes(r)), [], 'rows of the message table that the wire does not define')
})

test('every relative link in README.md and docs/**/*.md reaches an existing file and heading', t => {
  const files = [join(ROOT, 'README.md'), ...mdFiles(join(ROOT, 'docs'))]
  const broken: string[] = []
  let checked = 0
  for (const file of files) {
    for (const m of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1]
      if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue
      checked++
      const [path, anchor] = href.split('#')
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path))
      const from = file.slice(ROOT.length)
      if (!existsSync(target)) broken.push(`${from}: ${href} (no such file)`)
      else if (anchor !== undefined && target.endsWith('.md') && !anchors(target).has(anchor)) broken.push(`${from}: ${href} (no such heading)`)
    }
  }
  t.true(checked > 100, `${checked} links checked`)
  t.deepEqual(broken, [])
})
