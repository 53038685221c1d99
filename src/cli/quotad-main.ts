/**
 * `quotad`: run a node, check a cluster file, or write a swarm key.
 * Thin: parses flags, handles signals, exits. `Daemon` does the work.
 * Loaded by quotad.ts once the stop signals are taken over.
 *
 * The daemon, the cluster file's validation (ajv compiles the schema as it
 * loads) and the simulator are imported where a command needs them, not
 * here: a node's start warms the transport thread first (it loads libp2p
 * meanwhile, `warmTransportThread`), and `keygen` or `--version` load
 * neither.
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { Daemon } from '../daemon.js'
import { writeSwarmKey } from '../config/swarm-key.js'
import { ExitCodes } from '../errors.js'
import type { NodeOverrides } from '../config/node-overrides.js'
import type { ClusterConfig } from '../config/types.js'
import { earlySignals } from './signals.js'
import { createLogger, LOG_LEVELS, type LogLevel } from '../util/log.js'
import { fail, version, parseCli, usage } from './common.js'
import { warmTransportThread } from '../cluster/transport/thread-transport.js'

const NAME = 'quotad'
const HELP = `usage:
  quotad --config FILE --node NAME [--listen ADDR] [--socket PATH] [--data-dir DIR]
         [--http HOST:PORT] [--grpc unix:PATH|HOST:PORT] [--log-level debug|info|warn|error]
      run one node of the cluster file; SIGTERM stops it, SIGHUP reloads the rules.
      --listen, --socket and --data-dir override the node's entry (a node not in the
      file joins as a member with all three). Environment: QUOTAD_CONFIG, QUOTAD_NODE,
      QUOTAD_LISTEN, QUOTAD_SOCKET, QUOTAD_DATA_DIR, QUOTAD_HTTP, QUOTAD_GRPC (flags win).
      --http serves /metrics, /healthz and /readyz (off by default).
      --grpc serves Envoy's Rate Limit Service (the file's envoy section; off by default).
  quotad check-config FILE
      validate a cluster file and print every problem with its JSON path
  quotad peer-id (--data-dir DIR | --config FILE --node NAME)
      print the node's peer id for the cluster file's "peerId" (creates its key if missing)
  quotad keygen FILE [--force]
      write a new pre-shared swarm key (libp2p pnet format, mode 0600)
  quotad --version
      print the version and exit
  quotad simulate [--config FILE] [--nodes N] [--scenario NAME] [--seeds K] ...
      run the cluster in the deterministic simulator (quotad simulate --help)
`

export async function main (argv: string[]): Promise<void> {
  try {
    await cli(argv)
  } catch (err) {
    fail(err)
  }
}

async function cli (argv: string[]): Promise<void> {
  if (argv[0] === 'simulate') { await (await import('./simulate.js')).simulate(argv.slice(1)); return }
  const { values, positionals } = parseCli({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      node: { type: 'string', short: 'n' },
      listen: { type: 'string' },
      socket: { type: 'string' },
      'data-dir': { type: 'string' },
      http: { type: 'string' },
      grpc: { type: 'string' },
      'log-level': { type: 'string' },
      force: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'V' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); return }
  if (values.version === true) { process.stdout.write(`${NAME} ${version()}\n`); return }
  const [cmd, arg] = positionals
  if (cmd === 'check-config') {
    if (arg === undefined) throw usage('check-config needs a FILE')
    const { checkDeploy, throwIfErrors } = await import('../config/deploy-check.js')
    const cfg = await (await import('../config/load.js')).loadClusterFile(resolve(arg))
    const check = await checkDeploy(cfg)
    for (const w of check.warnings) process.stdout.write(`warning: ${w.path}: ${w.message}\n`)
    throwIfErrors(check, cfg.source)
    const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`
    const envoy = cfg.envoy === undefined ? '' : ` (${cfg.envoy.rules.length} from ${count(cfg.envoy.domains.length, 'envoy domain')})`
    process.stdout.write(`${arg}: ok (${count(cfg.nodes.length, 'node')}, ${count(cfg.rules.length, 'rule')}${envoy}${check.warnings.length > 0 ? `, ${count(check.warnings.length, 'warning')}` : ''})\n`)
    return
  }
  if (cmd === 'peer-id') {
    let dir = values['data-dir'] ?? process.env.QUOTAD_DATA_DIR
    if (dir === undefined && values.config !== undefined && values.node !== undefined) {
      const cfg = await load(resolve(values.config), values.node, await overridesFrom(values))
      dir = cfg.nodes.find(n => n.name === values.node)?.dataDir
    }
    if (dir === undefined || dir === '') throw usage('peer-id needs --data-dir DIR, or --config FILE --node NAME')
    const { peerIdOf } = await import('../cluster/transport/identity.js')
    const id = await peerIdOf(resolve(dir))
    process.stdout.write(id.peerId + '\n')
    if (id.created) process.stderr.write(`created a new peer key in ${id.path}\n`)
    return
  }
  if (cmd === 'keygen') {
    if (arg === undefined) throw usage('keygen needs a FILE')
    await writeSwarmKey(resolve(arg), values.force === true)
    process.stdout.write(`wrote swarm key to ${arg}\n`)
    return
  }
  if (cmd !== undefined) throw usage(`unknown command "${cmd}"\n${HELP}`)
  const config = values.config ?? process.env.QUOTAD_CONFIG
  const node = values.node ?? process.env.QUOTAD_NODE
  if (config === undefined || config === '' || node === undefined || node === '') throw usage(`--config and --node are required\n${HELP}`)
  const level = (values['log-level'] ?? 'info') as LogLevel
  if (!LOG_LEVELS.includes(level)) throw usage(`--log-level must be one of ${LOG_LEVELS.join(', ')}`)
  // Not awaited: the file is read beside the imports (and a file that never reads, a FIFO, must not hold the start).
  void mayJoinPeers(resolve(config), node).then(yes => { if (yes) warmTransportThread() })
  await run(resolve(config), node, await overridesFrom(values), level)
}

async function overridesFrom (values: Parameters<typeof import('../config/node-overrides.js').overridesFrom>[0]): Promise<NodeOverrides> {
  return (await import('../config/node-overrides.js')).overridesFrom(values, process.env)
}

async function load (file: string, node: string, o: NodeOverrides): Promise<ClusterConfig> {
  const [{ loadClusterFile }, { withNodeOverrides }] = await Promise.all([import('../config/load.js'), import('../config/node-overrides.js')])
  return withNodeOverrides(await loadClusterFile(file), node, o)
}

/**
 * Whether this node will run the cluster layer (libp2p): the file lists another node, or not this one (a member
 * joins with its flags). Only a hint, read before the file is validated, to warm the transport thread early; a
 * wrong guess costs time, not correctness (an unused warm thread ends with the process, and createTransport starts
 * its own thread when none was warmed).
 */
async function mayJoinPeers (file: string, node: string): Promise<boolean> {
  try {
    const nodes = (JSON.parse(await readFile(file, 'utf8')) as { nodes?: unknown }).nodes
    return Array.isArray(nodes) && (nodes.length > 1 || !nodes.some(n => (n as { name?: unknown } | null)?.name === node))
  } catch {
    return false
  }
}

async function run (file: string, node: string, o: NodeOverrides, level: LogLevel): Promise<void> {
  const log = createLogger({ level, base: { node } })
  log.info('starting', { config: file, pid: process.pid })
  const config = await load(file, node, o)
  // A stop asked for while loading: nothing has been touched yet, so there is nothing to save.
  if (earlySignals.received !== null) {
    log.info('stopped before starting', { signal: earlySignals.received })
    process.exit(ExitCodes.OK)
  }
  let stopping = false
  const { Daemon } = await import('../daemon.js')
  const daemon: Daemon = await Daemon.start({
    config,
    node,
    logger: log,
    // Reclaimed, and the new incarnation could not start in-process (daemon.ts renew): stop cleanly (its books are
    // already dropped) and exit for the supervisor to start one.
    onRenewFailed: () => {
      if (stopping) return
      stopping = true
      // Status 3 even if the stop fails: the books are dropped already, and the supervisor must start it again.
      daemon.stop().then(() => process.exit(ExitCodes.RESTART), err => {
        log.error('stop failed', { err })
        process.exit(ExitCodes.RESTART)
      })
    }
  })
  // Delivers a signal that came during the start at once: a clean stop, so the state file says "stopped".
  earlySignals.onStop(signal => {
    if (stopping) return
    stopping = true
    log.info('signal', { signal })
    daemon.stop().then(() => process.exit(ExitCodes.OK), err => {
      log.error('stop failed', { err })
      process.exit(ExitCodes.ERROR)
    })
  })
  process.on('SIGHUP', () => {
    // Any failure (unreadable, invalid, this node gone from the file) keeps the old rules.
    load(file, node, o).then(cfg => daemon.reload(cfg)).catch(err => {
      log.error('reload refused; the old rules stay', { err, details: (err as { details?: unknown }).details })
    })
  })
}
