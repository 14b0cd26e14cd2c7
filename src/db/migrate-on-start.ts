/**
 * Applies pending migrations in the background, retrying until the database answers.
 * The server listens first and runs this afterwards, so a database that is down at start
 * does not stop the process: `/health/live` answers 200 at once, `/health/ready` and the
 * routes that need the database answer 503 (with Retry-After) until the database is up
 * and the schema is current, and then the service recovers with no restart.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { migrateDeploy } from './migrate.js'
import { pendingMigrations } from './pending.js'

interface MigratorLog {
  info: (message: string) => void
  warn: (message: string) => void
}

export interface MigratorOptions {
  url: string
  log: MigratorLog
  /** First retry delay; it doubles up to `maxDelayMs`. */
  minDelayMs?: number
  maxDelayMs?: number
  /** How long one connection attempt may take. */
  connectTimeoutMs?: number
  /** Injectable for tests. */
  pending?: (url: string) => Promise<string[]>
  migrate?: (url: string) => Promise<unknown>
}

export interface Migrator {
  /** Resolves when the schema is current, or when stopped. */
  done: Promise<void>
  stop: () => void
}

/** One connection with a bounded connect time: true when the database answers. */
async function reachable (url: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs })
  client.on('error', () => {}) // a drop after connect is reported by the query below
  try {
    await client.connect()
    await client.query('SELECT 1')
  } finally {
    await client.end().catch(() => {})
  }
}

export function migrateInBackground (options: MigratorOptions): Migrator {
  const minDelay = options.minDelayMs ?? 500
  const maxDelay = options.maxDelayMs ?? 10_000
  const timeout = options.connectTimeoutMs ?? 3000
  const pending = options.pending ?? pendingMigrations
  const migrate = options.migrate ?? migrateDeploy
  const controller = new AbortController()

  async function run (): Promise<void> {
    let delay = minDelay
    for (let attempt = 1; !controller.signal.aborted; attempt++) {
      try {
        await reachable(options.url, timeout)
        const names = await pending(options.url)
        if (names.length > 0) {
          options.log.info(`Applying ${names.length} migration(s): ${names.join(', ')}`)
          await migrate(options.url)
        }
        options.log.info('The database schema is up to date')
        return
      } catch (error) {
        if (controller.signal.aborted) return
        options.log.warn(`Migrations not applied yet (attempt ${attempt}, retrying in ${delay} ms): ${firstLine(error)}`)
        await sleep(delay, undefined, { signal: controller.signal }).catch(() => {})
        delay = Math.min(delay * 2, maxDelay)
      }
    }
  }

  return { done: run(), stop: () => controller.abort() }
}

function firstLine (error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  const line = message.split('\n').find((l) => l.trim() !== '')
  return line ?? String((error as { code?: unknown }).code ?? 'unknown error')
}
