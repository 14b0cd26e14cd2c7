/**
 * A database of its own for each test file: a copy of the migrated template that
 * scripts/test.ts prepared, dropped when the file's tests end, unless the whole server is
 * thrown away after the run (TEST_KEEP_DATABASES=1: the embedded one).
 */
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { sqlPool } from '../../src/db/client.js'

export function adminUrl (): string {
  const url = process.env.TEST_ADMIN_URL
  if (!url) throw new Error('TEST_ADMIN_URL is not set: run the tests with `npm test`, which starts the database')
  return url
}

export function databaseUrl (database: string): string {
  const url = new URL(adminUrl())
  url.pathname = `/${database}`
  return url.toString()
}

async function admin (sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try { await client.query(sql) } finally { await client.end() }
}

interface Teardown { teardown: (fn: () => unknown) => void }

/** Drops `name` at teardown, unless the server goes whole after the run. */
function dropAtTeardown (t: Teardown, name: string): void {
  if (process.env.TEST_KEEP_DATABASES === '1') return
  t.teardown(async () => { await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) })
}

/** Creates a fresh, migrated database and returns its URL; it is dropped at teardown. */
export async function createTestDatabase (t: Teardown): Promise<string> {
  const template = process.env.TEST_TEMPLATE_DB
  if (!template) throw new Error('TEST_TEMPLATE_DB is not set: run the tests with `npm test`')
  const name = `ups_test_${randomBytes(6).toString('hex')}`
  await admin(`CREATE DATABASE ${name} TEMPLATE ${template}`)
  dropAtTeardown(t, name)
  return databaseUrl(name)
}

/** Creates an empty database (no migrations) and returns its URL; it is dropped at teardown. */
export async function createEmptyDatabase (t: Teardown): Promise<string> {
  const name = `ups_empty_${randomBytes(6).toString('hex')}`
  await admin(`CREATE DATABASE ${name}`)
  dropAtTeardown(t, name)
  return databaseUrl(name)
}

/** A plain `pg` client on a test database, to look at rows behind the API's back. */
export async function sqlClient (t: Teardown, url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(async () => { await client.end() })
  return client
}

/** The rows of `text` on the app's own pool: tests query tables in SQL, as src/ does. */
export async function query<Row extends pg.QueryResultRow = Record<string, unknown>> (app: FastifyInstance, text: string, values: unknown[] = []): Promise<Row[]> {
  return (await sqlPool(app.prisma).query<Row>(text, values)).rows
}
