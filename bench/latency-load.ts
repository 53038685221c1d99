/**
 * The background demand for the latency bench (bench/latency.ts), in a
 * process of its own: open-loop acquires of one key at a fixed rate on each
 * given socket, every 1 ms tick sending what the rate owes since the last
 * (fractions carry over), whether or not earlier replies came back. In its
 * own process so that its event loop never delays the bench's c=1 probe,
 * which is what is measured.
 *
 *   node dist/bench/latency-load.js --key KEY --rate 1000 SOCKET...
 *
 * Prints `{"sent":N,"allowed":A,"denied":D,"errors":E}` (totals) every
 * second; stops on SIGTERM.
 */
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { QuotadClient } from '@quotad/client'

async function main (): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { key: { type: 'string' }, rate: { type: 'string', default: '1000' } }
  })
  const key = values.key ?? 'lat'
  const rate = Number(values.rate)
  const clients = await Promise.all(positionals.map(async socketPath => await QuotadClient.connect({ socketPath, timeoutMs: 5000, reconnect: false })))
  const owed = clients.map(() => 0)
  const tally = { sent: 0, allowed: 0, denied: 0, errors: 0 }
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    const dt = now - last
    last = now
    for (let i = 0; i < clients.length; i++) {
      owed[i] += rate * dt / 1000
      while (owed[i] >= 1) {
        owed[i] -= 1
        tally.sent++
        clients[i].acquire(key).then(d => { if (d.allowed) tally.allowed++; else tally.denied++ }, () => { tally.errors++ })
      }
    }
  }, 1)
  const report = setInterval(() => { process.stdout.write(JSON.stringify(tally) + '\n') }, 1000)
  process.once('SIGTERM', () => {
    clearInterval(timer)
    clearInterval(report)
    void Promise.all(clients.map(async c => await c.close().catch(() => {}))).then(() => process.exit(0))
  })
}

main().catch(err => {
  process.stderr.write(`latency-load failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
