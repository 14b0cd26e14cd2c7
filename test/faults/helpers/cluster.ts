/**
 * A PostgreSQL cluster of a test's own, which the test may stop and start again (same
 * data folder, same port), removed at teardown. Its schema comes from the SQL of
 * prisma/migrations, recorded in `_prisma_migrations` as `prisma migrate deploy` records
 * it (name, SHA-256 checksum, finished_at): a few ms instead of the CLI's ~10 s.
 */
import { createHash, randomUUID } from 'node:crypto'
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../../src/db/embedded.js'
import { MIGRATIONS_DIR } from '../../../src/db/pending.js'

interface Teardown { teardown: (fn: () => unknown) => void }

export interface Cluster {
  /** URL of the application database `app`. */
  url: string
  port: number
  running: () => boolean
  stop: () => Promise<void>
  start: () => Promise<void>
}

export async function startCluster (t: Teardown): Promise<Cluster> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'ups-fault-'))
  await chmod(parent, 0o755) // as root, PostgreSQL runs as `postgres`, which must reach the folder
  const dataDir = path.join(parent, 'pg')
  // Not ephemeral: an ephemeral cluster deletes its folder on stop, and this one restarts.
  let current: EmbeddedDatabase | undefined = await startEmbeddedPostgres({ dataDir, database: 'app' })
  const { url, port } = current
  t.teardown(async () => {
    await current?.stop()
    await rm(parent, { recursive: true, force: true })
  })
  return {
    url,
    port,
    running: () => current !== undefined,
    async stop () {
      await current?.stop()
      current = undefined
    },
    async start () {
      if (current) return
      current = await startEmbeddedPostgres({ dataDir, port, database: 'app' })
    }
  }
}

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
