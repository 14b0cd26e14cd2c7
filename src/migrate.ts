/**
 * `npm run db:migrate` (in the image: `node dist/migrate.js`): applies pending migrations to
 * the database the configuration names (the environment and `.env`, as the server reads
 * them), or to the embedded PostgreSQL when none is named, then exits. The server does the
 * same at start (MIGRATE_ON_START); this runs it alone, e.g. with MIGRATE_ON_START=false.
 */
import { loadConfig } from './config.js'
import { migrateDeploy } from './db/migrate.js'
import { openDatabase } from './db/open.js'
import { pendingMigrations } from './db/pending.js'
import { exitOnSetupError } from './lib/setup-error.js'

try {
  const database = await openDatabase(loadConfig().database)
  try {
    const pending = await pendingMigrations(database.url)
    if (pending.length === 0) {
      console.log('The database schema is up to date: nothing to apply.')
    } else {
      console.log(`Applying ${pending.length} migration(s): ${pending.join(', ')}`)
      await migrateDeploy(database.url)
      console.log('Done.')
    }
  } finally {
    await database.embedded?.stop()
  }
} catch (error) {
  try {
    exitOnSetupError(error)
  } catch {
    console.error(`Migration failed: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  }
}
