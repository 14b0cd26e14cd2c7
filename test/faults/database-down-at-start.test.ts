/**
 * Fault: the configured database is down when the process starts. The real server
 * (src/server.ts, child process) must listen anyway, answer `/health/live` 200,
 * `/health/ready` and every database route 503 with Retry-After in problem details,
 * quickly; and when the database comes up, apply the pending migrations in the
 * background (the real `prisma migrate deploy`) and serve, with no restart.
 */
import t, { type Test as Tap } from 'tap'
import { newUser } from '../helpers/build.js'
import { startCluster } from './helpers/cluster.js'
import { call, isAnswer, problemViolations, signToken, type Answer } from './helpers/http.js'
import { spawnServer, waitFor } from './helpers/server.js'

/** An answer, or a failed assertion naming the network error. */
function answered (t: Tap, r: Awaited<ReturnType<typeof call>>): Answer {
  if (!isAnswer(r)) { t.fail(`${r.method} ${r.path}: ${r.error}`); throw new Error(r.error) }
  return r
}

t.test('the database is down at start, then comes up', async (t) => {
  const cluster = await startCluster(t)
  await cluster.stop()

  // A connect timeout far above the bound below: a 503 that waited for it would fail clearly,
  // while CPU contention on a loaded CI machine (bcrypt in niced workers) cannot.
  const server = await spawnServer(t, { DATABASE_URL: cluster.url, DB_CONNECT_TIMEOUT_MS: '30000' })
  t.ok(server.alive(), 'the process listens with the database down')

  const live = answered(t, await call(server.url, 'GET', '/health/live'))
  t.equal(live.status, 200, '/health/live is 200')

  const ready = answered(t, await call(server.url, 'GET', '/health/ready'))
  t.equal(ready.status, 503, '/health/ready is 503')
  t.same(problemViolations(ready), [], 'readiness 503 is problem details with Retry-After')

  // A well-signed token for a user that may exist: only the database can say.
  const token = signToken({ sub: '1', ver: 0, sid: '00000000-0000-4000-8000-000000000000' })
  const routes: [string, string, { body?: unknown, token?: string }][] = [
    ['POST', '/api/user', { body: newUser() }],
    ['POST', '/api/auth/register', { body: newUser() }],
    ['POST', '/api/auth/login', { body: { username: 'someone', password: 'some password' } }],
    ['GET', '/api/product', {}],
    ['GET', '/api/product/1', {}],
    ['GET', '/api/user/1', { token }],
    ['PATCH', '/api/user/1', { token, body: { username: 'renamed' } }],
    ['POST', '/api/product', { token, body: { title: 'A lamp', description: '', amount: 100 } }],
    ['DELETE', '/api/product/1', { token }]
  ]
  let slowest = 0
  for (const [method, path, options] of routes) {
    const res = answered(t, await call(server.url, method, path, options))
    slowest = Math.max(slowest, res.ms)
    t.equal(res.status, 503, `${method} ${path} is 503 while the database is down`)
    t.same(problemViolations(res), [], `${method} ${path}: problem details with Retry-After`)
    t.equal(res.json?.code, 'SERVICE_UNAVAILABLE', `${method} ${path}: code SERVICE_UNAVAILABLE`)
  }
  t.ok(slowest < 10_000, `every 503 came quickly, refused rather than timed out (slowest ${slowest} ms; connect timeout 30 s)`)
  t.comment(`database routes answered 503 in at most ${slowest} ms`)

  await cluster.start()
  const recoveryMs = await waitFor('/health/ready 200', async () => {
    const r = await call(server.url, 'GET', '/health/ready')
    return isAnswer(r) && r.status === 200
  }, 120_000, 250)
  t.comment(`ready ${recoveryMs} ms after the database came up (migrations applied by the running server)`)
  t.ok(server.logs.some((l) => /^Applying \d+ migrations?/.test(l.msg ?? '')), 'the server applied the pending migration itself')
  t.ok(server.logs.some((l) => /^Migrations not applied yet/.test(l.msg ?? '')), 'and logged its retries while the database was down')

  const body = newUser()
  const created = answered(t, await call(server.url, 'POST', '/api/user', { body }))
  t.equal(created.status, 201, 'registration works after recovery')
  const login = answered(t, await call(server.url, 'POST', '/api/auth/login', { body: { username: body.username, password: body.password } }))
  t.equal(login.status, 200, 'login works after recovery')
  const me = answered(t, await call(server.url, 'GET', `/api/user/${created.json.id}`, { token: login.json.token }))
  t.equal(me.status, 200, 'authenticated read works after recovery')
  const product = answered(t, await call(server.url, 'POST', '/api/product', { token: login.json.token, body: { title: 'A lamp', amount: 100 } }))
  t.equal(product.status, 201, 'product creation works after recovery')
  t.ok(server.alive(), 'the same process, never restarted')

  server.child.kill('SIGTERM')
  const exit = await server.exited
  t.equal(exit.code, 0, 'and it closes cleanly')
})
