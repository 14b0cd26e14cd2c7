/**
 * Two app instances (two replicas) on one database and one Redis (REDIS_URL, a key prefix of
 * this test's own): every limit counts once for both. Requests are sent concurrently and
 * split across the two, so a limit that counted per process would let twice as many through.
 */
import t, { type Test } from 'tap'
import { buildApp, type Tuning } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin, TEST_ENV, type TestApp } from '../helpers/build.js'
import { createTestDatabase } from '../helpers/database.js'
import { testRedis, type TestRedis } from '../helpers/redis.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

/** Two replicas sharing a database and a Redis prefix. */
async function replicas (t: Test, redis: TestRedis, env: Record<string, string>, tuning: Tuning = {}): Promise<[TestApp, TestApp]> {
  const databaseUrl = await createTestDatabase(t)
  const shared = { ...env, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }
  return [await build(t, { env: shared, databaseUrl, tuning }), await build(t, { env: shared, databaseUrl, tuning })]
}

const login = (username: string, password: string, client = '10.0.0.1') =>
  ({ method: 'POST' as const, url: '/api/auth/login', payload: { username, password }, remoteAddress: client })

t.test('per account: 30 wrong guesses at once, split over two replicas, are capped at LOGIN_FAILURES_MAX', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const [a, b] = await replicas(t, redis, { LOGIN_FAILURES_MAX: '5', LOGIN_FAILURES_WINDOW_MS: '60000' })
  const victim = await registerAndLogin(a)
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
    (i % 2 === 0 ? a : b).inject(login(victim.username, `guess ${i}`, `10.3.0.${i}`))))
  const statuses = results.map((r) => r.statusCode)
  t.equal(statuses.filter((s) => s === 401).length, 5, 'exactly LOGIN_FAILURES_MAX guesses evaluated')
  t.equal(statuses.filter((s) => s === 429).length, 25, 'the rest refused')
  for (const app of [a, b]) {
    const locked = await app.inject(login(victim.username, victim.password, '10.3.1.1'))
    assertProblem(t, locked, 429, 'RATE_LIMITED')
    t.ok(Number(locked.headers['retry-after']) > 50, 'Retry-After: the rest of the window')
  }
  const keys = await redis.client.keys(`${redis.prefix}attempts:guesses:*`)
  t.same(keys, [`${redis.prefix}attempts:guesses:user:${victim.id}`], 'one counter, keyed by the account, under the prefix')
})

t.test('per client: the auth budget (registration, login) is one budget across replicas', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const [a, b] = await replicas(t, redis, { RATE_LIMIT_AUTH_MAX: '6' })
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) =>
    (i % 2 === 0 ? a : b).inject({ method: 'POST', url: '/api/user', payload: newUser(), remoteAddress: '10.4.0.1' })))
  const statuses = results.map((r) => r.statusCode)
  t.equal(statuses.filter((s) => s === 201).length, 6, 'RATE_LIMIT_AUTH_MAX registrations')
  t.equal(statuses.filter((s) => s === 429).length, 10, 'the rest refused')
  for (const app of [a, b]) {
    assertProblem(t, await app.inject(login('someone', 'whatever pass', '10.4.0.1')), 429, 'RATE_LIMITED')
  }
  t.equal((await b.inject({ method: 'POST', url: '/api/user', payload: newUser(), remoteAddress: '10.4.0.2' })).statusCode, 201, 'another client is not limited')
})

t.test('admin keys: wrong keys split over two replicas are capped at the limit of wrong keys', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const [a, b] = await replicas(t, redis, {}, { keyFailures: { max: 4, timeWindow: 60_000 } })
  const wrong = 'x'.repeat(44)
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    (i % 2 === 0 ? a : b).inject({ method: 'GET', url: '/api/admin/users', headers: { authorization: `Bearer ${wrong}${i}` }, remoteAddress: '10.5.0.1' })))
  const statuses = results.map((r) => r.statusCode)
  t.equal(statuses.filter((s) => s === 401).length, 4, 'as many keys checked as the limit')
  t.equal(statuses.filter((s) => s === 429).length, 8, 'the rest refused')
  for (const app of [a, b]) {
    const refused = await app.inject({ method: 'GET', url: '/api/admin/users', headers: { authorization: `Bearer ${ADMIN_KEY}` }, remoteAddress: '10.5.0.1' })
    assertProblem(t, refused, 429, 'RATE_LIMITED')
  }
  const other = await b.inject({ method: 'GET', url: '/api/admin/users', headers: { authorization: `Bearer ${ADMIN_KEY}` }, remoteAddress: '10.5.0.2' })
  t.equal(other.statusCode, 200, 'another client with the right key')
})

t.test('account changes: one budget per user across replicas', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const [a, b] = await replicas(t, redis, {}, { accountChanges: { max: 3, timeWindow: 60_000 } })
  const me = await registerAndLogin(a)
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) {
    const res = await (i % 2 === 0 ? a : b).inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { username: `renamed_${me.id}_${i}` } })
    statuses.push(res.statusCode)
  }
  t.same(statuses, [200, 200, 200, 429, 429, 429])
})

t.test("route limits (@fastify/rate-limit's Redis store) are shared; with Redis down they let requests through", async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const databaseUrl = await createTestDatabase(t)
  const config = loadConfig({ ...TEST_ENV, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, false)
  const apps = []
  for (let i = 0; i < 2; i++) {
    const app = await buildApp({ config, databaseUrl })
    t.teardown(async () => { await app.close() })
    app.get('/limited', { config: { rateLimit: { max: 4, timeWindow: 60_000 } } }, async () => ({ ok: true }))
    await app.ready()
    apps.push(app)
  }
  const statuses = []
  for (let i = 0; i < 8; i++) statuses.push((await apps[i % 2]!.inject({ method: 'GET', url: '/limited', remoteAddress: '10.6.0.1' })).statusCode)
  t.same(statuses, [200, 200, 200, 200, 429, 429, 429, 429], 'four in all, not four per replica')
  t.ok((await redis.client.keys(`${redis.prefix}rate-limit:*`)).length > 0, 'counted under the prefix')

  apps[0]!.redis!.disconnect() // this replica loses Redis: skipOnError lets its requests through
  t.equal((await apps[0]!.inject({ method: 'GET', url: '/limited', remoteAddress: '10.6.0.1' })).statusCode, 200)
})

t.test('password-reset e-mails per address: 10 requests at once, split over two replicas, send 3', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const { startSmtpSink } = await import('../helpers/smtp-sink.js')
  const sink = await startSmtpSink(t)
  const [a, b] = await replicas(t, redis, { SMTP_URL: sink.url, PUBLIC_URL: 'https://shop.example.com' }, { mail: { pollMs: 100, retryBaseMs: 100 } })
  const user = await registerAndLogin(a)
  const answers = await Promise.all(Array.from({ length: 10 }, async (_, i) =>
    await (i % 2 === 0 ? a : b).inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: user.email }, remoteAddress: `10.5.0.${i}` })))
  t.same(answers.map((r) => r.statusCode), Array(10).fill(202), 'every request answered alike')
  const resets = () => sink.received.filter((r) => r.mail.subject === 'Reset your password').length
  while (resets() < 3) await new Promise((resolve) => setTimeout(resolve, 25))
  await new Promise((resolve) => setTimeout(resolve, 500))
  await Promise.all([a.mail.idle(), b.mail.idle()])
  t.equal(resets(), 3, 'three e-mails, counted in Redis for both replicas')
  t.ok(await redis.client.exists(`${redis.prefix}attempts:password-resets:address:${user.email.toLowerCase()}`), 'the count is in Redis')
})

t.test('the budgets match their names: passkey options spend none, the second step its own, each shared across replicas', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const [a, b] = await replicas(t, redis, { RATE_LIMIT_AUTH_MAX: '3', RATE_LIMIT_SECOND_STEP_MAX: '2' })
  const user = newUser()
  t.equal((await a.inject({ method: 'POST', url: '/api/user', payload: user, remoteAddress: '10.9.0.9' })).statusCode, 201)

  // A page that asks for passkey options on every visit, well past RATE_LIMIT_AUTH_MAX.
  const client = '10.9.0.1'
  const options = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).inject({ method: 'POST', url: '/api/auth/passkey/options', remoteAddress: client })))
  t.same([...new Set(options.map((r) => r.statusCode))], [200], '12 options, all answered')
  const logins = [await a.inject(login(user.username, user.password, client)), await b.inject(login(user.username, user.password, client)), await a.inject(login(user.username, user.password, client))]
  t.same(logins.map((r) => r.statusCode), [200, 200, 200], 'and the client\'s logins are all still there')
  assertProblem(t, await b.inject(login(user.username, user.password, client)), 429, 'RATE_LIMITED')

  // The second step: its own count, on both replicas, from a client whose logins are spent.
  const step = (app: TestApp) => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: 'A'.repeat(43), code: '123456' }, remoteAddress: client })
  t.same([(await step(a)).statusCode, (await step(b)).statusCode], [401, 401], 'two tries at a code, though the logins are spent')
  const refused = await step(a)
  assertProblem(t, refused, 429, 'RATE_LIMITED')
  t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After')
  assertProblem(t, await b.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: { id: 'x', rawId: 'x', type: 'public-key', response: { clientDataJSON: 'x', authenticatorData: 'x', signature: 'x' }, clientExtensionResults: {} } }, remoteAddress: client }), 429, 'RATE_LIMITED')
  t.equal((await a.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: 'A'.repeat(43), code: '123456' }, remoteAddress: '10.9.0.2' })).statusCode, 401, 'another client has its own')
})
