/**
 * The limiter's sharded key table (src/core/key-table.ts) behaves as one Map
 * would, except for the order of iteration and keys added during a pass (they
 * may be skipped): same lookups, same size, every kept key visited once per
 * pass, deleted ones not, live iteration across shards rebuilt under it.
 */
import test from 'ava'
import { KeyTable } from '../src/core/key-table.js'
import type { KeyState } from '../src/core/key-state.js'

/** Stand-ins: the table only stores and returns them. */
const state = (key: string): KeyState => ({ key }) as unknown as KeyState

/** Deterministic pseudo-random numbers (xorshift), so a failure repeats. */
function rng (seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    return (x >>> 0) / 2 ** 32
  }
}

test('random sets and deletes agree with a Map, keys of every length', t => {
  const table = new KeyTable()
  const ref = new Map<string, KeyState>()
  const r = rng(42)
  const keys = Array.from({ length: 500 }, (_, i) => i % 7 === 0 ? 'k'.repeat(i % 20) : `tenant:${i % 13}:user:${i}`)
  for (let step = 0; step < 20_000; step++) {
    const k = keys[Math.floor(r() * keys.length)]
    if (r() < 0.6) {
      const v = state(k)
      table.set(k, v)
      ref.set(k, v)
    } else {
      t.is(table.delete(k), ref.delete(k))
    }
    if (step % 997 === 0) {
      t.is(table.size, ref.size)
      for (const key of keys) t.is(table.get(key), ref.get(key))
    }
  }
  t.is(table.size, ref.size)
  const seen = [...table.values()]
  t.is(seen.length, ref.size)
  // Each state once, the very object the Map holds for its key (the order differs: shard by shard).
  t.is(new Set(seen).size, seen.length)
  for (const ks of seen) t.is(ref.get(ks.key), ks)
})

test('overwriting a key keeps the size and returns the new state', t => {
  const table = new KeyTable()
  const a = state('x')
  const b = state('x')
  table.set('x', a)
  table.set('x', b)
  t.is(table.size, 1)
  t.is(table.get('x'), b)
  t.true(table.delete('x'))
  t.false(table.delete('x'))
  t.is(table.size, 0)
  t.deepEqual([...table.values()], [])
})

test('iteration is live: keys deleted before they are reached are skipped, keys added are visited once', t => {
  const table = new KeyTable()
  const keys = Array.from({ length: 200 }, (_, i) => `mem:user:${i}`)
  for (const k of keys) table.set(k, state(k))
  const it = table.values()
  const seen = new Set<string>()
  let added = 0
  for (let r = it.next(); r.done !== true; r = it.next()) {
    const k = r.value.key
    t.false(seen.has(k), `visited twice: ${k}`)
    seen.add(k)
    if (seen.size === 50) {
      // Delete every key not yet visited with an even index, add 100 new ones.
      for (let i = 0; i < keys.length; i += 2) if (!seen.has(keys[i])) table.delete(keys[i])
      for (let i = 0; i < 100; i++) { table.set(`late:${i}`, state(`late:${i}`)); added++ }
    }
  }
  // Every key that stayed in the table was visited (it was there before the pass began).
  for (const k of keys) if (table.get(k) !== undefined) t.true(seen.has(k), `not visited: ${k}`)
  // Deleted before being reached: never visited.
  const deleted = keys.filter(k => table.get(k) === undefined)
  t.true(deleted.length > 0)
  for (const k of deleted) t.false(seen.has(k), `visited after its deletion: ${k}`)
  t.is(added, 100)
  // A new pass sees exactly what the table holds.
  t.is([...table.values()].length, table.size)
})

test('keys that differ in their digits spread over every shard', t => {
  const table = new KeyTable()
  for (let i = 0; i < 16_000; i++) table.set(`mem:user:${i}`, state(`mem:user:${i}`))
  const shards = (table as unknown as { shards: Array<{ live: number }> }).shards
  t.is(shards.length, 16)
  for (const m of shards) t.true(m.live > 16_000 / 16 / 2 && m.live < 16_000 / 16 * 2, `uneven shard: ${m.live}`)
})

test('a pass over shards that grow, shrink and are rebuilt under it: kept keys once, deleted ones never, no state twice', t => {
  for (let seed = 1; seed <= 30; seed++) {
    const r = rng(seed)
    const table = new KeyTable()
    let next = 0
    const add = (): void => { const k = `k:${next++}`; table.set(k, state(k)) }
    for (let i = 0; i < 50 + Math.floor(r() * 3000); i++) add()
    const atStart = new Set([...table.values()])
    const deleted = new Set<KeyState>()
    const seen = new Set<KeyState>()
    const it = table.values()
    for (let x = it.next(); x.done !== true; x = it.next()) {
      const ks = x.value
      t.false(seen.has(ks), `seed ${seed}: ${ks.key} visited twice`)
      seen.add(ks)
      t.is(table.get(ks.key), ks, `seed ${seed}: ${ks.key} visited while not in the table`)
      const op = r()
      if (op < 0.02) {
        // A burst of new keys: shards grow under the pass.
        for (let i = Math.floor(r() * 2000); i > 0; i--) add()
      } else if (op < 0.04) {
        // A burst of deletes of random live keys: shards shrink under the pass.
        for (const other of [...table.values()]) {
          if (r() < 0.7) { table.delete(other.key); deleted.add(other) }
        }
      } else if (op < 0.3) {
        const k = `k:${Math.floor(r() * next)}`
        const had = table.get(k)
        if (had !== undefined && table.delete(k)) deleted.add(had)
      }
    }
    t.is(it.next().done, true, 'done stays done')
    for (const ks of atStart) if (!deleted.has(ks)) t.true(seen.has(ks), `seed ${seed}: ${ks.key} was kept but not visited`)
    t.is([...table.values()].length, table.size)
  }
})

test('a state is stored under its own key only; a shard emptied by deletes gives its slots back', t => {
  const table = new KeyTable()
  t.throws(() => table.set('a', state('b')), { message: /stored under/ })
  for (let i = 0; i < 20_000; i++) table.set(`k:${i}`, state(`k:${i}`))
  const shards = (table as unknown as { shards: Array<{ fps: Uint8Array, live: number }> }).shards
  const slots = (): number => shards.reduce((n, s) => n + s.fps.length, 0)
  // At most 80% used, grown at 40% live: between 1.25 and 5 slots a key.
  t.true(slots() >= 20_000 * 1.25 && slots() <= 20_000 * 5, `${slots()} slots`)
  for (let i = 0; i < 19_990; i++) t.true(table.delete(`k:${i}`))
  t.is(table.size, 10)
  t.true(slots() <= 16 * 32, `${slots()} slots for 10 keys`)
  for (let i = 19_990; i < 20_000; i++) t.is(table.get(`k:${i}`)?.key, `k:${i}`)
})
