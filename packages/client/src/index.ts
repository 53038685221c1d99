/**
 * `@quotad/client`: talk to the local quotad over its Unix socket.
 *
 *   import { QuotadClient, QuotadError } from '@quotad/client'
 *   const q = await QuotadClient.connect({ socketPath: '/run/quotad/quotad.sock' })
 *   const d = await q.acquire('payments')        // { allowed, remaining, retryAfterMs, ... }
 *
 * See README.md beside this package for waiting, batches, errors and
 * reconnects, and docs/client-protocol.md in the repository for the wire format.
 */
export { QuotadClient } from './client.js'
export { ErrorCodes, QuotadError, isQuotadError, type ErrorCode } from './errors.js'
export { CLIENT_DEFAULTS, type AcquireOptions, type BatchItemInput, type ClientOptions, type PeekOptions } from './options.js'
export type { Decision } from './decision.js'
export type { BatchResult, WireError } from './wire/messages.js'
