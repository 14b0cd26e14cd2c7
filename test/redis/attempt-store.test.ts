/**
 * RedisAttemptStore (src/plugins/redis-attempts.ts) against a real Redis: the same contract as
 * the in-memory store (test/abuse/attempts.test.ts), atomic across clients, and a store
 * that fails makes the budget answer 503 (fail closed).
 */
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { budget } from '../../src/lib/attempts.js'
import { RedisAttemptStore } from '../../src/plugins/redis-attempts.js'
import { redisClientOptions } from '../../src/plugins/redis.js'
import { testRedis, type TestRedis } from '../helpers/redis.js'

/** A client as the app opens it (prefix, no offline queue, bounded timeouts), closed at teardown. */
async function appClient (t: Test, redis: TestRedis): Promise<Redis> {
  const client = new Redis(redis.url, redisClientOptions({ keyPrefix: redis.prefix, connectTimeoutMs: 2000, commandTimeoutMs: 2000 }))
  client.on('error', () => {})
  t.teardown(() => client.disconnect())
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}

t.test('reserve counts up to max per window; refusals are not counted and say when the window ends', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const store = new RedisAttemptStore(await appClient(t, redis), 'unit')
  const results = []
  for (let i = 0; i < 5; i++) results.push(await store.reserve('k', 3, 60_000))
  t.same(results.map((r) => r.allowed), [true, true, true, false, false])
  const refused = results[4]
  if (refused === undefined || refused.allowed) throw new Error('expected a refusal')
  t.ok(refused.retryAfterMs > 50_000 && refused.retryAfterMs <= 60_000, `the rest of the window (${refused.retryAfterMs} ms)`)
  t.equal((await store.reserve('other', 3, 60_000)).allowed, true, 'keys are independent')
  const keys = (await redis.client.keys(`${redis.prefix}*`)).sort()
  t.same(keys, [`${redis.prefix}attempts:unit:k`, `${redis.prefix}attempts:unit:other`], 'keys under the prefix and the store name')
  const ttl = await redis.client.pttl(`${redis.prefix}attempts:unit:k`)
  t.ok(ttl > 0 && ttl <= 60_000, 'the window expires with its key')
})

t.test('release gives an attempt back, only within the window it was taken in, never below zero', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const store = new RedisAttemptStore(await appClient(t, redis), 'unit')
  const first = await store.reserve('k', 1, 60_000)
  if (!first.allowed) throw new Error('expected a reservation')
  t.equal((await store.reserve('k', 1, 60_000)).allowed, false, 'used up')
  await store.release(first.reservation)
  const second = await store.reserve('k', 1, 60_000)
  if (!second.allowed) throw new Error('released: available again')
  t.equal(second.reservation.windowStart, first.reservation.windowStart, 'the same window')

  // A new window (the old key ended): a release from the old one leaves it alone.
  await redis.client.del(`${redis.prefix}attempts:unit:k`)
  await new Promise((resolve) => setTimeout(resolve, 5)) // a later millisecond for the new window's start
  const third = await store.reserve('k', 1, 60_000)
  if (!third.allowed) throw new Error('expected a reservation')
  t.not(third.reservation.windowStart, second.reservation.windowStart, 'a new window has a new start')
  await store.release(second.reservation)
  t.equal((await store.reserve('k', 1, 60_000)).allowed, false, 'a release from an ended window does not free the new one')
  await store.release(third.reservation)
  await store.release(third.reservation)
  t.equal((await store.reserve('k', 1, 60_000)).allowed, true)
  t.equal((await store.reserve('k', 1, 60_000)).allowed, false, 'a double release never takes the count below zero')
})

t.test('a window ends when its key expires', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const store = new RedisAttemptStore(await appClient(t, redis), 'unit')
  t.equal((await store.reserve('short', 1, 1000)).allowed, true)
  t.equal((await store.reserve('short', 1, 1000)).allowed, false)
  // Wait for Redis to expire the key (no fixed sleep: poll, with a generous deadline).
  const deadline = Date.now() + 10_000
  while (await redis.client.exists(`${redis.prefix}attempts:unit:short`) === 1 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal((await store.reserve('short', 1, 1000)).allowed, true, 'a new window')
})

t.test('atomic across clients: 200 reservations at once from two clients, max 10: exactly 10 allowed', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const stores = [new RedisAttemptStore(await appClient(t, redis), 'race'), new RedisAttemptStore(await appClient(t, redis), 'race')]
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => stores[i % 2]!.reserve('k', 10, 60_000)))
  t.equal(results.filter((r) => r.allowed).length, 10)
  t.equal(await redis.client.hget(`${redis.prefix}attempts:race:k`, 'c'), '10', 'the stored count')
  // Concurrent releases and reservations keep the count exact too.
  const reservations = results.flatMap((r) => r.allowed ? [r.reservation] : [])
  await Promise.all(reservations.map((r, i) => stores[i % 2]!.release(r)))
  const again = await Promise.all(Array.from({ length: 50 }, (_, i) => stores[i % 2]!.reserve('k', 10, 60_000)))
  t.equal(again.filter((r) => r.allowed).length, 10, 'all ten given back, ten again')
})

t.test('a store that does not answer: the budget answers 503 with Retry-After (fail closed); release errors are swallowed', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const client = await appClient(t, redis)
  const store = new RedisAttemptStore(client, 'down')
  const headers: Record<string, string> = {}
  const reply = { header: (name: string, value: string) => { headers[name] = value } }
  const b = budget({ max: 5, timeWindow: 60_000, store, refusal: (s) => Object.assign(new Error(`retry in ${s} s`), { statusCode: 429 }) })
  const reservation = await b.spend('k', reply)
  client.disconnect() // no offline queue: commands now fail at once
  await t.rejects(b.spend('k', reply), { statusCode: 503, code: 'SERVICE_UNAVAILABLE' })
  t.equal(headers['retry-after'], '5')
  await t.resolves(b.release(reservation), 'a failed release does not fail the request')
})
