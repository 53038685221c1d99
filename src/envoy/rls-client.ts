/**
 * A small client of Envoy's Rate Limit Service, on the same vendored protos
 * as the server: what Envoy sends, for tests, the benchmark and manual checks
 * (docs/envoy.md). Not used by the daemon.
 */
import { credentials, makeGenericClientConstructor, type Client, type ServiceError } from '@grpc/grpc-js'
import { rateLimitService, type RlsResponse } from './rls-proto.js'

export interface RlsCall {
  domain: string
  descriptors: Array<{ entries: Array<{ key: string, value: string }>, hits_addend?: { value: number } }>
  hits_addend?: number
}

type Unary = (req: RlsCall, opts: { deadline: number }, cb: (err: ServiceError | null, res?: RlsResponse) => void) => void

export class RlsClient {
  private readonly client: Client & { ShouldRateLimit: Unary }

  /** `address`: `unix:/path` or HOST:PORT, as the server's. */
  constructor (address: string) {
    const Ctor = makeGenericClientConstructor(rateLimitService(), 'RateLimitService')
    this.client = new Ctor(address, credentials.createInsecure()) as unknown as Client & { ShouldRateLimit: Unary }
  }

  /** One ShouldRateLimit call; rejects with the gRPC ServiceError (its `code` is the status). */
  async shouldRateLimit (req: RlsCall, timeoutMs = 30_000): Promise<RlsResponse> {
    return await new Promise((resolve, reject) => {
      // grpc-js takes deadlines as wall-clock instants only; a client's own timeout, not a decision's.
      this.client.ShouldRateLimit(req, { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err !== null) reject(err)
        else resolve(res as RlsResponse)
      })
    })
  }

  close (): void {
    this.client.close()
  }
}
