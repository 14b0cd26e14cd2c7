/**
 * The service behind a real PgBouncer in transaction pooling mode (docs/operations.md,
 * "PgBouncer"): with DB_PGBOUNCER=true, registrations, logins, authenticated reads and
 * product writes run concurrently with no error while a few server connections serve many
 * client connections. Without it, the service's named prepared statements (the token check,
 * the login lookup) break there, which this test also shows, so it can fail.
 */
import t from 'tap'
import { build, newUser } from '../helpers/build.js'
import { createTestDatabase } from '../helpers/database.js'
import { startPgBouncer } from '../helpers/pgbouncer.js'

interface Result { step: string, status: number, body: string }

/** Registers, logs in, reads its own record and creates and reads a product, for `n` users at once. */
async function workload (app: Awaited<ReturnType<typeof build>>, n: number): Promise<Result[]> {
  const results: Result[] = []
  const record = (step: string, res: { statusCode: number, body: string }) => { results.push({ step, status: res.statusCode, body: res.body.slice(0, 200) }); return res }
  await Promise.all(Array.from({ length: n }, async () => {
    const user = newUser()
    const created = record('register', await app.inject({ method: 'POST', url: '/api/auth/register', payload: user }))
    if (created.statusCode !== 201) return
    const login = record('login', await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } }))
    if (login.statusCode !== 200) return
    const auth = { authorization: `Bearer ${JSON.parse(login.body).token as string}` }
    const id = JSON.parse(created.body).id as number
    for (let i = 0; i < 3; i++) record('read', await app.inject({ method: 'GET', url: `/api/user/${id}`, headers: auth }))
    const product = record('create', await app.inject({ method: 'POST', url: '/api/product', headers: auth, payload: { title: `thing of ${user.username}`, amount: 500 } }))
    if (product.statusCode === 201) record('read product', await app.inject({ method: 'GET', url: `/api/product/${JSON.parse(product.body).id as number}` }))
  }))
  return results
}

t.test('DB_PGBOUNCER=true: register, login, read and create concurrently through PgBouncer (transaction mode)', async (t) => {
  const direct = await createTestDatabase(t)
  const bouncer = await startPgBouncer(t, direct, 2)
  if (bouncer === undefined) return
  const app = await build(t, { databaseUrl: bouncer.url, env: { DB_PGBOUNCER: 'true', DB_POOL_SIZE: '10' } })
  const results = await workload(app, 25)
  const failures = results.filter((r) => r.status >= 400)
  t.same(failures, [], 'no request failed')
  const steps = (step: string) => results.filter((r) => r.step === step).length
  t.equal(steps('register'), 25)
  t.equal(steps('login'), 25)
  t.equal(steps('read'), 75)
  t.equal(steps('create'), 25)
  t.equal(steps('read product'), 25)
  t.equal((await app.inject('/health/ready')).statusCode, 200, 'ready through PgBouncer')
})

t.test('without DB_PGBOUNCER the named prepared statements break behind transaction pooling (the reason for the setting)', async (t) => {
  const direct = await createTestDatabase(t)
  const bouncer = await startPgBouncer(t, direct, 2)
  if (bouncer === undefined) return
  // statement_timeout off: PgBouncer would refuse the startup parameter before any statement ran.
  const app = await build(t, { databaseUrl: bouncer.url, env: { DB_STATEMENT_TIMEOUT_MS: '0', DB_POOL_SIZE: '10' } })
  const results = await workload(app, 25)
  const failures = results.filter((r) => r.status >= 500)
  t.ok(failures.length > 0, `requests failed (${failures.length} of ${results.length})`)
  t.match(failures.map((f) => f.body).join('\n'), /SERVICE_UNAVAILABLE|INTERNAL/, 'as 5xx problem details')
})

t.test('without DB_PGBOUNCER the statement_timeout startup parameter is refused by PgBouncer', async (t) => {
  const direct = await createTestDatabase(t)
  const bouncer = await startPgBouncer(t, direct, 2)
  if (bouncer === undefined) return
  const app = await build(t, { databaseUrl: bouncer.url, env: { DB_STATEMENT_TIMEOUT_MS: '5000' } })
  const res = await app.inject({ method: 'GET', url: '/api/product' })
  t.equal(res.statusCode, 503, 'every query fails: the connection is refused')
})
