/**
 * Whether prisma/migrations holds migrations the database has not applied. `prisma migrate
 * deploy` answers the same question, but its WebAssembly schema engine takes ~10 s to
 * start; the start script asks this first and runs the CLI only when there is work.
 */
import { readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../prisma/migrations')

export async function pendingMigrations (databaseUrl: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const local = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort()
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT migration_name AS name FROM _prisma_migrations
        WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`
    ).catch((error: { code?: string }) => {
      if (error.code === '42P01') return { rows: [] } // no migrations table yet
      throw error
    })
    const applied = new Set(rows.map((r) => r.name))
    return local.filter((name) => !applied.has(name))
  } finally {
    await client.end()
  }
}
