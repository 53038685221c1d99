/**
 * A member's forwarded acquires in flight to one seed (forward-slots.ts):
 * at most `per` at once; the rest wait in order for a slot, each until its
 * own deadline, and one whose deadline passes is expired, never sent.
 */
import test from 'ava'
import { ForwardSlots } from '../src/cluster/forward-slots.js'

function gate (): { promise: Promise<void>, open: () => void } {
  let open!: () => void
  const promise = new Promise<void>(resolve => { open = resolve })
  return { promise, open }
}

test('a full seed queues the next forward until a slot frees; a queued one past its deadline expires unsent; other seeds are not held up', async t => {
  const slots = new ForwardSlots(1)
  const started: string[] = []
  const expired: string[] = []
  const a = gate()
  slots.run('s1', 10_000, release => { started.push('a'); void a.promise.then(release) }, () => expired.push('a'))
  const bDone = gate()
  slots.run('s1', 10_000, release => { started.push('b'); release(); bDone.open() }, () => expired.push('b'))
  const cExpired = gate()
  slots.run('s1', 1, release => { started.push('c'); release() }, () => { expired.push('c'); cExpired.open() })
  slots.run('s2', 10_000, release => { started.push('d'); release() }, () => expired.push('d'))
  t.deepEqual(started, ['a', 'd'], 'one in flight to s1; s2 has its own slots')
  t.is(slots.queued, 2)
  await cExpired.promise
  t.deepEqual(expired, ['c'])
  a.open()
  await bDone.promise
  t.deepEqual(started, ['a', 'd', 'b'], 'b went when a was answered; c never did')
  t.is(slots.queued, 0)
})
