/**
 * Envoy RLS test helpers: envoyproxy/ratelimit's example configs as
 * `envoy.domains` entries (test/fixtures/envoy-ratelimit, copied unchanged
 * from github.com/envoyproxy/ratelimit, Apache-2.0), and a one-node daemon
 * in this process serving the RLS on a loopback port, with a gRPC client.
 */
import { readFileSync } from 'node:fs'
import { parseAllDocuments } from 'yaml'
import { Daemon } from '../../src/daemon.js'
import { validateClusterFile } from '../../src/config/validate.js'
import type { Clock } from '../../src/clock.js'
import { silentLogger } from '../../src/util/log.js'
import { RlsClient, type RlsCall } from '../../src/envoy/rls-client.js'
import { tempDir } from './proc.js'

type Json = Record<string, unknown>

/** An envoyproxy/ratelimit YAML file's domains, as they go under `envoy.domains` (the same shape). */
export function ratelimitDomains (file: string): Json[] {
  const text = readFileSync(new URL(`../../../test/fixtures/envoy-ratelimit/${file}`, import.meta.url), 'utf8')
  return parseAllDocuments(text).map(d => d.toJS() as Json).filter(d => d !== null)
}

/** example.yaml without what quotad does not implement (replaces, quota_mode, metadata). */
export function supportedExample (): Json[] {
  return JSON.parse(JSON.stringify(ratelimitDomains('example.yaml')), (k, v: unknown) => ['replaces', 'quota_mode', 'metadata'].includes(k) ? undefined : v) as Json[]
}

/** A descriptor of `[key, value]` entries, as Envoy sends it. */
export function desc (...entries: Array<[string, string]>): RlsCall['descriptors'][number] {
  return { entries: entries.map(([key, value]) => ({ key, value })) }
}

export interface RlsNode {
  daemon: Daemon
  client: RlsClient
  close: () => Promise<void>
}

/** One node with the given envoy section and rules, its RLS on 127.0.0.1:0. */
export async function startRlsNode (envoy: Json, rules: unknown[] = [], clock?: Clock): Promise<RlsNode> {
  const dir = tempDir()
  const raw = { nodes: [{ name: 'a', socket: 'a.sock', dataDir: 'data', grpc: '127.0.0.1:0' }], rules, envoy }
  const daemon = await Daemon.start({ config: validateClusterFile(raw, dir), node: 'a', logger: silentLogger, ...(clock === undefined ? {} : { clock }) })
  const client = new RlsClient(daemon.rls?.address ?? '')
  return {
    daemon,
    client,
    close: async () => {
      client.close()
      await daemon.stop()
    }
  }
}
