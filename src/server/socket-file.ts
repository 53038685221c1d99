/**
 * The life of the socket file on disk: who may take the path, with which
 * permission bits it appears, and when it goes away.
 *
 * - Before listening (`prepareSocketPath`): a regular file, directory or
 *   symlink at the path is never touched (E_SOCKET_IN_USE); a socket that
 *   accepts a connection belongs to a live daemon (E_SOCKET_IN_USE); a socket
 *   that refuses (ECONNREFUSED) is stale and is unlinked. A missing parent
 *   directory is created with mode 0o750.
 * - While listening (`listenOnSocket`): the process umask is narrowed around
 *   the synchronous bind, so the file is born with at most `mode` and there is
 *   no window in which a wider set of users could connect; then chmod makes
 *   the bits exact (umask can only remove bits, and default ACLs may differ).
 *   The bind happens at a temporary name that is then hard-linked into place
 *   (see `listenOnSocket` for why).
 * - On close (`removeSocketFile`): unlink only if the path still holds our
 *   inode, so a daemon that started after us on the same path keeps its file.
 */
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { ErrorCodes, QuotadError } from '../errors.js'
import { makeDirs } from '../util/make-dirs.js'

/** Longest `sun_path` the kernel accepts (108 bytes with the terminating NUL on Linux). */
export const MAX_SOCKET_PATH_BYTES = 107
const PROBE_TIMEOUT_MS = 1000

/** What identifies the file we created, to tell it apart from a successor's. */
export interface SocketFileIdentity {
  dev: number
  ino: number
}

export async function prepareSocketPath (socketPath: string): Promise<void> {
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT,
      `socket path ${socketPath} is ${Buffer.byteLength(socketPath)} bytes; Unix sockets allow at most ${MAX_SOCKET_PATH_BYTES}`)
  }
  let st: fs.Stats
  try {
    st = await fs.promises.lstat(socketPath)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw pathError(socketPath, err)
    const dir = path.dirname(socketPath)
    try {
      // mkdir's mode is filtered by the process umask, which a concurrent bind in
      // this process may have narrowed for a moment: set the mode explicitly.
      for (const d of await makeDirs(dir, 0o750)) await fs.promises.chmod(d, 0o750)
    } catch (err) {
      throw pathError(socketPath, err)
    }
    return
  }
  if (!st.isSocket()) {
    throw new QuotadError(ErrorCodes.SOCKET_IN_USE,
      `${socketPath} exists and is not a socket; refusing to replace it (remove it or choose another socket path)`)
  }
  const probe = await probeSocket(socketPath)
  if (probe === 'live') {
    throw new QuotadError(ErrorCodes.SOCKET_IN_USE, `another quotad is serving ${socketPath}`)
  }
  if (probe === 'stale') {
    try {
      await fs.promises.unlink(socketPath)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
    return
  }
  throw new QuotadError(ErrorCodes.SOCKET_IN_USE, `cannot tell whether ${socketPath} is in use: ${probe}`)
}

/** E_SOCKET_PATH: the path cannot hold a socket (a part is a file, a folder cannot be made or entered). */
function pathError (socketPath: string, err: unknown): QuotadError {
  const e = err as NodeJS.ErrnoException
  const why = e.code === 'ENOTDIR'
    ? `${fileAlong(socketPath) ?? 'a part of it'} is not a directory`
    : e.code === 'EACCES' || e.code === 'EPERM'
      ? `permission denied${e.path !== undefined ? ` at ${e.path}` : ''}`
      : e.code === 'ENOENT' || e.code === 'EROFS'
        ? `its folder cannot be created${e.path !== undefined ? ` (${e.path}: ${e.code})` : ''}`
        : e.message
  return new QuotadError(ErrorCodes.SOCKET_PATH, `socket path ${socketPath} cannot be used: ${why}; choose another --socket (or nodes[].socket)`, { errno: e.code })
}

/** The nearest ancestor of `p` that exists and is not a directory (what ENOTDIR complains of), if any. */
function fileAlong (p: string): string | undefined {
  for (let d = path.dirname(p); d !== path.dirname(d); d = path.dirname(d)) {
    try {
      if (!fs.statSync(d).isDirectory()) return d
    } catch {
      // missing or not reachable: look further up
    }
  }
  return undefined
}

/** 'live': something accepted; 'stale': nobody listens; anything else: why we could not tell. */
function probeSocket (socketPath: string): Promise<'live' | 'stale' | string> {
  return new Promise(resolve => {
    const sock = net.connect(socketPath)
    const timer = setTimeout(() => { sock.destroy(); resolve(`no answer within ${PROBE_TIMEOUT_MS} ms`) }, PROBE_TIMEOUT_MS)
    sock.once('connect', () => {
      clearTimeout(timer)
      sock.destroy()
      resolve('live')
    })
    sock.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      sock.destroy()
      // ENOENT: it vanished between lstat and connect, which is as good as stale.
      resolve(err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? 'stale' : (err.code ?? err.message))
    })
  })
}

/**
 * Listen on `socketPath` so that the file appears with exactly `mode`.
 * Call `prepareSocketPath` first. Resolves with the file's identity.
 *
 * The socket is bound at a private temporary name in the same directory,
 * chmod'ed, and then hard-linked to `socketPath`: link(2) fails if the path
 * exists, so taking the path is atomic and exclusive, and the path never
 * shows other permission bits. The temporary name matters for another reason:
 * libuv unlinks the name it bound when the server closes, unconditionally, so
 * binding `socketPath` itself would let a stopping daemon delete the socket of
 * a daemon that replaced it. (If the temporary name would be too long for
 * sun_path, or the filesystem has no hard links, this falls back to binding
 * `socketPath` directly.)
 */
export async function listenOnSocket (server: net.Server, socketPath: string, mode: number): Promise<SocketFileIdentity> {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    throw new QuotadError(ErrorCodes.BAD_ARGUMENT, `socketMode must be permission bits in [0, 0o777], got ${mode}`)
  }
  const tmp = path.join(path.dirname(socketPath), `.qd-${process.pid.toString(36)}-${randomBytes(3).toString('hex')}`)
  if (Buffer.byteLength(tmp) <= MAX_SOCKET_PATH_BYTES) {
    await bind(server, tmp, mode, socketPath)
    let linked = false
    try {
      await fs.promises.chmod(tmp, mode)
      await fs.promises.link(tmp, socketPath)
      linked = true
    } catch (err) {
      await new Promise(resolve => server.close(resolve))
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new QuotadError(ErrorCodes.SOCKET_IN_USE, `another quotad is serving ${socketPath}`)
      }
      // A filesystem without hard links: bind the path itself below.
    } finally {
      await fs.promises.unlink(tmp).catch(() => {})
    }
    if (linked) return identify(socketPath)
  }
  await bind(server, socketPath, mode, socketPath)
  try {
    await fs.promises.chmod(socketPath, mode)
    return await identify(socketPath)
  } catch (err) {
    await new Promise(resolve => server.close(resolve))
    throw err
  }
}

async function identify (socketPath: string): Promise<SocketFileIdentity> {
  const st = await fs.promises.lstat(socketPath)
  return { dev: st.dev, ino: st.ino }
}

function bind (server: net.Server, bindPath: string, mode: number, socketPath: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.removeListener('listening', onListening)
      if (err.code === 'EADDRINUSE') {
        reject(new QuotadError(ErrorCodes.SOCKET_IN_USE, `another quotad is serving ${socketPath}`))
      } else {
        reject(err)
      }
    }
    const onListening = (): void => {
      server.removeListener('error', onError)
      resolve()
    }
    server.once('error', onError)
    server.once('listening', onListening)
    // bind(2) runs synchronously inside listen() for a pipe (outside cluster
    // workers), so the umask is back to normal before any other JavaScript
    // runs, and the file is never created with more than `mode`.
    const previous = setUmask(~mode & 0o777)
    try {
      server.listen(bindPath)
    } finally {
      if (previous !== null) setUmask(previous)
    }
  })
}

/** Set the umask; null where it cannot be set (worker threads): chmod still makes the bits exact. */
function setUmask (mask: number): number | null {
  try {
    return process.umask(mask)
  } catch {
    return null
  }
}

/** Unlink the socket file if it is still the one we created. Never throws. */
export function removeSocketFile (socketPath: string, identity: SocketFileIdentity): void {
  try {
    const st = fs.lstatSync(socketPath)
    if (st.isSocket() && st.ino === identity.ino && st.dev === identity.dev) fs.unlinkSync(socketPath)
  } catch {
    // Already gone, or not ours to judge: either way nothing to clean up.
  }
}
