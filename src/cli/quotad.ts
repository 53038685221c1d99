#!/usr/bin/env -S node --max-semi-space-size=1
/**
 * `quotad` entry point.
 *
 * The node flag on the first line caps V8's young generation at a 1 MiB
 * semi-space: under node's defaults it grows to 2 x 16 MiB and stays
 * resident, which took a node holding 1M keys from ~194 to ~218 MB RSS
 * (bench/memory.ts). V8 reads it only when it sets up the heap, so it must
 * be on node's command line: this line for the `quotad` bin, and the deploy/
 * unit and image pass it too. Its cost to decision latency could not be told
 * from run-to-run noise (bench/results/semi-space-latency-*.txt).
 * bench/memory.ts measures a process started with the flags of this line.
 * It does one thing before anything else is loaded:
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
