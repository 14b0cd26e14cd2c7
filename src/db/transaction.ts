/**
 * One transaction on a connection of the `pg` pool, for the writes that must hold a lock
 * across statements: a quota is counted after the user's row is locked, in a statement of
 * its own, so that its snapshot sees every earlier writer of that user (under READ
 * COMMITTED a statement's snapshot is taken when it starts, so a count inside the locking
 * statement could miss a writer that committed while it waited). docs/api.md, "Quotas".
 */
import type pg from 'pg'

/** `SELECT ... FOR NO KEY UPDATE` of a user: serialises that user's quota-checked writes (and waits for a deletion of the user). */
export const LOCK_USER_SQL = 'SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE'

/**
 * Runs `work` in a transaction: committed when it resolves, rolled back when it throws (the
 * connection is then dropped rather than reused). A connection that cannot be had keeps the
 * driver error as its cause, so the error handler's classifier answers 503.
 */
export async function transaction<T> (pool: pg.Pool, label: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient
  try {
    client = await pool.connect()
  } catch (error) {
    throw new Error(`Connecting for ${label} failed: ${(error as Error).message}`, { cause: error })
  }
  let failed = false
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
    client.release(failed)
  }
}
