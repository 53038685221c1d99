/**
 * `@quotad/client/wire`: the protocol's codec, both directions. The client
 * uses the request writers and reply readers; the daemon imports the same
 * module for the reply writers and the flat-request reader, so the two sides
 * cannot drift apart. Apps do not need it: it is not a stable API.
 */
export * from './frame.js'
export * from './out-buffer.js'
export * from './fast-read.js'
export * from './fast-write.js'
export * from './messages.js'
