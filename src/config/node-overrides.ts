/**
 * Per-instance settings from flags or the environment, over the shared
 * cluster file: `--listen`, `--socket`, `--data-dir`, `--http`, `--grpc`
 * (QUOTAD_LISTEN, QUOTAD_SOCKET, QUOTAD_DATA_DIR, QUOTAD_HTTP, QUOTAD_GRPC). Every instance of an app can then share
 * one file, and a sidecar can take its name from the pod (QUOTAD_NODE).
 *
 * A node listed in the file gets the given fields replaced. A node not in
 * the file joins as a member that is not a seed (it starts with nothing and
 * gets tokens by transfer): then all three are required. Relative paths
 * resolve against the working directory (they come from the command line),
 * not the file's folder.
 */
import { resolve } from 'node:path'
import { ErrorCodes, QuotadError } from '../errors.js'
import { DEFAULT_SOCKET_MODE, type ClusterConfig, type NodeConfig } from './types.js'
import { HTTP_RE, HTTP_TEXT, listenIssue, MAX_SOCKET_PATH_BYTES, NAME_RE, NAME_TEXT } from './validate.js'
import { grpcAddress } from './envoy-config.js'

export interface NodeOverrides {
  listen?: string
  socket?: string
  dataDir?: string
  http?: string
  grpc?: string
}

function bad (what: string): QuotadError {
  return new QuotadError(ErrorCodes.USAGE, what)
}

/** The config with node `name`'s entry overridden (or added as a non-seed member). */
export function withNodeOverrides (config: ClusterConfig, name: string, o: NodeOverrides, cwd = process.cwd()): ClusterConfig {
  if (!NAME_RE.test(name)) throw bad(`node name ${JSON.stringify(name)} must be ${NAME_TEXT}`)
  const patch: Partial<NodeConfig> = {}
  if (o.listen !== undefined) {
    const issue = listenIssue(o.listen)
    if (issue !== undefined) throw bad(`--listen ${issue}`)
    patch.listen = o.listen
  }
  if (o.socket !== undefined) {
    const socket = resolve(cwd, o.socket)
    if (Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES) throw bad(`--socket ${JSON.stringify(socket)} is longer than the ${MAX_SOCKET_PATH_BYTES} bytes a Unix socket path may have`)
    patch.socket = socket
  }
  if (o.dataDir !== undefined) patch.dataDir = resolve(cwd, o.dataDir)
  if (o.http !== undefined) {
    if (!HTTP_RE.test(o.http)) throw bad(`--http must be ${HTTP_TEXT}, got ${JSON.stringify(o.http)}`)
    patch.http = o.http
  }
  if (o.grpc !== undefined) {
    const g = grpcAddress(o.grpc, cwd)
    if ('issue' in g) throw bad(`--grpc ${g.issue}`)
    patch.grpc = g.address
  }
  const i = config.nodes.findIndex(n => n.name === name)
  let node: NodeConfig
  if (i >= 0) {
    node = { ...config.nodes[i], ...patch }
  } else {
    const missing = (['listen', 'socket', 'dataDir'] as const).filter(k => patch[k] === undefined)
    if (missing.length > 0) {
      throw new QuotadError(ErrorCodes.CONFIG_INVALID, `no node named ${JSON.stringify(name)} in ${config.source ?? 'the cluster file'} (available: ${config.nodes.map(n => n.name).join(', ')}); to join as a member, give ` +
        missing.map(k => k === 'dataDir' ? '--data-dir (QUOTAD_DATA_DIR)' : `--${k} (QUOTAD_${k.toUpperCase()})`).join(', '))
    }
    node = { name, listen: patch.listen as string, socket: patch.socket as string, dataDir: patch.dataDir as string, socketMode: DEFAULT_SOCKET_MODE, seed: false, ...(patch.http === undefined ? {} : { http: patch.http }), ...(patch.grpc === undefined ? {} : { grpc: patch.grpc }) }
  }
  const nodes = i >= 0 ? config.nodes.map((n, j) => j === i ? node : n) : [...config.nodes, node]
  for (const other of nodes) {
    if (other.name === name) continue
    if (other.socket === node.socket) throw bad(`socket ${node.socket} is node ${other.name}'s too`)
    if (other.dataDir === node.dataDir) throw bad(`data directory ${node.dataDir} is node ${other.name}'s too`)
  }
  return { ...config, nodes }
}

/** The overrides from the environment, then flags (flags win). */
export function overridesFrom (flags: { listen?: string, socket?: string, 'data-dir'?: string, http?: string, grpc?: string }, env: NodeJS.ProcessEnv): NodeOverrides {
  const o: NodeOverrides = {}
  const listen = flags.listen ?? env.QUOTAD_LISTEN
  const socket = flags.socket ?? env.QUOTAD_SOCKET
  const dataDir = flags['data-dir'] ?? env.QUOTAD_DATA_DIR
  if (listen !== undefined && listen !== '') o.listen = listen
  if (socket !== undefined && socket !== '') o.socket = socket
  if (dataDir !== undefined && dataDir !== '') o.dataDir = dataDir
  const http = flags.http ?? env.QUOTAD_HTTP
  if (http !== undefined && http !== '') o.http = http
  const grpc = flags.grpc ?? env.QUOTAD_GRPC
  if (grpc !== undefined && grpc !== '') o.grpc = grpc
  return o
}
