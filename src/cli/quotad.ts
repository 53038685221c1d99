#!/usr/bin/env node
/**
 * `quotad` entry point. It does one thing before anything else is loaded:
 * take over SIGTERM and SIGINT. Loading libp2p takes a while, and a signal
 * in that time must not kill the process with the default action (exit 143
 * with the state file saying "running", which makes the next start an
 * unclean one and strands the node's share). A signal that comes before the
 * daemon has started is remembered, and quotad-main.ts stops cleanly as soon
 * as it can: before the daemon touched anything, by exiting; after, by a
 * graceful stop.
 */
import { earlySignals } from './signals.js'

earlySignals.install()
const { main } = await import('./quotad-main.js')
await main(process.argv.slice(2))
