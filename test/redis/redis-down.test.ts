/**
 * Redis stopped under load (a redis-server of this test's own, killed with SIGKILL and
 * started again on the same port; the machine's shared Redis is never touched). The
 * documented choice (docs/operations.md, "Redis"): the limits that guard passwords and keys
 * fail closed (login, registration and admin keys answer 503 problem details with
 * Retry-After), reads stay up, readiness stays 200 and reports `redis: unavailable`, and
 * everything recovers without a restart when Redis is back.
 */
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin, TEST_ENV } from '../helpers/build.js'
import { redisServer } from '../helpers/redis.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

interface Answer { kind: 'read' | 'login', sentAt: number, answeredAt: number, status: number }

t.test('Redis killed under load: logins fail closed with 503, reads stay up, all recover when it is back', async (t) => {
  const server = await redisServer(t)
  const app = await build(t, { env: { REDIS_URL: server.url, REDIS_KEY_PREFIX: 'down-test:' }, tuning: { redis: { connectTimeoutMs: 1000 } } })
  t.ok(app.redis, 'the app has a Redis client')
  const me = await registerAndLogin(app)
  // The log-in loops use an account of their own: their sessions past SESSIONS_MAX_PER_USER
  // would otherwise end the readers' session (401).
  const other = await registerAndLogin(app)
  t.same((await app.inject('/health/ready')).json(), { status: 'ok', redis: 'ok' }, 'readiness reports Redis')

  // Steady load: 4 readers and 2 log-in loops until told to stop.
  const answers: Answer[] = []
  const load = { running: true }
  const loop = async (kind: Answer['kind'], n: number): Promise<void> => {
    while (load.running) {
      const sentAt = Date.now()
      const res = kind === 'read'
        ? await app.inject({ method: 'GET', url: n % 2 === 0 ? '/api/product' : `/api/user/${me.id}`, headers: me.auth })
        : await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: other.username, password: other.password } })
      answers.push({ kind, sentAt, answeredAt: Date.now(), status: res.statusCode })
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
  const loops = Promise.all([0, 1, 2, 3].map((n) => loop('read', n)).concat([0, 1].map((n) => loop('login', n))))
  const wait = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))

  // Load running with Redis up (no fixed wait: a busy machine may take its time).
  const upDeadline = Date.now() + 30_000
  while (!answers.some((a) => a.kind === 'login' && a.status === 200) && Date.now() < upDeadline) await wait(50)
  await server.stop()
  const downFrom = Date.now()
  // The load runs on while it is down, until a few logins have been answered.
  const downDeadline = Date.now() + 30_000
  while (answers.filter((a) => a.kind === 'login' && a.sentAt >= downFrom).length < 4 && Date.now() < downDeadline) await wait(50)

  // While it is down: the checks that guard passwords and keys answer 503, with Retry-After.
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
  const body = assertProblem(t, login, 503, 'SERVICE_UNAVAILABLE')
  t.match(body.detail, /limits store is unavailable/)
  t.equal(login.headers['retry-after'], '5')
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', payload: newUser() }), 503, 'SERVICE_UNAVAILABLE')
  const admin = await app.inject({ method: 'GET', url: '/api/admin/users', headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  assertProblem(t, admin, 503, 'SERVICE_UNAVAILABLE')
  t.ok(admin.headers['retry-after'], 'Retry-After on the admin 503 too')
  t.same((await app.inject('/health/ready')).json(), { status: 'ok', redis: 'unavailable' }, 'ready, reporting Redis unavailable')

  const downUntil = Date.now()
  await server.start()
  // Back: the client reconnects on its own (backing off to 2 s between attempts).
  const deadline = Date.now() + 20_000
  let recovered = false
  while (Date.now() < deadline) {
    const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    if (res.statusCode === 200) { recovered = true; break }
    await wait(100)
  }
  t.ok(recovered, 'logins work again once Redis is back, without a restart')
  t.same((await app.inject('/health/ready')).json(), { status: 'ok', redis: 'ok' })
  await wait(300)
  load.running = false
  await loops

  const reads = answers.filter((a) => a.kind === 'read')
  const logins = answers.filter((a) => a.kind === 'login')
  t.ok(reads.length > 4, `reads under load (${reads.length})`)
  t.same(reads.filter((a) => a.status !== 200).map((a) => a.status), [], 'every read answered 200, Redis up or down')
  const duringDown = logins.filter((a) => a.sentAt >= downFrom && a.answeredAt <= downUntil)
  t.ok(duringDown.length > 0, `logins while Redis was down (${duringDown.length})`)
  t.same([...new Set(duringDown.map((a) => a.status))], [503], 'every login while it was down: 503 (fail closed)')
  t.ok(logins.some((a) => a.sentAt < downFrom && a.status === 200), 'logins before: 200')
  t.same(answers.filter((a) => a.status >= 500 && a.status !== 503), [], 'no 500')
})
