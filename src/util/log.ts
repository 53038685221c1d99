/**
 * Structured logs: one JSON object per line on stderr, with a timestamp, a
 * level, the component and the message, plus any fields. Only the daemon and
 * the CLIs log; library code (core, protocol, server, client) never does.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }
export const LOG_LEVELS = Object.keys(ORDER) as LogLevel[]

export interface Logger {
  debug: (msg: string, fields?: Record<string, unknown>) => void
  info: (msg: string, fields?: Record<string, unknown>) => void
  warn: (msg: string, fields?: Record<string, unknown>) => void
  error: (msg: string, fields?: Record<string, unknown>) => void
  child: (component: string) => Logger
}

export interface LoggerOptions {
  level?: LogLevel
  component?: string
  /** Where lines go. @default process.stderr */
  write?: (line: string) => void
  /** Extra fields on every line, e.g. the node name. */
  base?: Record<string, unknown>
}

export function createLogger (opts: LoggerOptions = {}): Logger {
  const min = ORDER[opts.level ?? 'info']
  const write = opts.write ?? ((line: string) => { process.stderr.write(line) })
  const base = opts.base ?? {}
  const make = (component: string): Logger => {
    const emit = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
      if (ORDER[level] < min) return
      write(JSON.stringify({ time: new Date().toISOString(), level, component, msg, ...base, ...fields }, errorReplacer) + '\n')
    }
    return {
      debug: emit('debug'),
      info: emit('info'),
      warn: emit('warn'),
      error: emit('error'),
      child: (c: string) => make(component === '' ? c : `${component}:${c}`)
    }
  }
  return make(opts.component ?? 'quotad')
}

/** Errors serialize to their code and message instead of `{}`. */
function errorReplacer (_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code
    return code !== undefined ? { code, message: value.message } : { message: value.message }
  }
  return value
}

export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger
}
