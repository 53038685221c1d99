/**
 * A fresh clone stays clean: `npm install` writes back the very lockfile
 * that is committed (it once added 48 lines, the optional @msgpackr-extract
 * packages of other platforms), and `npm pack`'s tarballs are ignored.
 * .ci/run also checks the first with `git diff --exit-code` after its own
 * install.
 */
import test from 'ava'
import { cpSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { NPM, sh, tempDir } from './helpers/proc.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

test('npm install leaves the committed lockfile as it is', async t => {
  t.timeout(240_000)
  // The manifests and the lockfile alone: npm resolves the whole tree and
  // writes the lockfile it would write in a fresh clone, without installing.
  const dir = tempDir()
  for (const p of ['package.json', 'package-lock.json', 'packages/client/package.json']) cpSync(join(ROOT, p), join(dir, p))
  const r = await sh(NPM, ['install', '--package-lock-only', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, timeoutMs: 180_000 })
  t.is(r.code, 0, r.stderr)
  const written = readFileSync(join(dir, 'package-lock.json'), 'utf8')
  const committed = readFileSync(join(ROOT, 'package-lock.json'), 'utf8')
  t.is(written, committed, 'npm install rewrote package-lock.json: run npm install and commit the lockfile it writes')
})

test('npm pack\'s tarballs are ignored by git', async t => {
  const r = await sh('git', ['check-ignore', '--no-index', '-v', 'quotad-client-0.2.0.tgz', 'packages/client/quotad-client-0.2.0.tgz'], { cwd: ROOT })
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /\.gitignore:\d+:\*\.tgz\tquotad-client-0\.2\.0\.tgz\n/)
})
