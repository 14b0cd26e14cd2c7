/**
 * The schema of a test database from the SQL of prisma/migrations, recorded in
 * `_prisma_migrations` as `prisma migrate deploy` records it (name, SHA-256 checksum,
 * finished_at): a few ms instead of the CLI's ~10 s (its schema engine is WebAssembly). The
 * test template (scripts/test.ts) and the fault tests' clusters use it; the CLI itself is
 * run on empty databases by test/http.test.ts and test/migrate-command.test.ts, and by the
 * container at every compose start (test/deploy/compose.test.ts).
 */
import { createHash, randomUUID } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'
import { MIGRATIONS_DIR } from '../../src/db/pending.js'

/** Applies every migration's SQL and records it the way `prisma migrate deploy` does. */
export async function applyMigrations (url: string): Promise<void> {
  const names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL, "checksum" VARCHAR(64) NOT NULL, "finished_at" TIMESTAMPTZ,
      "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT, "rolled_back_at" TIMESTAMPTZ,
      "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(), "applied_steps_count" INTEGER NOT NULL DEFAULT 0)`)
    for (const name of names) {
      const sql = await readFile(path.join(MIGRATIONS_DIR, name, 'migration.sql'), 'utf8')
      await client.query('BEGIN')
      await client.query(sql)
      await client.query(
        'INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count) VALUES ($1, $2, now(), $3, 1)',
        [randomUUID(), createHash('sha256').update(sql).digest('hex'), name]
      )
      await client.query('COMMIT')
    }
  } finally {
    await client.end()
  }
}
