/**
 * `@quotad/client` as an app gets it: the packed tarball, installed on its
 * own into an empty project, imported by strict TypeScript programs (an ES
 * module and a CommonJS one) that are compiled and then run against a real
 * daemon, and the README's two example scripts run as they are written. This
 * is what proves the package ships its .d.ts, works from `import` and
 * `require`, exports QuotadError, needs nothing but msgpackr, and that a
 * script which closes its client exits by itself.
 */
import test from 'ava'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { NPM, sh, startQuotad, stop, tempDir, waitForSocket } from './helpers/proc.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const CLIENT_DIR = join(ROOT, 'packages/client')
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc')

/** npm and tsc on a busy machine: a generous deadline. */
const SLOW = 180_000

/**
 * The handles and timers a script holds (its one-shot fs requests left out):
 * before it connects, stdout and stderr (pipes here); after it closes its
 * client, the same again, or the client left something to keep it running.
 */
const HANDLES = `
function handles (): string[] {
  if (!process.stdout.writable || !process.stderr.writable) return ['stdio closed']
  return process.getActiveResourcesInfo().filter(r => !/Req(Callback|Wrap)?$/.test(r)).sort()
}
`

const APP = HANDLES + `
import { QuotadClient, QuotadError, isQuotadError, type Decision } from '@quotad/client'

const socketPath: string = process.argv[2] ?? ''
const before = handles()
const q: QuotadClient = await QuotadClient.connect({ socketPath, timeoutMs: 30_000 })
const first: Decision = await q.acquire('payments', { count: 2 })
const second: Decision = await q.acquire('payments', { count: 2 })
const batch = await q.batch([{ key: 'payments' }, { key: 'nothing-matches' }])
let code = 'none'
try {
  await q.acquire('nothing-matches')
} catch (err) {
  if (err instanceof QuotadError && isQuotadError(err)) code = err.code
}
await q.close()
// A closed client leaves nothing on the event loop (no socket, no timer).
const resources = { before, after: handles() }
console.log(JSON.stringify({ first, second, batch, code, resources }))
`

/** The same from CommonJS: `require` gets the CJS build, and its types. */
const APP_CJS = HANDLES + `
import { QuotadClient, isQuotadError, type Decision } from '@quotad/client'
import { encodeMessage } from '@quotad/client/wire'

async function main (): Promise<void> {
  const frame: Uint8Array = encodeMessage({ id: 1, op: 'ping' }) // the wire subpath, required too
  const before = handles()
  const q = await QuotadClient.connect({ socketPath: process.argv[2] ?? '', timeoutMs: 30_000 })
  const d: Decision = await q.acquire('payments')
  let code = 'none'
  await q.acquire('nothing-matches').catch((err: unknown) => { if (isQuotadError(err)) code = err.code })
  await q.close()
  console.log(JSON.stringify({ d, code, frameBytes: frame.length, resources: { before, after: handles() } }))
}
void main()
`

/** The ```js blocks of the top README's "Using it from an app", as a reader copies them. */
function readmeExamples (): { esm: string, cjs: string } {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const from = readme.indexOf('## Using it from an app')
  const section = readme.slice(from, readme.indexOf('\n## ', from + 1))
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map(m => m[1])
  const cjs = blocks.find(b => b.includes("require('@quotad/client')"))
  const esm = blocks.find(b => b.includes("from '@quotad/client'"))
  if (cjs === undefined || esm === undefined) throw new Error(`README.md: no ESM and CommonJS examples in "Using it from an app" (${blocks.length} js blocks)`)
  return { esm, cjs }
}

test('the packed @quotad/client installs alone, compiles in a strict TS app, and talks to a real daemon', async t => {
  t.timeout(300_000)
  const dir = tempDir()

  // Pack what `npm test` already built (no scripts: a prepare here would
  // rebuild dist under the other tests that import it).
  const packed = await sh(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: CLIENT_DIR, timeoutMs: SLOW })
  t.is(packed.code, 0, packed.stderr)
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string, files: Array<{ path: string }> }>
  const files = info.files.map(f => f.path)
  t.true(files.includes('dist/index.js') && files.includes('dist/index.d.ts'), files.join(' '))
  t.true(files.includes('README.md'))
  t.true(files.includes('dist/cjs/index.js') && files.includes('dist/cjs/index.d.ts') && files.includes('dist/cjs/package.json'), 'the CommonJS build ships')
  t.deepEqual(JSON.parse(readFileSync(join(CLIENT_DIR, 'dist/cjs/package.json'), 'utf8')), { type: 'commonjs' })
  t.deepEqual(files.filter(f => !/^(dist\/.*\.(js|d\.ts)|(dist\/cjs\/)?package\.json|README\.md)$/.test(f)), [], 'only built code, types and the README ship')
  const manifest = JSON.parse(readFileSync(join(CLIENT_DIR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  t.deepEqual(Object.keys(manifest.dependencies), ['msgpackr'])

  // An empty app that installs only the tarball.
  const app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({
    name: 'quota-app', version: '1.0.0', private: true, type: 'module',
    dependencies: { '@quotad/client': `file:${join(dir, info.filename)}` }
  }, null, 2))
  const install = await sh(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: app, timeoutMs: SLOW })
  t.is(install.code, 0, install.stderr)
  const installed = (await sh(NPM, ['ls', '--all', '--parseable'], { cwd: app })).stdout.split('\n').filter(Boolean)
  const names = installed.slice(1).map(p => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length)).sort()
  t.false(names.some(n => n.includes('libp2p')), names.join(' '))
  t.true(names.includes('msgpackr'))

  // Strict TypeScript, NodeNext resolution: the package's exports and types must carry it.
  writeFileSync(join(app, 'app.ts'), APP)
  writeFileSync(join(app, 'app-cjs.cts'), APP_CJS)
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true,
      skipLibCheck: false, outDir: 'out', typeRoots: [join(ROOT, 'node_modules/@types')], types: ['node']
    },
    files: ['app.ts', 'app-cjs.cts']
  }, null, 2))
  const tsc = await sh(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: app, timeoutMs: SLOW })
  t.is(tsc.code, 0, tsc.stdout + tsc.stderr)

  // A one-node daemon, the minimal file, with the rules the README's examples use.
  writeFileSync(join(dir, 'quotad.json'), JSON.stringify({
    nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'data/a' }],
    rules: [
      { name: 'payments', match: 'payments', limit: 3, per: '1h', algorithm: 'sliding-log' },
      { name: 'signups-per-ip', match: 'signup:*', limit: 20, per: '1d', algorithm: 'fixed-window' },
      { name: 'reports', match: 'reports', limit: 300, per: '1m', algorithm: 'fixed-window' }
    ]
  }))
  const socket = join(dir, 'a.sock')
  const proc = startQuotad(['--config', join(dir, 'quotad.json'), '--node', 'a'])
  t.teardown(async () => await stop(proc))
  await waitForSocket(socket, proc)

  const ran = await sh(process.execPath, [join(app, 'out/app.js'), socket], { cwd: app })
  t.is(ran.code, 0, ran.stderr)
  const out = JSON.parse(ran.stdout)
  t.like(out.first, { allowed: true, remaining: 1, limit: 3, rule: 'payments' })
  t.like(out.second, { allowed: false, remaining: 1 })
  t.like(out.batch[0], { allowed: true, remaining: 0 })
  t.is(out.batch[1].error.code, 'E_NO_RULE')
  t.is(out.code, 'E_NO_RULE')
  t.deepEqual(out.resources.after, out.resources.before, 'nothing left on the event loop after close')

  const cjs = await sh(process.execPath, [join(app, 'out/app-cjs.cjs'), socket], { cwd: app })
  t.is(cjs.code, 0, cjs.stderr)
  const viaRequire = JSON.parse(cjs.stdout)
  t.like(viaRequire.d, { allowed: false, limit: 3, rule: 'payments' }, 'the same daemon: payments is spent')
  t.is(viaRequire.code, 'E_NO_RULE')
  t.true(viaRequire.frameBytes > 4, '@quotad/client/wire from require')
  t.deepEqual(viaRequire.resources.after, viaRequire.resources.before)

  // The README's examples, copied as they are. They exit by themselves (sh
  // would kill a hung one at its deadline, and the exit code would say so).
  const { esm, cjs: cjsExample } = readmeExamples()
  writeFileSync(join(app, 'example.mjs'), esm)
  writeFileSync(join(app, 'example.cjs'), cjsExample)
  for (const script of ['example.mjs', 'example.cjs']) {
    const r = await sh(process.execPath, [script], { cwd: app, env: { QUOTAD_SOCKET: socket } })
    t.is(r.code, 0, `${script}: ${r.stderr}`)
    t.is(r.stderr, '', script)
    t.regex(r.stdout, /rule: 'payments'/, script)
  }
})
