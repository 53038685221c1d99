/**
 * `npm start` as a newcomer meets it: the demo says at once that it loops
 * until Ctrl-C and what each column of its rows is, prints rows, and stops
 * its nodes on Ctrl-C; and `npm start` skips the minute-long rebuild on a
 * built tree (scripts/build-if-stale.mjs), so the first row comes in seconds.
 * (The 3-node run with --duration is in top.test.ts.)
 */
import test from 'ava'
import { spawn } from 'node:child_process'
import { cpSync, existsSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { eventually, QUOTACTL, run, tempDir, writeCluster } from './helpers/proc.js'

const DEMO = join(dirname(QUOTACTL), 'demo.js')
const ROOT = fileURLToPath(new URL('../../', import.meta.url))

test('the demo says it loops until Ctrl-C and what its columns are, prints rows, and stops on SIGINT', async t => {
  t.timeout(180_000)
  const dir = tempDir()
  const { file, socket } = writeCluster(dir, [{ name: 'pay', match: 'pay', limit: 50, per: '1s', algorithm: 'token-bucket' }])
  const child = spawn(process.execPath, [DEMO, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b: Buffer) => { out += b.toString() })
  child.stderr.on('data', (b: Buffer) => { err += b.toString() })
  const exited = new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))
  // SIGTERM, not SIGKILL: the demo then stops its nodes (they run in their own process group).
  t.teardown(async () => { if (child.exitCode === null && child.signalCode === null) { child.kill('SIGTERM'); await exited } })

  // Rows "1s" and "2s": it goes on by itself after its first row.
  await eventually('the demo\'s second row', () => /^\s+2s\s+\d+\/\d+/m.test(out), 120_000, () => ({ out, err }))
  t.is(child.exitCode, null, 'still running')
  const legend = out.slice(0, out.indexOf('\ntime '))
  t.regex(legend, /over and over until you press Ctrl-C/)
  t.regex(legend, /^ {2}ok\/deny {2}requests the node allowed \/ denied in that second$/m)
  t.regex(legend, /^ {2}held {5}tokens of the key that the node holds now; \* = tight/m)
  t.regex(legend, /^ {2}in\/out {3}tokens its peers moved to it \/ it moved to its peers in that second$/m)
  t.regex(legend, /under "cluster" the same summed over every node/)
  t.regex(out, /^time {2}-- a -+ -- cluster --\n\s+ok\/deny\s+held\s+in\/out\s+ok\/deny\s+held$/m, 'the header names those columns')
  // One node: ok/deny, held (whole tokens; * = tight; ? = no status in time), in/out, then the cluster's ok/deny and held.
  t.regex(out, /^\s+1s\s+\d+\/\d+\s+(?:\d+\*?|\?)\s+(?:\d+\/\d+|\?)\s+\d+\/\d+\s+(?:\d+|\?)$/m)

  child.kill('SIGINT')
  t.is(await exited, 0, err)
  t.regex(out, /stopped every node\n$/)
  t.false(existsSync(socket), 'the node removed its socket')
})

/** `node scripts/build-if-stale.mjs --check` in `root`: its exit code and what it printed. */
async function check (root: string): Promise<{ code: number, out: string }> {
  const r = await run(join(root, 'scripts/build-if-stale.mjs'), ['--check'])
  return { code: r.code, out: r.stdout + r.stderr }
}

test('npm start rebuilds only a stale tree: a changed, added or deleted source, or a changed tsconfig or schema', async t => {
  // A copy of what the check reads. Its sources are dated well before the
  // build, so the test does not depend on what was edited here since.
  const root = tempDir()
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  const inputs = ['src', 'tsconfig.json', 'package.json', 'cluster.schema.json', 'packages/client/src', 'packages/client/tsconfig.json', 'packages/client/tsconfig.cjs.json', 'packages/client/package.json']
  for (const p of ['scripts/build-if-stale.mjs', 'dist/src', 'packages/client/dist', ...inputs]) {
    cpSync(join(ROOT, p), join(root, p), { recursive: true, preserveTimestamps: true })
  }
  const past = new Date('2020-01-01T00:00:00Z')
  for (const p of inputs) {
    const at = join(root, p)
    const files = statSync(at).isDirectory() ? readdirSync(at, { recursive: true }).map(f => join(at, String(f))) : [at]
    for (const f of files) utimesSync(f, past, past)
  }
  t.deepEqual(await check(root), { code: 0, out: '' }, 'a built tree is up to date')

  const later = new Date(Date.now() + 60_000)
  const touched = async (p: string): Promise<{ code: number, out: string }> => {
    utimesSync(join(root, p), later, later)
    const r = await check(root)
    utimesSync(join(root, p), past, past)
    return r
  }
  t.deepEqual(await touched('src/cli/demo.ts'), { code: 1, out: 'stale: src/cli/demo.ts changed since the last build\n' })
  t.like(await touched('packages/client/src/client.ts'), { code: 1 })
  t.like(await touched('packages/client/tsconfig.cjs.json'), { code: 1 })
  t.like(await touched('tsconfig.json'), { code: 1 })
  t.deepEqual(await touched('cluster.schema.json'), { code: 1, out: 'stale: cluster.schema.json changed since the last build\n' }, 'the build writes the schema\'s validators as code')
  t.deepEqual(await check(root), { code: 0, out: '' }, 'up to date again')

  rmSync(join(root, 'packages/client/dist/cjs/index.js'))
  t.deepEqual(await check(root), { code: 1, out: 'stale: packages/client/dist/cjs/index.js is missing\n' })
  cpSync(join(ROOT, 'packages/client/dist/cjs/index.js'), join(root, 'packages/client/dist/cjs/index.js'), { preserveTimestamps: true })
  rmSync(join(root, 'src/clock.ts'))
  t.deepEqual(await check(root), { code: 1, out: 'stale: dist/src/clock.js has no source\n' })
})
