/**
 * A user deleted while their requests are in flight. Over a real
 * socket, 40 concurrent `POST /api/product` with the user's token race the deletion of that
 * user, by the user (`DELETE /api/user/:id`) or by an admin (`DELETE /api/admin/users/:id`),
 * and 10 concurrent `PATCH /api/user/:id` race it too. A request whose user is gone answers
 * 401 (the token no longer names a user) or 404, never 500 (the product insert must not
 * reach the foreign key, P2003 / SQLSTATE 23503), and nothing is left half-written:
 * the database holds no product of the deleted user. A login whose password was checked just
 * before its user was deleted answers 401 and writes no session (rather than a 500 from the
 * session insert on the foreign key).
 */
import t, { type Test } from 'tap'
import { build, registerAndLogin, TEST_ENV, type TestApp } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { call, type Answer } from './helpers/http.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
const ROUNDS = 6
const PRODUCTS = 40

async function race (t: Test, app: TestApp, base: string, sql: Awaited<ReturnType<typeof sqlClient>>, by: 'user' | 'admin') {
  const counts: Record<string, number> = {}
  for (let round = 0; round < ROUNDS; round++) {
    const me = await registerAndLogin(app)
    const remove = by === 'user'
      ? async () => await call(base, 'DELETE', `/api/user/${me.id}`, { token: me.token, body: { password: me.password } })
      : async () => await call(base, 'DELETE', `/api/admin/users/${me.id}`, { token: ADMIN_KEY })
    // All requests go out at once. The deletion goes out among them (even rounds), or when
    // the answer to one of them arrives (odd rounds), at a different place each round, so
    // it lands among requests in every stage of their work.
    const at = Math.floor((round + 1) * PRODUCTS / (ROUNDS + 1))
    const requests: Promise<Awaited<ReturnType<typeof call>>>[] = []
    let deletion: Promise<Awaited<ReturnType<typeof call>>> | undefined
    for (let i = 0; i < PRODUCTS; i++) {
      if (i === at) deletion = round % 2 === 0 ? remove() : requests[requests.length - 1]!.then(remove)
      requests.push(call(base, 'POST', '/api/product', { token: me.token, body: { title: `race ${round}.${i}`, amount: i } }))
      if (i % 4 === 0) requests.push(call(base, 'PATCH', `/api/user/${me.id}`, { token: me.token, body: { username: `${me.username.slice(0, 20)}_${i}` } }))
    }
    const answers = await Promise.all(requests)
    const deleted = await deletion!
    t.equal((deleted as Answer).status, 204, `round ${round}: the ${by} deletion answered 204`)
    for (const a of answers) {
      if (!('status' in a)) {
        t.fail(`network failure: ${a.error}`)
        continue
      }
      const key = `${a.method} ${a.status}`
      counts[key] = (counts[key] ?? 0) + 1
      if (![200, 201, 401, 404].includes(a.status)) t.fail(`${a.method} ${a.path} answered ${a.status}: ${a.body.slice(0, 200)}`)
      if (a.status >= 400) t.match(a.headers.get('content-type'), /^application\/problem\+json/, 'problem details')
    }
    const left = await sql.query('SELECT count(*)::int AS n FROM products WHERE creator_id = $1', [me.id])
    t.equal(left.rows[0].n, 0, `round ${round}: no product of the deleted user is left`)
    const user = await sql.query('SELECT count(*)::int AS n FROM users WHERE id = $1', [me.id])
    t.equal(user.rows[0].n, 0, `round ${round}: the user is gone`)
  }
  t.comment(`deleted by the ${by}, ${ROUNDS} rounds of ${PRODUCTS} products + ${PRODUCTS / 4} changes: ${JSON.stringify(counts)}`)
  t.ok((counts['POST 401'] ?? 0) > 0, 'some product requests came after the deletion (401): the race took place')
}

t.test('deleting a user while their requests are in flight: 401 or 404, never 500, nothing half-written', async (t) => {
  // The per-account change limit (10 per 15 min) and the per-client share of requests in
  // progress (the race's requests all come from 127.0.0.1) are not what this test is about.
  const app = await build(t, { env: { DB_POOL_SIZE: '10', LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '0' }, tuning: { accountChanges: { max: 1000 } } })
  const sql = await sqlClient(t, app.databaseUrl)
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  t.test('the user deletes themself', async (t) => { await race(t, app, base, sql, 'user') })
  t.test('an admin deletes the user', async (t) => { await race(t, app, base, sql, 'admin') })
})

t.test('a login whose user is deleted after its password was checked: 401, never 500, no session written', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '1000' } })
  const sql = await sqlClient(t, app.databaseUrl)
  const deleter = await sqlClient(t, app.databaseUrl)
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  const me = await registerAndLogin(app)
  // The deletion holds the user's row (uncommitted) while the logins check the password (they
  // still see the row) and then wait to lock it for their session; it commits once they wait.
  await deleter.query('BEGIN')
  await deleter.query('DELETE FROM users WHERE id = $1', [me.id])
  const logins = Array.from({ length: 5 }, async () => await call(base, 'POST', '/api/auth/login', { body: { username: me.username, password: me.password } }))
  const deadline = Date.now() + 30_000
  for (;;) {
    const { rows: [waiting] } = await sql.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
    if (waiting.n >= 5) break
    if (Date.now() > deadline) throw new Error(`the logins never waited for the user's row (${waiting.n} waiting)`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await deleter.query('COMMIT')
  for (const a of await Promise.all(logins)) {
    if (!('status' in a)) {
      t.fail(`network failure: ${a.error}`)
      continue
    }
    t.equal(a.status, 401, `login after the deletion: 401 (${a.body.slice(0, 200)})`)
    t.match(a.headers.get('content-type'), /^application\/problem\+json/, 'problem details')
  }
  const { rows: [left] } = await sql.query('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [me.id])
  t.equal(left.n, 0, 'no session of the deleted user')
})
