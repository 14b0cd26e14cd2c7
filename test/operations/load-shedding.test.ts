/**
 * Load shedding (src/plugins/load-shedding.ts): a really blocked event loop (a busy loop in
 * this process, the app's own) makes requests answer 503 OVERLOADED in problem details with
 * Retry-After, `/health/ready` included; `/health/live` and `/metrics` are still served;
 * the shedding is counted and ends by itself once the loop is free again.
 */
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { loadConfig } from '../../src/config.js'
import { build, TEST_ENV, type TestApp } from '../helpers/build.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
const THRESHOLD_MS = 100
const SHEDDING_ENV = { MAX_EVENT_LOOP_DELAY_MS: String(THRESHOLD_MS) }
const SHEDDING_TUNING = { sampleIntervalMs: 200, retryAfterSeconds: 3 }

/** Blocks the event loop (this process's, so the app's) for `ms`. */
function busy (ms: number): void {
  const end = Date.now() + ms
  while (Date.now() < end) { /* the event loop is blocked */ }
}

/** Blocks the loop, then waits (a few turns) until the app's sampler has seen the delay. */
async function blockUntilSeen (app: TestApp): Promise<number> {
  // 3 s blocked within a 200 ms sample of 10 ms ticks: a mean delay of at least ~130 ms. On a
  // machine loaded by other builds the sample can straddle the block; then block once more.
  for (let attempt = 0; attempt < 3; attempt++) {
    busy(3000)
    const until = Date.now() + 2000
    while (Date.now() < until) {
      const { eventLoopDelay } = app.memoryUsage()
      if (eventLoopDelay > THRESHOLD_MS) return eventLoopDelay
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  throw new Error('the sampler never saw the blocked loop')
}

/**
 * Polls `url` until it answers 200 (at most 10 s): the status and how long it took. On a
 * machine loaded by other builds the app's own start or a starved process can make a real
 * delay past the threshold; the state under test is a free loop, which a later sample shows.
 */
async function servedWithin (app: TestApp, url: string): Promise<{ status: number, ms: number }> {
  const start = Date.now()
  let status = 0
  while (status !== 200 && Date.now() - start < 10_000) {
    if (status !== 0) await new Promise((resolve) => setTimeout(resolve, 50))
    status = (await app.inject({ method: 'GET', url })).statusCode
  }
  return { status, ms: Date.now() - start }
}

t.test('a blocked event loop: 503 OVERLOADED with Retry-After; live and metrics served; then recovery', async (t) => {
  const app = await build(t, { env: SHEDDING_ENV, tuning: SHEDDING_TUNING })
  t.equal((await servedWithin(app, '/api/product')).status, 200, 'served before')

  const delay = await blockUntilSeen(app)
  t.ok(delay > THRESHOLD_MS, `the sampler saw ${Math.round(delay)} ms of delay`)
  // All at once, within the same sample.
  const [product, ready, login, live, metrics] = await Promise.all([
    app.inject({ method: 'GET', url: '/api/product' }),
    app.inject({ method: 'GET', url: '/health/ready' }),
    app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: 'someone', password: 'a password' } }),
    app.inject({ method: 'GET', url: '/health/live' }),
    app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  ])
  for (const [name, res] of [['GET /api/product', product], ['GET /health/ready', ready], ['POST /api/auth/login', login]] as const) {
    const body = assertProblem(t, res, 503, 'OVERLOADED')
    t.equal(res.headers['retry-after'], '3', `${name}: Retry-After`)
    t.match(body.detail, /overloaded \(event loop delay (over )?\d+ ms\)/, `${name}: detail`)
  }
  t.equal(live.statusCode, 200, '/health/live never sheds')
  t.equal(metrics.statusCode, 200, '/metrics is served while shedding')

  // Recovery: once a sample without the block is taken, requests are served again.
  const again = await servedWithin(app, '/api/product')
  t.equal(again.status, 200, `served again ${again.ms} ms later`)
  t.equal((await servedWithin(app, '/health/ready')).status, 200, 'ready again')

  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  t.match(text, /^http_load_shed_total\{reason="event_loop"\} ([3-9]|\d\d+)$/m, 'shed requests counted by reason (three at least)')
  t.match(text, /^http_request_duration_seconds_count\{method="GET",route="\/health\/ready",status_code="503"\} [1-9]\d*$/m, 'the shed /health/ready counted')
})

t.test('a blocked event loop over real HTTP: refused by admission, before Fastify', async (t) => {
  const app = await build(t, { env: SHEDDING_ENV, tuning: SHEDDING_TUNING })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  const get = async (path: string): Promise<Response> => await fetch(`http://127.0.0.1:${port}${path}`)
  // Served once a sample has seen a free loop (on a busy machine the first may not have).
  let before = 0
  for (const deadline = Date.now() + 10_000; before !== 200 && Date.now() < deadline;) {
    before = (await get('/api/product')).status
    if (before !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(before, 200, 'served before')
  await blockUntilSeen(app)
  const [product, live] = await Promise.all([get('/api/product'), get('/health/live')])
  t.equal(product.status, 503)
  t.equal(product.headers.get('retry-after'), '3')
  const body = await product.json() as { code: string, detail: string }
  t.equal(body.code, 'OVERLOADED')
  t.match(body.detail, /overloaded \(event loop delay (over )?\d+ ms\)/)
  t.equal(live.status, 200, '/health/live is exempt')
  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  t.match(text, /^http_load_shed_total\{reason="event_loop"\} [1-9]/m, 'counted by reason')
  // No Fastify route saw it: the shed request has no duration sample.
  t.notMatch(text, /^http_request_duration_seconds_count\{method="GET",route="\/api\/product",status_code="503"\}/m, 'not seen by Fastify')
})

t.test('MAX_EVENT_LOOP_DELAY_MS=0 never sheds', async (t) => {
  const app = await build(t, { env: { ...SHEDDING_ENV, MAX_EVENT_LOOP_DELAY_MS: '0' }, tuning: SHEDDING_TUNING })
  t.equal(typeof (app as Partial<TestApp>).isUnderPressure, 'undefined', 'under-pressure is not registered')
  busy(1000)
  t.equal((await app.inject({ method: 'GET', url: '/api/product' })).statusCode, 200)
})

t.test('the default threshold is on', async (t) => {
  const { MAX_EVENT_LOOP_DELAY_MS: _off, ...env } = TEST_ENV
  t.equal(loadConfig(env, false).limits.maxEventLoopDelayMs, 200, 'default 200 ms')
  const app = await build(t, { env: { MAX_EVENT_LOOP_DELAY_MS: '200' } })
  t.equal(typeof app.isUnderPressure, 'function')
  // Sampled once a second: a busy machine (the suite's other files) can lag a sample past
  // 200 ms, so the check is that it comes back, not that the first sample was quiet.
  const deadline = Date.now() + 10_000
  while (app.isUnderPressure() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(app.isUnderPressure(), false, 'not under pressure once the loop is quiet')
})
