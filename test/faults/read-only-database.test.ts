/**
 * A primary demoted by a failover (deploy/ha, docs/operations.md "Failover") takes only reads
 * until the connections to it are dropped: a write there fails with SQLSTATE 25006
 * (read_only_sql_transaction). The service answers it 503 with Retry-After, as any other
 * "database away for now", never 500, and writes nothing; reads keep working. The server is
 * a real PostgreSQL made read-only the way a standby is for its sessions
 * (`default_transaction_read_only`, set on the test's database).
 */
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, injectAs, newUser, registerAndLogin } from '../helpers/build.js'
import { adminUrl, createTestDatabase, sqlClient } from '../helpers/database.js'
import pg from 'pg'

t.test('writes on a read-only server: 503 + Retry-After, nothing written; reads still 200', async (t) => {
  const url = await createTestDatabase(t)
  // Written while the server takes writes: a user with a token, and one product.
  const writable = await build(t, { databaseUrl: url })
  const me = await registerAndLogin(writable)
  const made = await injectAs(writable, me, { method: 'POST', url: '/api/product', payload: { title: 'Lamp', amount: 100 } })
  t.equal(made.statusCode, 201)
  await writable.close()

  const name = new URL(url).pathname.slice(1)
  const admin = new pg.Client({ connectionString: adminUrl() })
  await admin.connect()
  await admin.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
  await admin.end()

  const app = await build(t, { databaseUrl: url })
  const db = await sqlClient(t, url)
  const count = async (table: string): Promise<number> => (await db.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n
  const before = { users: await count('users'), products: await count('products') }

  const writes = [
    ['register (Variant B)', await app.inject({ method: 'POST', url: '/api/user', payload: newUser() })],
    ['register (Variant A)', await app.inject({ method: 'POST', url: '/api/auth/register', payload: newUser() })],
    ['create a product', await injectAs(app, me, { method: 'POST', url: '/api/product', payload: { title: 'Pen', amount: 1 } })],
    ['log in', await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })]
  ] as const
  for (const [what, res] of writes) {
    t.test(what, async (t) => {
      const body = assertProblem(t, res, 503, 'SERVICE_UNAVAILABLE')
      t.match(body.detail, /only reads/)
      t.equal(res.headers['retry-after'], '5')
    })
  }
  t.same({ users: await count('users'), products: await count('products') }, before, 'nothing written')

  const read = await app.inject({ method: 'GET', url: `/api/product/${made.json().id as number}` })
  t.equal(read.statusCode, 200, 'a read is served')
})
