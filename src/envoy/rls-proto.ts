/**
 * Envoy's Rate Limit Service v3, loaded at run time from the vendored,
 * unchanged .proto files (proto/README.md), and the TypeScript shapes of its
 * messages as @grpc/proto-loader presents them with LOAD_OPTIONS: field names
 * as in the .proto (snake_case), enums as their names, 64-bit integers as
 * numbers, unset message fields as null.
 */
import { fileURLToPath } from 'node:url'
import { loadSync, type Options } from '@grpc/proto-loader'
import { loadPackageDefinition, type ServiceDefinition } from '@grpc/grpc-js'

/** The folder of vendored protos: dist/src/envoy/ -> the package root. */
export const PROTO_DIR = fileURLToPath(new URL('../../../proto/', import.meta.url))
export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto'

export const LOAD_OPTIONS: Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] }

export interface RlsEntry { key: string, value: string }

export interface RlsDescriptor {
  entries: RlsEntry[]
  /** A per-request limit override: not honoured (docs/envoy.md); null when unset. */
  limit: { requests_per_unit: number, unit: string } | null
  /** Overrides the request's hits_addend for this descriptor; 0 checks without counting. */
  hits_addend: { value: number } | null
}

export interface RlsRequest {
  domain: string
  descriptors: RlsDescriptor[]
  hits_addend: number
}

export type RlsCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT'
export type RlsUnit = 'UNKNOWN' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR'

export interface RlsDuration { seconds: number, nanos: number }

export interface RlsDescriptorStatus {
  code: RlsCode
  current_limit?: { name: string, requests_per_unit: number, unit: RlsUnit }
  limit_remaining: number
  duration_until_reset?: RlsDuration
}

export interface RlsHeader { key: string, value: string }

export interface RlsResponse {
  overall_code: RlsCode
  statuses: RlsDescriptorStatus[]
  response_headers_to_add: RlsHeader[]
}

let service: ServiceDefinition | undefined

/** The RateLimitService definition (loaded once; the protos are parsed in some tens of ms). */
export function rateLimitService (): ServiceDefinition {
  if (service === undefined) {
    const pkg = loadPackageDefinition(loadSync(RLS_PROTO, LOAD_OPTIONS)) as unknown as {
      envoy: { service: { ratelimit: { v3: { RateLimitService: { service: ServiceDefinition } } } } }
    }
    service = pkg.envoy.service.ratelimit.v3.RateLimitService.service
  }
  return service
}
