/**
 * The connection budget check at start (src/db/pool-budget.ts): DB_POOL_SIZE x API_REPLICAS
 * against the server's max_connections, a warning when it does not fit; behind PgBouncer,
 * a warning when the statement timeout is not set on the server side.
 */
import pg from 'pg'
import t from 'tap'
import { checkPoolBudget, judge } from '../../src/db/pool-budget.js'
import { createTestDatabase } from '../helpers/database.js'
import { startPgBouncer } from '../helpers/pgbouncer.js'
import { spawnServer } from '../faults/helpers/server.js'

const server = { maxConnections: 100, superuserReserved: 3, reserved: 0, inUse: 1, roleLimit: -1 }

t.test('judge: fits, too many for the server, too many beside the connections open now, past the role limit', async (t) => {
  const fits = judge({ poolSize: 10, replicas: 3 }, server)
  t.equal(fits.level, 'info')
  t.match(fits.message, /= 30 connections within the server's 97/)

  const over = judge({ poolSize: 10, replicas: 10 }, server)
  t.equal(over.level, 'warn')
  t.match(over.message, /DB_POOL_SIZE 10 x API_REPLICAS 10 = 100 connections, more than the 97 the server gives clients \(max_connections 100 less 3 reserved\)/)
  t.match(over.figures, { needed: 100, available: 97 })

  const crowded = judge({ poolSize: 10, replicas: 9 }, { ...server, inUse: 20 })
  t.equal(crowded.level, 'warn')
  t.match(crowded.message, /not beside the 19 other connections open now/)

  t.equal(judge({ poolSize: 10, replicas: 3 }, { ...server, reserved: 70 }).level, 'warn', "PostgreSQL 16's reserved_connections count too")
  const role = judge({ poolSize: 10, replicas: 2 }, { ...server, roleLimit: 15 })
  t.equal(role.level, 'warn')
  t.match(role.message, /this role's connection limit \(15\)/)
})

t.test("checkPoolBudget reads the server's figures", async (t) => {
  const url = await createTestDatabase(t)
  const pool = new pg.Pool({ connectionString: url, max: 1 })
  t.teardown(async () => { await pool.end() })
  const { rows } = await pool.query<{ max_connections: string }>('SHOW max_connections')
  const max = Number(rows[0]!.max_connections)
  const fine = await checkPoolBudget(pool, { poolSize: 1, replicas: 1, pgbouncer: false, statementTimeoutMs: 5000 })
  t.equal(fine.figures.maxConnections, max, 'max_connections as the server reports it')
  t.ok(Number(fine.figures.inUse) >= 1, 'the connections open now, this one included')
  const over = await checkPoolBudget(pool, { poolSize: 10, replicas: max, pgbouncer: false, statementTimeoutMs: 5000 })
  t.equal(over.level, 'warn')
  t.match(over.message, /more than the \d+ the server gives clients/)
})

t.test('behind PgBouncer: the statement timeout must be set on the server side', async (t) => {
  const url = await createTestDatabase(t)
  const bouncer = await startPgBouncer(t, url)
  if (bouncer === undefined) return
  const pool = new pg.Pool({ connectionString: bouncer.url, max: 1 })
  t.teardown(async () => { await pool.end() })
  const unset = await checkPoolBudget(pool, { poolSize: 10, replicas: 3, pgbouncer: true, statementTimeoutMs: 5000 })
  t.equal(unset.level, 'warn')
  t.match(unset.message, /ALTER ROLE <user> SET statement_timeout = '5000ms'/)
  // With the timeout set on the database (before PgBouncer opens a server connection to it):
  const withTimeout = await createTestDatabase(t)
  const admin = new pg.Client({ connectionString: withTimeout })
  await admin.connect()
  await admin.query(`ALTER DATABASE ${new URL(withTimeout).pathname.slice(1)} SET statement_timeout = '5s'`)
  await admin.end()
  const second = await startPgBouncer(t, withTimeout)
  if (second === undefined) return
  const fresh = new pg.Pool({ connectionString: second.url, max: 1 })
  t.teardown(async () => { await fresh.end() })
  const verdict = await checkPoolBudget(fresh, { poolSize: 10, replicas: 3, pgbouncer: true, statementTimeoutMs: 5000 })
  t.equal(verdict.level, 'info')
  t.match(verdict.message, /max_client_conn must cover 30/)
})

t.test('the server logs the warning at start', { timeout: 120_000 }, async (t) => {
  const url = await createTestDatabase(t)
  const started = await spawnServer(t, { DATABASE_URL: url, DB_POOL_SIZE: '50', API_REPLICAS: '100', MIGRATE_ON_START: 'false' }, 90_000)
  const deadline = Date.now() + 30_000
  while (!started.logs.some((l) => /API_REPLICAS/.test(l.msg ?? '')) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  const line = started.logs.find((l) => /API_REPLICAS/.test(l.msg ?? ''))
  t.ok(line, 'a line about the budget')
  t.equal(line?.level, 40, 'at warn level')
  t.match(line?.msg, /DB_POOL_SIZE 50 x API_REPLICAS 100 = 5000 connections, more than the/)
})
