/**
 * The deployment files stay true to the daemon: the systemd unit passes
 * `systemd-analyze verify` (where the tool exists), and the Kubernetes
 * example's cluster file validates and uses the environment variables quotad
 * reads.
 */
import test from 'ava'
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { validateClusterFile } from '../src/config/validate.js'
import { tempDir } from './helpers/proc.js'

const deploy = (f: string): string => readFileSync(new URL(`../../deploy/${f}`, import.meta.url), 'utf8')

test('the systemd unit passes systemd-analyze verify', async t => {
  const tool = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find(p => existsSync(p))
  if (tool === undefined) { t.pass('systemd-analyze is not installed here: nothing to verify'); return }
  const dir = tempDir()
  // An instance of the template, with this machine's node binary (verify checks that ExecStart exists).
  const unit = join(dir, 'quotad@a.service')
  writeFileSync(unit, deploy('quotad@.service').replace('/usr/bin/node', process.execPath))
  const r = await new Promise<{ code: number, out: string }>(resolve => {
    execFile(tool, ['verify', unit], (err, stdout, stderr) => resolve({ code: err === null ? 0 : Number((err as { code?: number }).code ?? 1), out: stdout + stderr }))
  })
  t.is(r.code, 0, r.out)
  t.is(r.out.split('\n').filter(l => l.includes('quotad@a.service')).join('\n'), '', 'no warnings about the unit')
  for (const opt of ['RuntimeDirectory=quotad', 'StateDirectory=quotad/%i', 'ProtectSystem=strict', 'NoNewPrivileges=yes', 'QUOTAD_SOCKET=', 'ExecReload=']) {
    t.true(deploy('quotad@.service').includes(opt), opt)
  }
})

test('the Kubernetes sidecar example: its cluster file validates, and it sets the variables quotad reads', t => {
  const yaml = deploy('kubernetes-sidecar.yaml')
  const json = /cluster\.json: \|\n((?: {4}.*\n)+)/.exec(yaml)?.[1]
  if (json === undefined) return t.fail('no cluster.json in the ConfigMap')
  const cfg = validateClusterFile(JSON.parse(json), '/etc/quotad')
  t.is(cfg.nodes.filter(n => n.seed && n.peerId !== undefined).length, 3, 'every seed pinned')
  for (const v of ['QUOTAD_NODE', 'QUOTAD_LISTEN', 'QUOTAD_SOCKET', 'QUOTAD_DATA_DIR', 'QUOTAD_HTTP', 'QUOTAD_CONFIG']) t.true(yaml.includes(`name: ${v}`), v)
  t.true(yaml.includes('path: /readyz') && yaml.includes('path: /healthz'))
  const docker = deploy('Dockerfile')
  t.true(docker.includes('STOPSIGNAL SIGTERM'))
  t.true(docker.includes('ENTRYPOINT ["node", "--max-semi-space-size=1", "/opt/quotad/dist/src/cli/quotad.js"]'))
})

test('the image and the unit start node with the flags on the quotad bin\'s first line (a 1 MiB young generation)', t => {
  const shebang = readFileSync(new URL('../src/cli/quotad.js', import.meta.url), 'utf8').split('\n', 1)[0]
  t.is(shebang, '#!/usr/bin/env -S node --max-semi-space-size=1')
  t.true(deploy('quotad@.service').includes('ExecStart=/usr/bin/node --max-semi-space-size=1 /opt/quotad/dist/src/cli/quotad.js'))
  t.true(deploy('Dockerfile').includes('["node", "--max-semi-space-size=1", '))
})
