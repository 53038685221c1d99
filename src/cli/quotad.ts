#!/usr/bin/env node
/**
 * `quotad`: run a node, check a cluster file, or write a swarm key.
 * Thin: parses flags, handles signals, exits. `Daemon` does the work.
 */
import { resolve } from 'node:path'
import { Daemon } from '../daemon.js'
import { loadClusterFile } from '../config/load.js'
import { writeSwarmKey } from '../config/swarm-key.js'
import { ExitCodes } from '../errors.js'
import { createLogger, LOG_LEVELS, type LogLevel } from '../util/log.js'
import { fail, parseCli, usage } from './common.js'
import { simulate } from './simulate.js'

const HELP = `usage:
  quotad --config FILE --node NAME [--log-level debug|info|warn|error]
      run one node of the cluster file; SIGTERM stops it, SIGHUP reloads the rules
  quotad check-config FILE
      validate a cluster file and print every problem with its JSON path
  quotad keygen FILE [--force]
      write a new pre-shared swarm key (libp2p pnet format, mode 0600)
  quotad simulate [--config FILE] [--nodes N] [--scenario NAME] [--seeds K] ...
      run the cluster in the deterministic simulator (quotad simulate --help)
`

async function main (argv: string[]): Promise<void> {
  if (argv[0] === 'simulate') { await simulate(argv.slice(1)); return }
  const { values, positionals } = parseCli({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      node: { type: 'string', short: 'n' },
      'log-level': { type: 'string' },
      force: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); return }
  const [cmd, arg] = positionals
  if (cmd === 'check-config') {
    if (arg === undefined) throw usage('check-config needs a FILE')
    const cfg = await loadClusterFile(resolve(arg))
    process.stdout.write(`${arg}: ok (${cfg.nodes.length} nodes, ${cfg.rules.length} rules)\n`)
    return
  }
  if (cmd === 'keygen') {
    if (arg === undefined) throw usage('keygen needs a FILE')
    await writeSwarmKey(resolve(arg), values.force === true)
    process.stdout.write(`wrote swarm key to ${arg}\n`)
    return
  }
  if (cmd !== undefined) throw usage(`unknown command "${cmd}"\n${HELP}`)
  if (values.config === undefined || values.node === undefined) throw usage(`--config and --node are required\n${HELP}`)
  const level = (values['log-level'] ?? 'info') as LogLevel
  if (!LOG_LEVELS.includes(level)) throw usage(`--log-level must be one of ${LOG_LEVELS.join(', ')}`)
  await run(resolve(values.config), values.node, level)
}

async function run (file: string, node: string, level: LogLevel): Promise<void> {
  const log = createLogger({ level, base: { node } })
  const daemon = await Daemon.start({ config: await loadClusterFile(file), node, logger: log })
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    log.info('signal', { signal })
    daemon.stop().then(() => process.exit(ExitCodes.OK), err => {
      log.error('stop failed', { err })
      process.exit(ExitCodes.ERROR)
    })
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGHUP', () => {
    // Any failure (unreadable, invalid, this node gone from the file) keeps the old rules.
    loadClusterFile(file).then(cfg => daemon.reload(cfg)).catch(err => {
      log.error('reload refused; the old rules stay', { err, details: (err as { details?: unknown }).details })
    })
  })
}

main(process.argv.slice(2)).catch(err => fail(err))
