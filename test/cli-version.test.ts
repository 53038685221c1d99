/** `--version` on both CLIs: the package's version, exit 0, no config needed. */
import test from 'ava'
import { readFileSync } from 'node:fs'
import { QUOTACTL, QUOTAD, run } from './helpers/proc.js'

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

for (const [name, cli] of [['quotad', QUOTAD], ['quotactl', QUOTACTL]] as const) {
  test(`${name} --version prints ${name} and the package version`, async t => {
    const r = await run(cli, ['--version'])
    t.is(r.code, 0)
    t.is(r.stdout, `${name} ${pkg.version}\n`)
  })
}
