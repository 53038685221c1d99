#!/usr/bin/env node
/**
 * `quotactl`: talk to a running node over its Unix socket.
 * Exit status: 0 allowed (or ok), 1 denied, 2 usage or connection error.
 */
import { resolve } from 'node:path'
import { QuotadClient } from '@quotad/client'
import { loadClusterFile } from '../config/load.js'
import { findNode } from '../config/validate.js'
import { ErrorCodes, ExitCodes, QuotadError, isQuotadError } from '../errors.js'
import type { Decision } from '../core/types.js'
import { fail, version, parseCli, intFlag, usage } from './common.js'
import { runTop, topTargets } from './top.js'
import { renderStatus } from './status-render.js'

const NAME = 'quotactl'
const HELP = `usage:
  quotactl (--socket PATH | --config FILE --node NAME) COMMAND [--json]
  quotactl (--socket PATH | --config FILE [--node NAME]) top [--interval MS] [--once [--json]]
commands:
  acquire KEY [--count N] [--wait MS]   spend N tokens (exit 0 allowed, 1 denied)
  peek KEY [--count N]                  whether N would be allowed, spending nothing
  status                                the node's state (a summary; --json for all of it)
  ping                                  round-trip time to the node
  top                                   live view of every node of --config (or of --socket),
                                        refreshed every --interval MS (default 1000); q quits.
                                        A node with "http" in the file is read over HTTP (any
                                        host), else over its socket; members the seeds know are
                                        listed too. Piped: frame after frame, no escape codes.
                                        --once: one frame (rates over one interval), exit 0
options:
  --version      print the version and exit
  --timeout MS   reply timeout (default 5000; a waiting acquire adds its --wait)
`

async function main (argv: string[]): Promise<number> {
  const { values, positionals } = parseCli({
    args: argv,
    allowPositionals: true,
    options: {
      socket: { type: 'string', short: 's' },
      config: { type: 'string', short: 'c' },
      node: { type: 'string', short: 'n' },
      count: { type: 'string' },
      wait: { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
      interval: { type: 'string' },
      once: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'V' }
    }
  })
  if (values.help === true) { process.stdout.write(HELP); return ExitCodes.OK }
  if (values.version === true) { process.stdout.write(`${NAME} ${version()}\n`); return ExitCodes.OK }
  const json = values.json === true
  const [cmd, key] = positionals
  if (cmd === undefined) throw usage(`a command is required\n${HELP}`)
  const count = intFlag('count', values.count, 1, 1)
  const waitMs = intFlag('wait', values.wait, 0)
  const timeoutMs = intFlag('timeout', values.timeout, 5000, 1)
  if (cmd === 'top') {
    const intervalMs = intFlag('interval', values.interval, 1000, 100)
    return await runTop(await topTargets(values.socket, values.config, values.node), { intervalMs, once: values.once === true, json })
  }
  const socketPath = await findSocket(values.socket, values.config, values.node)

  const client = await QuotadClient.connect({ socketPath, timeoutMs, reconnect: false })
  try {
    switch (cmd) {
      case 'acquire':
      case 'peek': {
        if (key === undefined) throw usage(`${cmd} needs a KEY`)
        const d = await (cmd === 'acquire' ? client.acquire(key, { count, waitMs }) : client.peek(key, { count })).catch(err => { throw asFlag(err) })
        print(d, json)
        return d.allowed ? ExitCodes.OK : ExitCodes.DENIED
      }
      case 'status': {
        const s = await client.status()
        process.stdout.write(json ? JSON.stringify(s) + '\n' : renderStatus(s))
        return ExitCodes.OK
      }
      case 'ping': {
        const rtt = await client.ping()
        process.stdout.write(json ? JSON.stringify({ rttMs: rtt }) + '\n' : `pong in ${rtt.toFixed(3)} ms\n`)
        return ExitCodes.OK
      }
      default:
        throw usage(`unknown command "${cmd}"\n${HELP}`)
    }
  } finally {
    await client.close()
  }
}

async function findSocket (socket?: string, config?: string, node?: string): Promise<string> {
  if (socket !== undefined) return resolve(socket)
  if (config === undefined || node === undefined) throw usage(`give --socket PATH, or --config FILE and --node NAME\n${HELP}`)
  return findNode(await loadClusterFile(resolve(config)), node).socket
}

/** The node's refusal of an argument, said in the flag that gave it (the node speaks of `waitMs` and `count`, the user typed --wait and --count). */
function asFlag (err: unknown): unknown {
  if (!isQuotadError(err) || err.code !== ErrorCodes.BAD_ARGUMENT) return err
  const flag = /\bwaitMs\b/.test(err.message) ? '--wait' : /\bcount\b/.test(err.message) ? '--count' : undefined
  return flag === undefined ? err : new QuotadError(err.code, `${flag}: ${err.message}`, err.details)
}

function print (d: Decision, json: boolean): void {
  if (json) {
    process.stdout.write(JSON.stringify({
      allowed: d.allowed, remaining: d.remaining, limit: d.limit, resetMs: d.resetMs, retryAfterMs: d.retryAfterMs, rule: d.rule
    }) + '\n')
    return
  }
  const head = d.allowed ? 'allowed' : 'denied'
  const retry = d.allowed ? '' : ` retry-after=${d.retryAfterMs < 0 ? 'unknown' : d.retryAfterMs + 'ms'}`
  process.stdout.write(`${head} remaining=${d.remaining} limit=${d.limit} reset=${d.resetMs}ms${retry} rule=${d.rule}\n`)
}

main(process.argv.slice(2)).then(code => process.exit(code), err => fail(err, process.argv.includes('--json')))
