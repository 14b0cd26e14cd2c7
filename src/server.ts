/**
 * Entry point: configuration -> database (embedded when none is configured) ->
 * migrations -> app.listen, and a graceful close on SIGTERM/SIGINT: stop accepting,
 * finish in-flight requests, close Prisma, stop the embedded database, exit 0.
 */
import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, configuredDatabaseUrl, loadConfig, type Config } from './config.js'
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.js'
import { migrateDeploy } from './db/migrate.js'
import { pendingMigrations } from './db/pending.js'

const GRACE_MS = Number(process.env.SHUTDOWN_GRACE_MS ?? 10_000)

async function main (): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
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
  }

  if (config.MIGRATE_ON_START) {
    const pending = await pendingMigrations(databaseUrl)
    if (pending.length > 0) {
      console.log(`Applying ${pending.length} migration(s): ${pending.join(', ')}`)
      await migrateDeploy(databaseUrl)
    }
  }

  const app = await buildApp({ config, databaseUrl })
  if (config.secretGenerated) {
    app.log.warn('SECRET is not set: using a random one for this run, so tokens end with the process. Set SECRET (32+ characters) to keep them.')
  }

  closeWithGrace({ delay: GRACE_MS }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'closing after an error')
    else app.log.info({ signal }, 'closing')
    await app.close()
    await embedded?.stop()
  })

  const address = await app.listen({ host: config.HOST, port: config.PORT })
  app.log.info(`listening on ${address} (OpenAPI page: ${address}/docs)`)
}

await main()
