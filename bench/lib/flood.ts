/**
 * The flooding side of bench/fairness.ts, run in a child process of its own
 * so that its work never delays the quiet client's event loop: N connections
 * that each write one kind of request as fast as the daemon takes them, and
 * read (and count) every reply, so the daemon never stops them for not
 * reading.
 *
 * Each connection cycles through one block of whole frames, written in 64 KiB
 * pieces (the block ends on a frame boundary, so the stream stays framed
 * across the wrap-around).
 */
import net from 'node:net'
import { FrameDecoder, encodeMessage } from '@quotad/client/wire'
import { fuzzFrames } from '../../test/helpers/fuzz-frames.js'

export const FLOOD_KINDS = ['fuzz', 'acquire', 'batch', 'status'] as const
export type FloodKind = typeof FLOOD_KINDS[number]

const PIECE_BYTES = 64 * 1024

/** One block of frames of `kind`: what a flooding connection writes over and over. */
export function floodBlock (kind: FloodKind, seed: number): Buffer {
  switch (kind) {
    case 'fuzz':
      // Fuzzed frames (mostly small, some with 1,000-item batches): errors of every kind.
      return Buffer.concat([...fuzzFrames(seed, 20_000)].map(f => f.frame))
    case 'acquire':
      return Buffer.concat(Array.from({ length: 4000 }, (_, i) => encodeMessage({ id: i + 1, op: 'acquire', key: `bench:${i % 1000}` })))
    case 'batch':
      return Buffer.concat(Array.from({ length: 100 }, (_, i) => encodeMessage({
        id: i + 1, op: 'batch', items: Array.from({ length: 100 }, (_, j) => ({ key: `bench:${(i * 100 + j) % 1000}` }))
      })))
    case 'status':
      return Buffer.concat(Array.from({ length: 1000 }, (_, i) => encodeMessage({ id: i + 1, op: 'status' })))
  }
}

export interface FloodResult {
  sentBytes: number
  replies: number
}

/** Connect `conns` connections and flood until SIGTERM; then print a FloodResult as JSON on stdout and exit. */
export async function runFlood (socketPath: string, kind: FloodKind, conns: number, seed: number): Promise<void> {
  const block = floodBlock(kind, seed)
  const result: FloodResult = { sentBytes: 0, replies: 0 }
  const sockets: net.Socket[] = []
  for (let c = 0; c < conns; c++) {
    const socket = net.connect(socketPath)
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve)
      socket.once('error', reject)
    })
    socket.on('error', () => {})
    const decoder = new FrameDecoder({
      onFrame: () => { result.replies++ },
      onFrameTooLarge: () => { socket.destroy() }
    }, 64 * 1024 * 1024)
    socket.on('data', (chunk: Buffer) => decoder.push(chunk))
    sockets.push(socket)
  }
  for (const socket of sockets) {
    let off = 0
    const pump = (): void => {
      while (!socket.destroyed) {
        const end = Math.min(off + PIECE_BYTES, block.length)
        const piece = block.subarray(off, end)
        off = end === block.length ? 0 : end
        result.sentBytes += piece.length
        if (!socket.write(piece)) {
          socket.once('drain', pump)
          return
        }
      }
    }
    pump()
  }
  process.once('SIGTERM', () => {
    process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
  })
  process.stdout.write('ready\n')
}
