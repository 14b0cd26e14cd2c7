/** The attempt store under the login, auth, account-change and admin-key budgets (src/lib/attempts.ts). */
import t from 'tap'
import { budget, MemoryAttemptStore } from '../../src/lib/attempts.js'

t.test('reserve counts up to max per window; refusals are not counted and say when the window ends', async (t) => {
  let now = 1_000
  const store = new MemoryAttemptStore(100, () => now)
  const results = Array.from({ length: 5 }, () => store.reserve('k', 3, 60_000))
  t.same(results.map((r) => r.allowed), [true, true, true, false, false])
  now += 20_000
  t.same(store.reserve('k', 3, 60_000), { allowed: false, retryAfterMs: 40_000 }, 'the rest of the window')
  now += 40_000
  t.equal(store.reserve('k', 3, 60_000).allowed, true, 'a new window when the old one has ended')
  t.equal(store.reserve('other', 3, 60_000).allowed, true, 'keys are independent')
})

t.test('release gives an attempt back, only within the window it was taken in', async (t) => {
  let now = 0
  const store = new MemoryAttemptStore(100, () => now)
  const first = store.reserve('k', 1, 1000)
  if (!first.allowed) throw new Error('expected a reservation')
  t.equal(store.reserve('k', 1, 1000).allowed, false, 'used up')
  store.release(first.reservation)
  const second = store.reserve('k', 1, 1000)
  t.equal(second.allowed, true, 'released: available again')
  now = 1000
  const third = store.reserve('k', 1, 1000) // a new window, counted 1
  if (!second.allowed || !third.allowed) throw new Error('expected reservations')
  store.release(second.reservation) // from the old window: no effect
  t.equal(store.reserve('k', 1, 1000).allowed, false, 'a release from an ended window does not free the new one')
  store.release(third.reservation)
  store.release(third.reservation)
  t.equal(store.reserve('k', 1, 1000).allowed, true)
  t.equal(store.reserve('k', 1, 1000).allowed, false, 'a double release never takes the count below zero')
})

t.test('the store is bounded: when full, the windows that end first are dropped', async (t) => {
  let now = 0
  const store = new MemoryAttemptStore(3, () => now)
  for (const key of ['a', 'b', 'c', 'd', 'e']) { store.reserve(key, 1, 1000); now += 1 }
  t.equal(store.size, 3)
  t.equal(store.reserve('e', 1, 1000).allowed, false, 'the newest is kept')
  t.equal(store.reserve('a', 1, 1000).allowed, true, 'the oldest was dropped')
})

t.test('budget: 429 error with Retry-After in whole seconds', async (t) => {
  const headers: Record<string, string> = {}
  const reply = { header: (name: string, value: string) => { headers[name] = value } }
  const b = budget({ max: 1, timeWindow: 1500, refusal: (s) => Object.assign(new Error(`retry in ${s} s`), { statusCode: 429 }) })
  await b.spend('k', reply)
  await t.rejects(b.spend('k', reply), { message: 'retry in 2 s', statusCode: 429 })
  t.equal(headers['retry-after'], '2')
})
