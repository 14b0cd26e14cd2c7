/**
 * The one way repositories run SQL of their own on Prisma's `pg` pool (src/db/client.ts),
 * where Prisma cannot say it or costs too much on a hot path:
 *
 * - `rows`: a statement prepared once per connection under its name (unnamed behind
 *   PgBouncer's transaction pooling, DB_PGBOUNCER: see `statementName`). A driver error is
 *   kept as the cause of the error thrown, where the error handler's classifier reads it
 *   (an unreachable database or a timeout is a 503).
 * - `transaction`: the writes that must hold a lock across statements.
 * - `forUser`: a transaction holding a user's row, taken by every write that counts a
 *   per-user quota (docs/api.md, "Quotas"). The quota is counted after the lock, in a
 *   statement of its own, so that its snapshot sees every earlier writer of that user
 *   (under READ COMMITTED a statement's snapshot is taken when it starts, so a count inside
 *   the locking statement could miss a writer that committed while it waited). A deletion
 *   of the user (`FOR UPDATE`) and these writes (`FOR NO KEY UPDATE`) wait for each other.
 */
import type pg from 'pg'
import { sqlPool, statementName, type PrismaClient } from './client.js'

/** The connection of a running transaction: a statement given it runs inside that transaction. */
export type Transaction = pg.PoolClient

/** The row lock of `forUser`; the one statement on `users` outside the users repository. */
const LOCK_USER_SQL = 'SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE'

export interface Sql {
  /** The rows of statement `name`, on `tx` when given, else on a connection of the pool. */
  rows: <Row extends pg.QueryResultRow>(name: string, text: string, values: unknown[], tx?: Transaction) => Promise<Row[]>
  /**
   * Runs `work` in a transaction: committed when it resolves, rolled back when it throws
   * (the connection is then dropped rather than reused). A connection that cannot be had
   * keeps the driver error as its cause (503).
   */
  transaction: <T>(label: string, work: (tx: Transaction) => Promise<T>) => Promise<T>
  /** `transaction`, with user `userId`'s row locked first; null (and nothing done) when there is no such user. */
  forUser: <T>(label: string, userId: number, work: (tx: Transaction) => Promise<T>) => Promise<T | null>
}

export function sql (prisma: PrismaClient): Sql {
  const pool = sqlPool(prisma)

  async function rows<Row extends pg.QueryResultRow> (name: string, text: string, values: unknown[], tx?: Transaction): Promise<Row[]> {
    try {
      return (await (tx ?? pool).query<Row>({ name: statementName(prisma, name), text, values })).rows
    } catch (error) {
      throw new Error(`Query ${name} failed: ${(error as Error).message}`, { cause: error })
    }
  }

  async function transaction<T> (label: string, work: (tx: Transaction) => Promise<T>): Promise<T> {
    let client: pg.PoolClient
    try {
      client = await pool.connect()
    } catch (error) {
      throw new Error(`Connecting for ${label} failed: ${(error as Error).message}`, { cause: error })
    }
    let failed = false
    // A checked-out connection has no listener of the pool's: the database going away
    // mid-transaction would otherwise be an uncaught 'error' event that ends the process.
    // The statement in flight fails with it, and the connection is dropped at release.
    const lost = (): void => { failed = true }
    client.on('error', lost)
    try {
      await client.query('BEGIN')
      const result = await work(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      failed = true
      await client.query('ROLLBACK').catch(() => {})
      throw error
    } finally {
      client.off('error', lost)
      client.release(failed)
    }
  }

  return {
    rows,
    transaction,
    async forUser (label, userId, work) {
      return await transaction(label, async (tx) => {
        const locked = await rows('user-lock-for-write', LOCK_USER_SQL, [userId], tx)
        return locked.length === 0 ? null : await work(tx)
      })
    }
  }
}
