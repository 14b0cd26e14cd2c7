/**
 * The one answer to "is the database schema current?": the migrations of prisma/migrations
 * the database has not applied (`_prisma_migrations`). Used by the start (src/server.ts,
 * src/db/migrate-on-start.ts, src/migrate.ts) and by `/health/ready`.
 * `prisma migrate deploy` answers the same question, but its WebAssembly schema engine takes
 * ~10 s to start: the start asks this first and runs the CLI only when there is work.
 */
import { readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../prisma/migrations')

/** The applied migrations' names; an error 42P01 (no such table) means none yet. */
const APPLIED_SQL = 'SELECT migration_name AS name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL'

/** The migrations this code expects, oldest first; none when the folder is not shipped. */
export async function expectedMigrations (dir = MIGRATIONS_DIR): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true })
    return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
}

/** Anything that runs a query: a pg Client or Pool; `queryTimeoutMs` bounds it client-side. */
export interface Queryable {
  query: (config: pg.QueryConfig & { query_timeout?: number }) => Promise<pg.QueryResult<{ name: string }>>
}

/** Of `expected`, those the database has not applied (asked even when none is expected: the database must answer). */
export async function pendingAmong (db: Queryable, expected: string[], queryTimeoutMs?: number): Promise<string[]> {
  const applied = await db.query({ text: APPLIED_SQL, ...(queryTimeoutMs ? { query_timeout: queryTimeoutMs } : {}) }).then(
    ({ rows }) => new Set(rows.map((r) => r.name)),
    (error: { code?: string }) => { if (error.code === '42P01') return new Set<string>(); throw error }
  )
  return expected.filter((name) => !applied.has(name))
}

/** The pending migrations of the database at `databaseUrl` (one connection of its own). */
export async function pendingMigrations (databaseUrl: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const expected = await expectedMigrations(dir)
  const client = new pg.Client({ connectionString: databaseUrl })
  // A database that goes away during the check fails its query; without a listener the
  // connection's 'error' event would end the process.
  client.on('error', () => {})
  await client.connect()
  try {
    return await pendingAmong(client, expected)
  } finally {
    await client.end()
  }
}
