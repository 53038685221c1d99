/**
 * The deployment files stay true to the daemon: the systemd unit passes
 * `systemd-analyze verify` (where the tool exists); the Kubernetes manifests
 * (parsed) give quotad a swarm key it accepts, a socket the app can open, and
 * seeds with stable names and kept data; the image holds no tests or benches.
 */
import test, { type ExecutionContext } from 'ava'
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { ALLOW_INSECURE_KEYS_ENV, assertKeyFileMode } from '../src/config/key-file-mode.js'
import { DEFAULT_SOCKET_MODE } from '../src/config/types.js'
import { validateClusterFile } from '../src/config/validate.js'
import { ErrorCodes } from '../src/errors.js'
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

// ---- Kubernetes -----------------------------------------------------------
// kubeconform (a Go binary, not in Debian) cannot be installed here, and
// kubectl validates only against a live API server: the manifests are parsed
// and the fields quotad depends on are checked against the daemon's own rules.

/* eslint-disable @typescript-eslint/no-explicit-any -- manifests are untyped JSON, read field by field */
type K8s = Record<string, any>

/** The documents of a manifest file, parsed as Kubernetes does (YAML 1.1: 0440 is octal). */
function manifests (file: string): K8s[] {
  return parseAllDocuments(deploy(file), { version: '1.1' }).map(d => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map(e => e.message).join('; ')}`)
    return d.toJS() as K8s
  })
}

function find (docs: K8s[], kind: string, name: string): K8s {
  const d = docs.find(x => x.kind === kind && x.metadata?.name === name)
  if (d === undefined) throw new Error(`no ${kind} ${name}`)
  return d
}

const envOf = (c: K8s): Record<string, string> => Object.fromEntries((c.env as K8s[]).map(e => [e.name, e.value ?? `<${e.valueFrom?.fieldRef?.fieldPath as string}>`]))
const mountOf = (c: K8s, volume: string): K8s | undefined => (c.volumeMounts as K8s[] | undefined)?.find(m => m.name === volume)

/**
 * What the kubelet does to a Secret volume's files in a pod with fsGroup:
 * group fsGroup, and group read added (its read-only mask, 0440), whatever
 * defaultMode says.
 */
const secretFileMode = (defaultMode: number): number => defaultMode | 0o440

/** The process groups of a container: its runAsGroup and the pod's fsGroup (a supplementary group of every container). */
const groupsOf = (pod: K8s, c: K8s): Set<number> => new Set([c.securityContext.runAsGroup, pod.securityContext.fsGroup])

const docs = manifests('kubernetes-sidecar.yaml')
const cm = find(docs, 'ConfigMap', 'quotad-cluster')
const cluster = validateClusterFile(JSON.parse(cm.data['cluster.json'] as string), '/etc/quotad')

/** Checks every pod that runs quotad makes the same way: the image's user, the key, the config, the probes. */
function checkQuotadPod (t: ExecutionContext, what: string, pod: K8s): K8s {
  const q = (pod.containers as K8s[]).find(c => c.name === 'quotad')
  if (q === undefined) throw new Error(`${what}: no quotad container`)
  t.is(q.command, undefined, `${what}: the image's ENTRYPOINT runs the daemon`)
  t.is(q.args, undefined, `${what}: quotad reads --config and --node from the environment`)
  t.true(pod.securityContext.runAsNonRoot, what)
  t.is(q.securityContext.runAsUser, 1000, `${what}: the image's user node`)
  t.is(q.securityContext.runAsGroup, 1000, what)
  t.is(pod.securityContext.fsGroupChangePolicy, 'OnRootMismatch', `${what}: a 0600 peer key on a kept volume stays 0600`)
  t.true(pod.terminationGracePeriodSeconds >= 30, what)

  // The swarm key: readable by the quotad user through the fsGroup, and accepted by quotad's own check.
  const env = envOf(q)
  const keyVolume = (pod.volumes as K8s[]).find(v => v.secret?.secretName === 'quotad-swarm-key')
  if (keyVolume === undefined) throw new Error(`${what}: no swarm key volume`)
  const keyMount = mountOf(q, keyVolume.name as string)
  t.is(keyMount?.mountPath, `${dirname(env.QUOTAD_CONFIG)}/${basename(cluster.cluster.secretFile)}`, `${what}: the key where cluster.json's secretFile points`)
  const mode = secretFileMode(keyVolume.secret.defaultMode as number)
  t.is(mode, 0o440, `${what}: the key file is 0440`)
  const file = { mode, gid: pod.securityContext.fsGroup as number }
  t.notThrows(() => assertKeyFileMode('/etc/quotad/swarm.key', file, 'swarm key', {}, groupsOf(pod, q)), `${what}: quotad accepts its key`)
  t.throws(() => assertKeyFileMode('/etc/quotad/swarm.key', file, 'swarm key', {}, new Set([q.securityContext.runAsGroup])),
    { code: ErrorCodes.KEY_PERMISSIONS }, `${what}: (it is the fsGroup that makes it so)`)
  t.false(Object.keys(env).includes(ALLOW_INSECURE_KEYS_ENV), `${what}: no override needed`)

  // The cluster file, the socket, the data dir, the probes: what quotad reads.
  t.is(mountOf(q, (pod.volumes as K8s[]).find(v => v.configMap?.name === 'quotad-cluster')?.name as string)?.mountPath, env.QUOTAD_CONFIG, what)
  for (const v of ['QUOTAD_NODE', 'QUOTAD_LISTEN', 'QUOTAD_SOCKET', 'QUOTAD_DATA_DIR', 'QUOTAD_HTTP', 'QUOTAD_CONFIG']) t.true(v in env, `${what}: ${v}`)
  t.is(env.QUOTAD_NODE, '<metadata.name>', `${what}: the node is named after its pod`)
  t.is(env.QUOTAD_LISTEN, '/ip4/$(POD_IP)/tcp/7401')
  t.is((q.ports as K8s[]).find(p => p.name === 'cluster')?.containerPort, 7401)
  t.is(dirname(env.QUOTAD_SOCKET), mountOf(q, 'quotad-run')?.mountPath, `${what}: the socket in its emptyDir`)
  t.truthy((pod.volumes as K8s[]).find(v => v.name === 'quotad-run')?.emptyDir, what)
  t.truthy(mountOf(q, (q.volumeMounts as K8s[]).find(m => m.mountPath === env.QUOTAD_DATA_DIR)?.name as string), `${what}: a volume for the data dir`)
  t.is(q.readinessProbe.httpGet.path, '/readyz')
  t.is(q.livenessProbe.httpGet.path, '/healthz')
  return q
}

test('the Kubernetes sidecar: quotad reads its 0440 key through the fsGroup, and the app opens the socket through it', t => {
  const dep = find(docs, 'Deployment', 'checkout')
  const pod = dep.spec.template.spec as K8s
  const q = checkQuotadPod(t, 'sidecar', pod)
  const app = (pod.containers as K8s[]).find(c => c.name !== 'quotad')
  if (app === undefined) return t.fail('no app container')
  // The app: another user, in the pod's fsGroup; the socket's emptyDir is that group's (setgid), and a member's socket is 0660.
  t.not(app.securityContext.runAsUser, q.securityContext.runAsUser)
  t.false(groupsOf(pod, app).has(q.securityContext.runAsGroup as number), 'the app shares no group with quotad but the fsGroup')
  t.true(groupsOf(pod, app).has(pod.securityContext.fsGroup as number))
  t.is(DEFAULT_SOCKET_MODE & 0o060, 0o060, "a member's socket is group read-write")
  t.is(envOf(app).QUOTAD_SOCKET, envOf(q).QUOTAD_SOCKET, 'the app dials the socket quotad serves')
  t.is(mountOf(app, 'quotad-run')?.mountPath, mountOf(q, 'quotad-run')?.mountPath)
  t.is(mountOf(app, 'quotad-key'), undefined, 'the app does not mount the swarm key')
  t.truthy((pod.volumes as K8s[]).find(v => v.name === 'quotad-data')?.emptyDir, 'a member starts with nothing, safely')
  t.false(cluster.nodes.some(n => n.name.startsWith('checkout')), 'the sidecars join as members: no per-pod file entry')
})

test('the Kubernetes seeds: a StatefulSet with stable names, one per seed of the cluster file, each with its data volume', t => {
  const sts = find(docs, 'StatefulSet', 'quotad-seed')
  const svc = find(docs, 'Service', 'quotad-seed')
  const pod = sts.spec.template.spec as K8s
  const q = checkQuotadPod(t, 'seed', pod)
  const seeds = cluster.nodes.filter(n => n.seed)
  t.is(seeds.length, 3)
  t.is(seeds.filter(n => n.peerId !== undefined).length, 3, 'every seed pinned')
  t.is(sts.spec.replicas, seeds.length)
  // Pod i is quotad-seed-i; QUOTAD_NODE is the pod's name: the file names its seeds so, at the pod's DNS name.
  t.is(sts.spec.serviceName, svc.metadata.name)
  t.is(svc.spec.clusterIP, 'None', 'headless: a DNS name per pod')
  t.true(svc.spec.publishNotReadyAddresses, 'seeds reach each other before they are ready')
  t.is(sts.spec.podManagementPolicy, 'Parallel')
  t.deepEqual(svc.spec.selector, sts.spec.selector.matchLabels)
  t.like(sts.spec.template.metadata.labels, sts.spec.selector.matchLabels)
  t.is(svc.spec.ports[0].port, 7401)
  seeds.forEach((n, i) => {
    t.is(n.name, `${sts.metadata.name as string}-${i}`)
    t.is(n.listen, `/dns4/${sts.metadata.name as string}-${i}.${svc.metadata.name as string}/tcp/7401`)
  })
  // The data dir on a persistent volume per pod.
  const dataMount = (q.volumeMounts as K8s[]).find(m => m.mountPath === envOf(q).QUOTAD_DATA_DIR)
  const claim = (sts.spec.volumeClaimTemplates as K8s[]).find(c => c.metadata.name === dataMount?.name)
  t.truthy(claim, 'the data dir is a volumeClaimTemplate')
  t.deepEqual(claim?.spec.accessModes, ['ReadWriteOnce'])
  t.false((pod.volumes as K8s[]).some(v => v.name === dataMount?.name), 'not a pod volume (an emptyDir would lose the books)')
})

test('the image: the daemon and its production dependencies only, run as node', t => {
  const docker = deploy('Dockerfile')
  t.true(docker.includes('STOPSIGNAL SIGTERM'))
  t.true(docker.includes('ENTRYPOINT ["node", "--max-semi-space-size=1", "/opt/quotad/dist/src/cli/quotad.js"]'))
  t.false(/^CMD/m.test(docker), 'no CMD: the daemon takes its arguments from the environment')
  t.regex(docker, /^USER node$/m)
  t.regex(docker, /npm prune --omit=dev --ignore-scripts/, 'a prune that runs the client\'s prepare fails without typescript')
  const copies = docker.split('\n').filter(l => l.startsWith('COPY ')).map(l => l.slice('COPY '.length))
  for (const c of copies) {
    t.false(/(^|[\s/])(test|bench|scripts)(\/|\s|$)/.test(c), `no tests, benches or scripts: COPY ${c}`)
    t.false(/^\.\s/.test(c), `no whole-context copy: COPY ${c}`)
  }
  // From the build stage: the compiled daemon (dist/src), not dist/test or dist/bench.
  const fromBuild = copies.filter(c => c.startsWith('--from=build ')).map(c => c.split(/\s+/)[1])
  t.deepEqual(fromBuild.filter(p => p.includes('/dist')), ['/src/dist/src', '/src/packages/client/dist'])
  const ignored = readFileSync(new URL('../../.dockerignore', import.meta.url), 'utf8').split('\n')
  for (const p of ['test', 'bench', 'node_modules', 'dist', '.git', 'swarm.key', '**/swarm.key']) t.true(ignored.includes(p), `.dockerignore: ${p}`)
})

test('the image and the unit start node with the flags on the quotad bin\'s first line (a 1 MiB young generation)', t => {
  const shebang = readFileSync(new URL('../src/cli/quotad.js', import.meta.url), 'utf8').split('\n', 1)[0]
  t.is(shebang, '#!/usr/bin/env -S node --max-semi-space-size=1')
  t.true(deploy('quotad@.service').includes('ExecStart=/usr/bin/node --max-semi-space-size=1 /opt/quotad/dist/src/cli/quotad.js'))
  t.true(deploy('Dockerfile').includes('["node", "--max-semi-space-size=1", '))
})
