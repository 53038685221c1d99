/**
 * `@quotad/client` as an app gets it: the packed tarball, installed on its
 * own into an empty project, imported by a strict TypeScript program that is
 * compiled and then run against a real daemon. This is what proves the
 * package ships its .d.ts, exports QuotadError, and needs nothing but
 * msgpackr.
 */
import test from 'ava'
import { execFile } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startQuotad, stop, tempDir, waitForSocket } from './helpers/proc.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const CLIENT_DIR = join(ROOT, 'packages/client')
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc')
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm'

interface Out { code: number, stdout: string, stderr: string }

async function sh (cmd: string, args: string[], cwd: string): Promise<Out> {
  return await new Promise(resolve => {
    execFile(cmd, args, { cwd, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 99, stdout, stderr })
    })
  })
}

const APP = `
import { QuotadClient, QuotadError, isQuotadError, type Decision } from '@quotad/client'

const socketPath: string = process.argv[2] ?? ''
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
console.log(JSON.stringify({ first, second, batch, code }))
`

test('the packed @quotad/client installs alone, compiles in a strict TS app, and talks to a real daemon', async t => {
  t.timeout(300_000)
  const dir = tempDir()

  // Pack what `npm test` already built (no scripts: a prepare here would
  // rebuild dist under the other tests that import it).
  const packed = await sh(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], CLIENT_DIR)
  t.is(packed.code, 0, packed.stderr)
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string, files: Array<{ path: string }> }>
  const files = info.files.map(f => f.path)
  t.true(files.includes('dist/index.js') && files.includes('dist/index.d.ts'), files.join(' '))
  t.true(files.includes('README.md'))
  t.deepEqual(files.filter(f => !/^(dist\/.*\.(js|d\.ts)|package\.json|README\.md)$/.test(f)), [], 'only built code, types and the README ship')
  const manifest = JSON.parse(readFileSync(join(CLIENT_DIR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  t.deepEqual(Object.keys(manifest.dependencies), ['msgpackr'])

  // An empty app that installs only the tarball.
  const app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({
    name: 'quota-app', version: '1.0.0', private: true, type: 'module',
    dependencies: { '@quotad/client': `file:${join(dir, info.filename)}` }
  }, null, 2))
  const install = await sh(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], app)
  t.is(install.code, 0, install.stderr)
  const installed = (await sh(NPM, ['ls', '--all', '--parseable'], app)).stdout.split('\n').filter(Boolean)
  const names = installed.slice(1).map(p => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length)).sort()
  t.false(names.some(n => n.includes('libp2p')), names.join(' '))
  t.true(names.includes('msgpackr'))

  // Strict TypeScript, NodeNext resolution: the package's exports and types must carry it.
  writeFileSync(join(app, 'app.ts'), APP)
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true,
      skipLibCheck: false, outDir: 'out', typeRoots: [join(ROOT, 'node_modules/@types')], types: ['node']
    },
    files: ['app.ts']
  }, null, 2))
  const tsc = await sh(process.execPath, [TSC, '-p', 'tsconfig.json'], app)
  t.is(tsc.code, 0, tsc.stdout + tsc.stderr)

  // A one-node daemon, the minimal file.
  writeFileSync(join(dir, 'quotad.json'), JSON.stringify({
    nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'data/a' }],
    rules: [{ name: 'payments', match: 'payments', limit: 3, per: '1h', algorithm: 'sliding-log' }]
  }))
  const socket = join(dir, 'a.sock')
  const proc = startQuotad(['--config', join(dir, 'quotad.json'), '--node', 'a'])
  t.teardown(async () => await stop(proc))
  await waitForSocket(socket, proc)

  const ran = await sh(process.execPath, [join(app, 'out/app.js'), socket], app)
  t.is(ran.code, 0, ran.stderr)
  const out = JSON.parse(ran.stdout)
  t.like(out.first, { allowed: true, remaining: 1, limit: 3, rule: 'payments' })
  t.like(out.second, { allowed: false, remaining: 1 })
  t.like(out.batch[0], { allowed: true, remaining: 0 })
  t.is(out.batch[1].error.code, 'E_NO_RULE')
  t.is(out.code, 'E_NO_RULE')
})
