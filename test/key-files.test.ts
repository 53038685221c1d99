/**
 * Key files that others may use, or their group write, or a group the
 * process is not in read, are refused (E_KEY_PERMISSIONS), like ssh refuses
 * such private keys, unless QUOTAD_ALLOW_INSECURE_KEYS=1; group read for the
 * process's own group (a Kubernetes Secret with fsGroup) is accepted. The
 * check itself, the swarm key readers, the peer key, and a real `quotad`
 * process that will not start on a world-readable swarm key and starts on a
 * 0440 one of its own group.
 */
import test from 'ava'
import { spawn } from 'node:child_process'
import { chmodSync, chownSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys'
import { assertKeyFileMode, checkKeyFileMode, processGroups, ALLOW_INSECURE_KEYS_ENV } from '../src/config/key-file-mode.js'
import { loadSwarmKey, parseSwarmKey, writeSwarmKey } from '../src/config/swarm-key.js'
import { loadOrCreateIdentity } from '../src/cluster/transport/identity.js'
import { ErrorCodes, type QuotadError } from '../src/errors.js'
import { QUOTAD, tempDir } from './helpers/proc.js'

/** A gid this process is not in (to chown a file to, as root). */
function unusedGid (): number | undefined {
  const ours = processGroups()
  for (let g = 40_000; g < 40_100; g++) if (!ours.has(g)) return g
  return undefined
}

function dir (t: { teardown: (f: () => void) => void }): string {
  const d = tempDir()
  t.teardown(() => rmSync(d, { recursive: true, force: true }))
  return d
}

/** Run `f` with QUOTAD_ALLOW_INSECURE_KEYS set (tests using it are serial). */
async function withInsecureAllowed<T> (f: () => Promise<T>): Promise<T> {
  process.env[ALLOW_INSECURE_KEYS_ENV] = '1'
  try {
    return await f()
  } finally {
    delete process.env[ALLOW_INSECURE_KEYS_ENV]
  }
}

test('the check: others and group write are refused, group read only for a group of the process, with the fix in the message', t => {
  const ours = new Set([1000, 2000])
  const file = (mode: number, gid = 2000): { mode: number, gid: number } => ({ mode, gid })
  for (const mode of [0o600, 0o400, 0o700, 0o100600]) t.notThrows(() => assertKeyFileMode('/k', file(mode, 4242), 'swarm key', {}, ours))
  // The Kubernetes case: a Secret with the pod's fsGroup is 0440, group = fsGroup, a supplementary group of the process.
  for (const mode of [0o440, 0o640, 0o100440]) {
    t.notThrows(() => assertKeyFileMode('/k', file(mode, 2000), 'swarm key', {}, ours), mode.toString(8))
    t.notThrows(() => assertKeyFileMode('/k', file(mode, 1000), 'swarm key', {}, ours), `${mode.toString(8)}, the effective gid`)
  }
  const refused = (mode: number, gid: number): QuotadError => {
    const err = t.throws(() => assertKeyFileMode('/etc/quotad/swarm.key', file(mode, gid), 'swarm key', {}, ours)) as QuotadError
    t.is(err.code, ErrorCodes.KEY_PERMISSIONS, `${mode.toString(8)} gid ${gid}`)
    t.true(err.message.includes('chmod 600 /etc/quotad/swarm.key'), err.message)
    t.true(err.message.includes(ALLOW_INSECURE_KEYS_ENV))
    return err
  }
  // Others, group write or group execute: refused whatever the group.
  for (const mode of [0o604, 0o644, 0o444, 0o660, 0o620, 0o666, 0o602, 0o610, 0o650, 0o100644]) {
    t.regex(refused(mode, 2000).message, /group or others may read or change it/)
  }
  // Group read by a group the process is not in.
  for (const mode of [0o440, 0o640]) {
    const err = refused(mode, 4242)
    t.regex(err.message, /group 4242, which is not one of this process's groups, may read it/)
    t.like(err.details, { path: '/etc/quotad/swarm.key', mode, gid: 4242 })
  }
  t.notThrows(() => assertKeyFileMode('/k', file(0o644, 4242), 'swarm key', { [ALLOW_INSECURE_KEYS_ENV]: '1' }, ours))
  t.throws(() => assertKeyFileMode('/k', file(0o644), 'swarm key', { [ALLOW_INSECURE_KEYS_ENV]: 'yes' }, ours), { code: ErrorCodes.KEY_PERMISSIONS }, 'only "1" allows')
})

test('processGroups: the effective gid and the supplementary groups', t => {
  const groups = processGroups()
  const egid = process.getegid?.() ?? -1
  const supplementary = process.getgroups?.() ?? []
  t.true(groups.has(egid))
  for (const g of supplementary) t.true(groups.has(g))
  t.is(groups.size, new Set([egid, ...supplementary]).size)
})

test.serial('swarm key readers refuse a group- or world-readable file', async t => {
  const d = dir(t)
  const path = join(d, 'swarm.key')
  await writeSwarmKey(path)
  t.is(statSync(path).mode & 0o777, 0o600)
  const text = readFileSync(path, 'utf8')
  t.is(parseSwarmKey(text, path).length, 32)
  t.is((await loadSwarmKey(path)).length, 32)
  t.is(parseSwarmKey(text).length, 32, 'text alone: nothing to check')
  chmodSync(path, 0o644)
  t.throws(() => parseSwarmKey(text, path), { code: ErrorCodes.KEY_PERMISSIONS })
  await t.throwsAsync(loadSwarmKey(path), { code: ErrorCodes.KEY_PERMISSIONS })
  await t.throwsAsync(checkKeyFileMode(path, 'swarm key'), { code: ErrorCodes.KEY_PERMISSIONS })
  t.is((await withInsecureAllowed(async () => await loadSwarmKey(path))).length, 32, 'the override accepts it')
  chmodSync(path, 0o400)
  t.is((await loadSwarmKey(path)).length, 32, 'read-only for the owner is fine')
  // Group-readable for the process's own group (the file's group is our effective gid here).
  t.is(statSync(path).gid, process.getegid?.() ?? -1)
  chmodSync(path, 0o440)
  t.is((await loadSwarmKey(path)).length, 32, '0440 for our own group')
  t.is(parseSwarmKey(text, path).length, 32)
  chmodSync(path, 0o460)
  await t.throwsAsync(loadSwarmKey(path), { code: ErrorCodes.KEY_PERMISSIONS }, 'but not group-writable')
  chmodSync(path, 0o440)
  const other = unusedGid()
  if (process.getuid?.() === 0 && other !== undefined) {
    chownSync(path, 0, other)
    const err = await t.throwsAsync(loadSwarmKey(path), { code: ErrorCodes.KEY_PERMISSIONS }, 'another group may not read it') as QuotadError | undefined
    t.like(err?.details, { gid: other })
  }
  await t.throwsAsync(loadSwarmKey(join(d, 'missing.key')), { code: ErrorCodes.CONFIG_READ })
})

test('writeSwarmKey --force leaves the replaced file at 0600', async t => {
  const path = join(dir(t), 'swarm.key')
  writeFileSync(path, 'old', { mode: 0o644 })
  chmodSync(path, 0o644)
  await writeSwarmKey(path, true)
  t.is(statSync(path).mode & 0o777, 0o600)
})

test.serial('a peer key that group may write or others read is refused; group read for our own group is not', async t => {
  const d = dir(t)
  const created = await loadOrCreateIdentity(d)
  t.true(created.created)
  t.is(created.mode, 0o600)
  const path = join(d, 'peer-key')
  chmodSync(path, 0o640)
  t.is((await loadOrCreateIdentity(d)).mode, 0o640, 'its group is our effective gid')
  chmodSync(path, 0o660)
  const err = await t.throwsAsync(loadOrCreateIdentity(d), { code: ErrorCodes.KEY_PERMISSIONS })
  t.true(err?.message.includes(`chmod 600 ${path}`))
  const allowed = await withInsecureAllowed(async () => await loadOrCreateIdentity(d))
  t.false(allowed.created)
  t.is(allowed.mode, 0o660, 'the mode is still reported')
  t.is(allowed.key.equals(created.key), true, 'the same identity')
  chmodSync(path, 0o600)
  t.false((await loadOrCreateIdentity(d)).created)
  // A key written by someone else with a loose umask.
  const other = dir(t)
  writeFileSync(join(other, 'peer-key'), privateKeyToProtobuf(await generateKeyPair('Ed25519')), { mode: 0o644 })
  chmodSync(join(other, 'peer-key'), 0o644)
  await t.throwsAsync(loadOrCreateIdentity(other), { code: ErrorCodes.KEY_PERMISSIONS })
})

/** Start `quotad` for node a of a two-node cluster; resolves with its exit code and stderr, or 'serving'. */
async function startNodeA (d: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null, stderr: string }> {
  const child = spawn(process.execPath, [QUOTAD, '--config', join(d, 'cluster.json'), '--node', 'a', '--log-level', 'warn'],
    { stdio: ['ignore', 'ignore', 'pipe'], env })
  let stderr = ''
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
  const exited = new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))
  const serving = new Promise<'serving'>(resolve => {
    const timer = setInterval(() => {
      try {
        if (statSync(join(d, 'a.sock')).isSocket()) { clearInterval(timer); resolve('serving') }
      } catch { /* not there yet */ }
    }, 25)
    void exited.then(() => clearInterval(timer))
  })
  const first = await Promise.race([exited, serving, new Promise<'timeout'>(resolve => setTimeout(() => resolve('timeout'), 15_000))])
  if (first === 'serving' || first === 'timeout') {
    child.kill('SIGTERM')
    await exited
    return { code: first === 'serving' ? -1 : -2, stderr }
  }
  return { code: first, stderr }
}

test.serial('quotad will not start on a world-readable swarm key, and starts with the override', async t => {
  const d = dir(t)
  writeFileSync(join(d, 'cluster.json'), JSON.stringify({
    cluster: { name: 'keys', secretFile: 'swarm.key' },
    nodes: [
      { name: 'a', listen: '/ip4/127.0.0.1/tcp/0', socket: 'a.sock', dataDir: 'data/a' },
      { name: 'b', listen: '/ip4/127.0.0.1/tcp/0', socket: 'b.sock', dataDir: 'data/b' }
    ],
    rules: [{ name: 'p', match: 'p', limit: 5, per: '1s', algorithm: 'fixed-window' }]
  }))
  await writeSwarmKey(join(d, 'swarm.key'))
  chmodSync(join(d, 'swarm.key'), 0o644)
  const env = { ...process.env }
  delete env[ALLOW_INSECURE_KEYS_ENV]
  const refused = await startNodeA(d, env)
  t.is(refused.code, 2, refused.stderr)
  t.true(refused.stderr.includes(ErrorCodes.KEY_PERMISSIONS), refused.stderr)
  t.true(refused.stderr.includes(`chmod 600 ${join(d, 'swarm.key')}`))
  const allowed = await startNodeA(d, { ...env, [ALLOW_INSECURE_KEYS_ENV]: '1' })
  t.is(allowed.code, -1, `it serves with ${ALLOW_INSECURE_KEYS_ENV}=1: ${allowed.stderr}`)
  // A Kubernetes Secret with fsGroup: 0440, group-readable for the process's own group.
  chmodSync(join(d, 'swarm.key'), 0o440)
  const secret = await startNodeA(d, env)
  t.is(secret.code, -1, `it serves with a 0440 key of its own group: ${secret.stderr}`)
})
