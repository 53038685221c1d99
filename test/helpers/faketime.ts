/**
 * libfaketime, to start a real quotad whose wall clock is off (its monotonic
 * clock stays real): Debian's `faketime` package, installed here if missing
 * and this process may (root, apt-get). undefined: not to be had.
 */
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const LIBS = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1']

export function faketimeLib (): string | undefined {
  const found = (): string | undefined => LIBS.find(l => existsSync(l))
  if (found() !== undefined || process.getuid?.() !== 0) return found()
  try {
    execFileSync('apt-get', ['install', '-y', '-q', 'faketime'], { stdio: 'ignore', timeout: 120_000 })
  } catch {
    try {
      execFileSync('apt-get', ['update', '-q'], { stdio: 'ignore', timeout: 120_000 })
      execFileSync('apt-get', ['install', '-y', '-q', 'faketime'], { stdio: 'ignore', timeout: 120_000 })
    } catch {
      // Not to be had here: the caller skips what needs it.
    }
  }
  return found()
}

/** The environment that puts a process's wall clock `offset` off (e.g. "+10s"); monotonic time stays real. */
export function faketimeEnv (lib: string, offset: string): Record<string, string> {
  return { LD_PRELOAD: lib, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' }
}

/**
 * The environment that puts a process's wall clock off by what `file` says
 * (e.g. "-10s"), read again at most every second: writing "+0s" to it sets
 * the clock right while the process runs (bench/lib/chaos-run.ts does the
 * same). Monotonic time stays real.
 */
export function faketimeFileEnv (lib: string, file: string): Record<string, string> {
  // The multi-threaded build where there is one: the file is read from the transport's worker thread too.
  const mt = lib.replace('libfaketime.so.1', 'libfaketimeMT.so.1')
  return { LD_PRELOAD: existsSync(mt) ? mt : lib, FAKETIME_TIMESTAMP_FILE: file, FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' }
}
