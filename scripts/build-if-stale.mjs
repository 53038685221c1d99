// `npm start` runs this first: it runs `npm run build` only when the compiled
// daemon is missing or older than its sources, so that on a built tree the
// demo's first row comes in seconds, not after a minute-long full rebuild.
//
//   node scripts/build-if-stale.mjs          # build if stale; exit with the build's status
//   node scripts/build-if-stale.mjs --check  # exit 0 if up to date, 1 if stale (prints why)
//
// The daemon's dist is stale when a source under src/ or packages/client/src/
// (or a tsconfig or package.json that shapes the build) is newer than the
// oldest file the build wrote for it, or when a source has no compiled file
// or a compiled file has no source (a file added or deleted since). The
// build writes every output at once (rm -rf dist, then tsc), so the oldest
// output is when that build ran. The tests and benches are not looked at:
// the demo does not run them, and `npm test` always rebuilds.
/* global process, console, URL */
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)))

/**
 * Every file under `dir` whose name ends with `ext`, as paths relative to it,
 * sorted, without those under the subfolder `skip`; none if `dir` is missing.
 */
function files (dir, ext, skip) {
  if (!existsSync(dir)) return []
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter(e => e.isFile() && e.name.endsWith(ext))
    .map(e => relative(dir, join(e.parentPath ?? e.path, e.name)))
    .filter(f => skip === undefined || !f.startsWith(`${skip}/`))
    .sort()
}

const mtime = p => statSync(p).mtimeMs

/**
 * One compiled tree: `src` (.ts) compiled into each of `outs` (.js; an out
 * may hold another out in its subfolder `skip`), with the config files that
 * shape the compile. Returns why it is stale, or null.
 */
function staleness ({ src, outs, configs }) {
  const sources = files(src, '.ts').filter(f => !f.endsWith('.d.ts'))
  const expected = sources.map(f => f.replace(/\.ts$/, '.js'))
  let newestInput = 0
  let newestName = ''
  for (const p of [...sources.map(f => join(src, f)), ...configs]) {
    const m = mtime(p)
    if (m > newestInput) { newestInput = m; newestName = p }
  }
  for (const { dir: out, skip } of outs) {
    const built = files(out, '.js', skip)
    const missing = expected.find(f => !built.includes(f))
    if (missing !== undefined) return `${relative(ROOT, join(out, missing))} is missing`
    const orphan = built.find(f => !expected.includes(f))
    if (orphan !== undefined) return `${relative(ROOT, join(out, orphan))} has no source`
    const oldest = Math.min(...built.map(f => mtime(join(out, f))))
    if (newestInput > oldest) return `${relative(ROOT, newestName)} changed since the last build`
  }
  return null
}

const client = join(ROOT, 'packages/client')
const why = staleness({
  src: join(client, 'src'),
  outs: [{ dir: join(client, 'dist'), skip: 'cjs' }, { dir: join(client, 'dist/cjs') }],
  configs: ['tsconfig.json', 'tsconfig.cjs.json', 'package.json'].map(f => join(client, f))
}) ?? staleness({
  src: join(ROOT, 'src'),
  outs: [{ dir: join(ROOT, 'dist/src') }],
  // The schema too: the build writes its validators as code (src/config/schema-code-gen.ts).
  configs: ['tsconfig.json', 'package.json', 'cluster.schema.json'].map(f => join(ROOT, f))
})

if (process.argv.includes('--check')) {
  if (why !== null) console.log(`stale: ${why}`)
  process.exit(why === null ? 0 : 1)
}
if (why !== null) {
  console.log(`building: ${why}`)
  const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' })
  process.exit(r.status ?? 1)
}
