/**
 * `Promise.withResolvers` for Node 20. libp2p's peer store calls it (it is
 * ES2024; Node 22 has it), and without it start-up fails with
 * `TypeError: Promise.withResolvers is not a function`. This module must be
 * evaluated before any libp2p module: ESM evaluates imports in order, so
 * `libp2p-transport.ts` imports it first.
 */

interface Resolvers<T> {
  promise: Promise<T>
  resolve: (value: T | PromiseLike<T>) => void
  reject: (reason?: unknown) => void
}

const P = Promise as unknown as { withResolvers?: <T>() => Resolvers<T> }

if (typeof P.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    enumerable: false,
    value: function withResolvers<T> (): Resolvers<T> {
      let resolve!: Resolvers<T>['resolve']
      let reject!: Resolvers<T>['reject']
      const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej })
      return { promise, resolve, reject }
    }
  })
}

export {}
