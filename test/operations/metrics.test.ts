/**
 * GET /metrics (src/plugins/metrics.ts, src/modules/metrics/routes.ts): Prometheus text
 * behind the admin key, route patterns as labels (never URLs), 429s counted by route,
 * the database pool, the hashing queue and the process metrics.
 */
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, registerAndLogin, TEST_ENV } from '../helpers/build.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
const scrape = { method: 'GET' as const, url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } }

/** The value of one sample line (`name{labels} value`), or undefined when absent. */
function sample (text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

t.test('not public: no key, a wrong key or a malformed header is a 401 in problem details', async (t) => {
  const app = await build(t)
  assertProblem(t, await app.inject({ method: 'GET', url: '/metrics' }), 401, 'API_KEY_MISSING')
  assertProblem(t, await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer not-the-admin-key-0123456789' } }), 401, 'API_KEY_INVALID')
  assertProblem(t, await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Basic ${ADMIN_KEY}` } }), 401, 'API_KEY_MISSING')
  // A JWT of a user is not an admin key either.
  const me = await registerAndLogin(app)
  assertProblem(t, await app.inject({ method: 'GET', url: '/metrics', headers: me.auth }), 401, 'API_KEY_INVALID')
  // Not in the public OpenAPI document.
  const openapi = await app.inject({ method: 'GET', url: '/docs/json' })
  t.notOk(Object.hasOwn(openapi.json().paths, '/metrics'), '/metrics is not documented publicly')
})

t.test('wrong keys on /metrics and /api/admin use one budget per client', async (t) => {
  const app = await build(t, { tuning: { keyFailures: { max: 2 } } })
  const wrong = { authorization: 'Bearer wrong-key-wrong-key-wrong-key-0123' }
  const client = { remoteAddress: '10.1.2.3' }
  assertProblem(t, await app.inject({ method: 'GET', url: '/api/admin/users', headers: wrong, ...client }), 401, 'API_KEY_INVALID')
  assertProblem(t, await app.inject({ method: 'GET', url: '/metrics', headers: wrong, ...client }), 401, 'API_KEY_INVALID')
  const locked = await app.inject({ ...scrape, ...client })
  assertProblem(t, locked, 429, 'RATE_LIMITED')
  t.ok(Number(locked.headers['retry-after']) >= 1, 'Retry-After')
  t.equal((await app.inject(scrape)).statusCode, 200, 'another client is not affected')
})

t.test('with no admin key configured, /metrics refuses every request', async (t) => {
  const app = await build(t, { env: { ADMIN_API_KEYS: '' } })
  assertProblem(t, await app.inject(scrape), 401, 'API_KEY_INVALID')
})

t.test('the admin key gets Prometheus text with every family', async (t) => {
  const app = await build(t)
  await registerAndLogin(app) // a hash and a verification
  const res = await app.inject(scrape)
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  const text = res.body
  for (const name of [
    'http_request_duration_seconds', 'http_requests_in_flight', 'http_rate_limited_total', 'http_load_shed_total',
    'db_pool_connections', 'db_pool_waiting_clients', 'db_pool_max_connections',
    'password_queue_size', 'password_task_duration_seconds',
    'process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes'
  ]) {
    t.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} is exported`)
  }
  t.equal(sample(text, 'db_pool_max_connections'), app.config.database.poolSize, 'pool size')
  t.ok((sample(text, 'db_pool_connections', '{state="idle"}') ?? 0) + (sample(text, 'db_pool_connections', '{state="in_use"}') ?? 0) >= 1, 'the pool has opened a connection')
  t.equal(sample(text, 'db_pool_waiting_clients'), 0)
  t.equal(sample(text, 'password_queue_size'), 0)
  t.equal(sample(text, 'password_task_duration_seconds_count', '{op="hash"}'), 1, 'one hash (the registration)')
  t.equal(sample(text, 'password_task_duration_seconds_count', '{op="verify"}'), 1, 'one verification (the login)')
  t.equal(sample(text, 'http_requests_in_flight'), 0, 'nothing in flight: the scrape is never counted (test/operations/admission.test.ts counts real ones)')
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="POST",route="/api/user",status_code="201"}'), 1)
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="POST",route="/api/auth/login",status_code="200"}'), 1)
})

t.test('labels are route patterns: ids and unknown URLs never become labels', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  for (const id of [987654, 987655, 987656]) {
    t.equal((await app.inject({ method: 'GET', url: `/api/product/${id}` })).statusCode, 404)
  }
  t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: me.auth })).statusCode, 200)
  for (const junk of ['/wp-admin/setup-config.php', '/random-a1b2c3', '/api/product/x/y/z?q=secret-value']) {
    t.equal((await app.inject({ method: 'GET', url: junk })).statusCode, 404)
  }
  const text = (await app.inject(scrape)).body
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="GET",route="/api/product/:id",status_code="404"}'), 3, 'three ids, one series')
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="GET",route="/api/user/:id",status_code="200"}'), 1)
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="GET",route="unmatched",status_code="404"}'), 3, 'unknown URLs share one series')
  for (const raw of ['987654', `/api/user/${me.id}"`, 'wp-admin', 'a1b2c3', 'secret-value']) {
    t.notOk(text.includes(raw), `${raw} is not a label`)
  }
})

t.test('a 429 is counted by route', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '2' } })
  const login = { method: 'POST' as const, url: '/api/auth/login', payload: { username: 'nobody', password: 'wrong password' }, remoteAddress: '10.9.8.7' }
  t.equal((await app.inject(login)).statusCode, 401)
  t.equal((await app.inject(login)).statusCode, 401)
  assertProblem(t, await app.inject(login), 429, 'RATE_LIMITED')
  assertProblem(t, await app.inject(login), 429, 'RATE_LIMITED')
  const text = (await app.inject(scrape)).body
  t.equal(sample(text, 'http_rate_limited_total', '{method="POST",route="/api/auth/login"}'), 2)
  t.equal(sample(text, 'http_request_duration_seconds_count', '{method="POST",route="/api/auth/login",status_code="429"}'), 2)
})

t.test('each app has its own registry', async (t) => {
  const a = await build(t)
  const b = await build(t, { databaseUrl: a.databaseUrl })
  await a.inject({ method: 'GET', url: '/health/live' })
  const textB = (await b.inject(scrape)).body
  t.equal(sample(textB, 'http_request_duration_seconds_count', '{method="GET",route="/health/live",status_code="200"}'), undefined, "a's request is not in b's metrics")
})
